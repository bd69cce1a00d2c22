"""The Filippov sliding system of `gradient_flow`, on the slots of its sliding entries.

With lambda_k the blend of sliding entry k between its held branch (0) and its other branch
(1), the residual r(lambda) = dz_S/dt (the switching variables' velocities) is affine in each
lambda_k and multi-affine in all. A sliding mode has r_k = 0 with 0 < lambda_k < 1; an entry
pushed off its kink is *pinned* at a bound: lambda_k = 0 where it moves into its held side
(sign_k r_k >= 0, sign_k = +1 where the held branch is z > 0), lambda_k = 1 where it moves
into the other (sign_k r_k <= 0). Finding lambda is a box complementarity problem (an MLCP),
the one-step nonsmooth problem of an event-capturing scheme (Acary and Brogliato 2008): where
two kinks are coupled (one slides only while the other is on a given side) it decides them
together, where deciding each entry alone made them take turns, each flip a few rejected
steps.

`SlidingSystem` does the linear algebra, once per step (`integrators._sliding`):

- `jacobian`: J = dr/dlambda by forward-mode autodiff, *only the occupied slots' columns*
  (`CHUNK` at a time, as many chunks as there are entries): the work is linear in them;
- `box`: active-set iterations on the linear model r + J (lambda - guess) (violators pinned,
  wrong-side pins released, until none changes, at most `BOX_ITERATIONS`; an entry whose
  kink repels, s_k M_kk < 0, pinned on its pre-activation's side and the rest solved again),
  and
  M = (A^T A + eps^2 I)^(-1) A^T of the final system A (J, the pinned rows the identity's;
  eps = sqrt(machine epsilon) max |J| (`regularization`): where more entries of one neuron
  slide than its inputs span, or two sliding relus tie in a max-pool, J is singular, lambda
  is not unique but the field is), by QR of [A; eps I] (`ridge_solve`), not the normal
  equations;
- `chord`: M r, the chord step every field evaluation takes from the step's lambda*.

Each is done on the smallest of `BUCKETS` that holds the occupied slots (`jax.lax.switch`:
the program is traced once, its work follows the count).
"""

import equinox as eqx
import jax
import jax.numpy as jnp

from ._capacity import CHUNK
from ._nonsmooth import box_violation, smallest_holding


def ridge_solve(A, eps, B):
    """(A^T A + eps^2 I)^(-1) A^T B, the Tikhonov least-squares solution of A X = B, by
    Householder QR of the stacked [A; eps I] in plain XLA operations (the loops of
    `theory.numerics.lu_solve`, for the reasons given there): its condition is that of A,
    at most max|A| / eps, where the normal equations' is its square. With eps = 1e-10 max|A|
    (as it was) that square, 1e20, is past float64's 1e16: A^T A + eps^2 I rounded to A^T A,
    singular where two sliding entries' rows are dependent (a pool's tie between two sliding
    relus), and its LU gave lambda of 1e19. Here the solution stays within max|B| / (2 eps);
    where B is in A's range (lambda's right-hand side) it is the least-norm one to rounding.

    >>> A = jnp.array([[1.0, 1.0], [1.0, 1.0]])  # rank one: the least-norm solution
    >>> [round(v, 6) for v in ridge_solve(A, 1e-10, jnp.array([2.0, 2.0])).tolist()]
    [1.0, 1.0]
    """
    b = A.shape[0]
    vector = B.ndim == 1
    B = B[:, None] if vector else B
    eye = jnp.eye(b, dtype=A.dtype)
    S = jnp.concatenate(
        [jnp.concatenate([A, B], 1), jnp.concatenate([eps * eye, jnp.zeros_like(B)], 1)], 0
    )
    rows = jnp.arange(2 * b)

    def reflect(k, S):
        x = jnp.where(rows >= k, jax.lax.dynamic_index_in_dim(S, k, 1, keepdims=False), 0.0)
        head = x[k]
        alpha = -jnp.where(head >= 0, 1.0, -1.0) * jnp.sqrt(jnp.sum(x * x))
        v = x.at[k].add(-alpha)
        norm2 = jnp.sum(v * v)
        beta = jnp.where(norm2 > 0, 2.0 / jnp.where(norm2 > 0, norm2, 1.0), 0.0)
        return S - jnp.outer(beta * v, v @ S)

    S = jax.lax.fori_loop(0, b, reflect, S)
    X = jax.lax.linalg.triangular_solve(S[:b, :b], S[:b, b:], left_side=True, lower=False)
    return X[:, 0] if vector else X


BOX_ITERATIONS = 8  # active-set iterations of the box problem, at most
BUCKETS = (8, 16, 32, 64, 128, 256, 512, 1024, 2048)  # sizes the system is factored on


def regularization(dtype) -> float:
    """The Tikhonov eps of the sliding solve, relative to max |J|: sqrt(machine epsilon)
    (1.5e-8 in float64, 3.5e-4 in float32). Below it, the rounding of J's dependent rows
    reaches M as about u / eps^2 (at eps = 1e-10, M of [[1, 1], [1, 1]] had entries +-432 for
    0.25), and diag(M) feeds the repulsion test."""
    return float(jnp.finfo(dtype).eps) ** 0.5


# a sliding entry repels where s_k M_kk < -REPULSION max_k |M_kk| (`SlidingSystem.box`)
REPULSION = 1e-8


class SlidingSystem(eqx.Module):
    """The sliding system's linear algebra on `capacity` slots (module docstring).

    Two entries at a kink; the second pushed off it into its held side (r_1 > 0 at
    lambda = 0, r_1 grows with lambda_1), the first sliding at lambda_0 = 1/2:

    >>> system = SlidingSystem(8)
    >>> jac = jnp.eye(8).at[0, 0].set(2.0)
    >>> r = jnp.zeros(8).at[0].set(-1.0).at[1].set(0.5)
    >>> lam, pinned, bound, _ = system.box(jac, r, jnp.zeros(8), jnp.ones(8), 2)
    >>> lam[:2].tolist(), pinned[:2].tolist(), bound[:2].tolist()
    ([0.5, 0.0], [False, True], [0.0, 0.0])
    """

    capacity: int = eqx.field(static=True)

    def __check_init__(self):
        if self.capacity % CHUNK:
            raise ValueError(f"`capacity` must be a multiple of {CHUNK}, got {self.capacity}")

    def _sizes(self):
        return tuple(b for b in BUCKETS if b < self.capacity) + (self.capacity,)

    def switch(self, count, branch, *operands):
        """`branch(b, *operands)` on the smallest bucket b that holds `count` slots."""
        sizes = self._sizes()
        index = smallest_holding(sizes, count)
        branches = [lambda *ops, b=b: branch(b, *ops) for b in sizes]
        return jax.lax.switch(jnp.minimum(index, len(sizes) - 1), branches, *operands)

    def jacobian(self, residual, lam, count):
        """r and J = dr/dlambda at `lam`: the columns of the `count` occupied slots by
        forward-mode autodiff, `CHUNK` at a time; the padded slots' columns the identity's."""
        capacity, dtype = self.capacity, lam.dtype
        r, jvp = jax.linearize(residual, lam)

        def chunk(c, jac):
            index = c * CHUNK + jnp.arange(CHUNK)
            columns = jax.vmap(jvp)(jax.nn.one_hot(index, capacity, dtype=dtype))
            return jax.lax.dynamic_update_slice(jac, columns.T, (0, c * CHUNK))

        chunks = (count + CHUNK - 1) // CHUNK
        return r, jax.lax.fori_loop(0, chunks, chunk, jnp.eye(capacity, dtype=dtype))

    def box(self, jac, r, guess, sign, count, prefer=None):
        """lambda, the pins, their bounds and M on the linear model r + J (lambda - guess) of
        the `count` occupied slots (module docstring); padded slots are pinned at 0.

        **Repelling kinks.** The box problem has a solution with lambda_k inside (0, 1) also
        where the kink pushes entry k away on both sides (s_k dr_k/dlambda_k < 0, with the
        other sliding entries kept on theirs: s_k (M)_kk < 0, M the sliding block's
        inverse). That is a Filippov solution, but not the limit of gradient descent, which
        leaves such a kink at once; the solve would hold the entry there for as long as the
        kink repels. Such an entry is pinned at `prefer` (1 where the state sits on the
        other branch's side, else 0), and the rest solved again."""
        prefer = jnp.zeros_like(r) if prefer is None else prefer

        def branch(b, jac, r, guess, sign, prefer):
            block, r0, g, s = jac[:b, :b], r[:b], guess[:b], sign[:b]
            eye = jnp.eye(b, dtype=jac.dtype)
            valid = jnp.arange(b) < count
            largest = jnp.max(jnp.abs(jnp.where(valid[:, None], block, 0.0)))
            eps = regularization(jac.dtype) * largest
            # a zero block gives M = 0 on its free rows (not eps = 0: R would be singular; not
            # below sqrt(tiny): eps^2 would underflow in the QR's column norms)
            eps = jnp.maximum(eps, jnp.sqrt(jnp.finfo(jac.dtype).tiny))

            def system(pinned):
                return jnp.where(pinned[:, None], eye, block)

            def rhs(pinned, bound):
                return jnp.where(pinned, bound, block @ g - r0)

            def iterate(state):
                i, pinned, bound, _ = state
                lam = ridge_solve(system(pinned), eps, rhs(pinned, bound))
                push = s * (r0 + block @ (lam - g))  # towards the held side where > 0
                pin = ~pinned & (box_violation(lam) > 0)
                release = pinned & valid & jnp.where(bound > 0, push > 0, push < 0)
                bound = jnp.where(pin, (lam > 1).astype(bound.dtype), bound)
                return i + 1, (pinned | pin) & ~release, bound, jnp.any(pin | release)

            def going(state):
                return state[3] & (state[0] < BOX_ITERATIONS)

            def pins(pinned, bound):
                state = (0, pinned, bound, jnp.asarray(True))
                _, pinned, bound, _ = jax.lax.while_loop(going, iterate, state)
                return pinned, bound, ridge_solve(system(pinned), eps, eye)

            pinned, bound, inverse = pins(~valid, jnp.zeros(b, jac.dtype))
            diagonal = s * jnp.diagonal(inverse)
            scale = jnp.max(jnp.abs(jnp.where(valid, diagonal, 0.0)))
            repelled = valid & ~pinned & (diagonal < -REPULSION * scale)
            pinned, bound, inverse = jax.lax.cond(
                jnp.any(repelled),
                lambda: pins(pinned | repelled, jnp.where(repelled, prefer[:b], bound)),
                lambda: (pinned, bound, inverse),
            )
            lam = jnp.where(pinned, bound, jnp.clip(inverse @ rhs(pinned, bound), 0.0, 1.0))
            pad = self.capacity - b
            return (
                jnp.pad(lam, (0, pad)),
                jnp.pad(pinned, (0, pad), constant_values=True),
                jnp.pad(bound, (0, pad)),
                jnp.eye(self.capacity, dtype=jac.dtype).at[:b, :b].set(inverse),
            )

        return self.switch(count, branch, jac, r, guess, sign, prefer)

    def chord(self, inverse, count, r):
        """M r on the bucket that holds `count` slots (r is 0 beyond: lambda's padding)."""

        def branch(b, inverse, r):
            return jnp.zeros_like(r).at[:b].set(inverse[:b, :b] @ r[:b])

        return self.switch(count, branch, inverse, r)
