"""The Lawson-Hanson active-set method for nonnegative quadratic programs,

    min_lam 1/2 lam^T G lam - b^T lam   subject to   lam >= 0   (G positive semidefinite),

in plain XLA operations (jit- and vmap-able), and the Cholesky solve it uses. It terminates
in finitely many steps at an exact KKT point. `theory.max_margin` solves its dual with it.

Beside them, `lu_solve`: a pivoted LU solve in plain XLA operations, for the flows' small
systems inside sweeps, and `spd_inverse`: the inverse of a symmetric positive definite matrix
by a blocked sweep, mostly matrix products.
"""

import functools

import jax
import jax.numpy as jnp
from jaxtyping import Array, Bool, Float

from ._solution import RESULTS, AbstractSolution
from .checks import check_finite, check_positive, check_positive_int, check_value


class NNQPSolution(AbstractSolution):
    """Result of `nnqp`: the minimizer `lam` and its support `passive` (lam_i > 0), with
    `result` (`max_steps_reached` when `max_steps` ran out, `nonfinite` when lam blew up: G
    singular on the support) and `stats` (`num_steps`: inner iterations).

    >>> nnqp(jnp.eye(1), jnp.array([2.0]), tol=1e-12, max_steps=5).lam.tolist()
    [2.0]
    """

    result: RESULTS
    stats: dict
    lam: Float[Array, " n"]
    passive: Bool[Array, " n"]


def spd_solve(M, b):
    """M^{-1} b for symmetric positive definite M by Cholesky, in plain XLA operations.

    Deliberately not `jnp.linalg.solve`: jaxlib's batched LAPACK kernels can deadlock a
    sharded program on XLA:CPU (`lu_solve`), and this solver runs inside such programs. NaN
    where M is not positive definite.

    >>> x = spd_solve(jnp.array([[4.0, 0.0], [0.0, 2.0]]), jnp.array([2.0, 1.0]))
    >>> [round(v, 12) for v in x.tolist()]
    [0.5, 0.5]
    """
    n = b.shape[0]
    L = _cholesky(M)[0]

    def forward(i, z):
        return z.at[i].set((b[i] - L[i, :] @ z) / L[i, i])

    def backward(k, x):
        i = n - 1 - k
        return x.at[i].set((z[i] - L[:, i] @ x) / L[i, i])

    z = jax.lax.fori_loop(0, n, forward, jnp.zeros_like(b))
    return jax.lax.fori_loop(0, n, backward, jnp.zeros_like(b))


_UNROLL = 16  # `lu_solve` unrolls its loops up to this size


def lu_solve(M, b, *, unroll: bool = True):
    """M^{-1} b by Gaussian elimination with partial pivoting, in plain XLA operations; b is
    one right-hand side (k,) or several (k, p) (M^{-1} from b = I); batch it with `jax.vmap`.
    For the small systems that the flows solve at every field evaluation inside sweeps:
    jaxlib's LAPACK kernels (0.10) split a batch whose work passes ~5e5 flops over XLA:CPU's
    thread pool and block until it is done, and with as many host devices as pool threads
    every thread blocks: two host devices, `jnp.linalg.solve` on a batch of two 65 x 65
    systems (or 200 of 16 x 16) inside a loop hung for good (a single device, or one system
    at a time, did not).

    **Arguments:**

    - `M`: the matrix, shape (k, k), real (integers are converted).
    - `b`: the right-hand side(s), shape (k,) or (k, p), real.
    - `unroll`: unroll the loops up to k = 16 (default True; False: never, a smaller program
      to compile).

    **Returns:** x = M^{-1} b, of `b`'s shape, in the floating dtype of `M` and `b` together.
    A singular M gives non-finite entries where LAPACK's `getrf`/`getrs` do (a zero pivot is
    skipped, as there), and non-finite entries propagate.

    **Raises:** `ValueError` where `M` is not (k, k) or `b` is not (k,) or (k, p) with the
    same k. Values are not checked (it runs at every field evaluation).

    >>> x = lu_solve(jnp.array([[0.0, 2.0], [4.0, 1.0]]), jnp.array([2.0, 9.0]))
    >>> [round(v, 12) for v in x.tolist()]
    [2.0, 1.0]
    """
    k = jnp.shape(b)[0] if jnp.ndim(b) in (1, 2) else -1
    if jnp.shape(M) != (k, k):
        raise ValueError(
            f"`M` must have shape (k, k) and `b` (k,) or (k, p), got {jnp.shape(M)} and "
            f"{jnp.shape(b)}"
        )
    dtype = jnp.result_type(jnp.asarray(M), jnp.asarray(b), float)
    M, b = jnp.asarray(M, dtype), jnp.asarray(b, dtype)  # integer systems are converted
    vector = b.ndim == 1
    B = b[:, None] if vector else b
    rows = jnp.arange(k)
    A = jnp.concatenate([M, B], axis=1)

    def eliminate(i, A):
        p = jnp.argmax(jnp.where(rows >= i, jnp.abs(A[:, i]), -1.0))
        A = A.at[jnp.stack([i, p])].set(A[jnp.stack([p, i])])  # the pivot row to row i
        pivot = A[i, i]  # 0: the column is 0 from row i on, and left as it is (as LAPACK)
        nonzero = pivot != 0
        factor = jnp.where((rows > i) & nonzero, A[:, i] / jnp.where(nonzero, pivot, 1), 0)
        return A - factor[:, None] * A[i][None, :]

    def substitute(j, x):
        i = k - 1 - j
        # no matmul (no TF32 on GPUs)
        return x.at[i].set((A[i, k:] - jnp.sum(A[i, :k, None] * x, axis=0)) / A[i, i])

    x = jnp.zeros_like(B)
    if unroll and k <= _UNROLL:  # a loop's per-iteration cost on CPU dominates so small a system
        for i in range(k):
            A = eliminate(i, A)
        for j in range(k):
            x = substitute(j, x)
    else:
        A = jax.lax.fori_loop(0, k, eliminate, A)
        x = jax.lax.fori_loop(0, k, substitute, x)
    return x[:, 0] if vector else x


_BLOCK = 16  # `spd_inverse` sweeps its pivots in blocks of this size


def spd_inverse(M):
    """M^{-1} for symmetric positive definite M (k, k), or a batch (..., k, k), by a blocked
    sweep: for each pivot block P of 16 (k padded with the identity to a multiple of 16),

        M_PP <- -M_PP^{-1},   M_PQ <- M_PP^{-1} M_PQ,   M_QP <- M_QP M_PP^{-1},
        M_QQ <- M_QQ - M_QP M_PP^{-1} M_PQ      (Q the other rows and columns),

    which leaves -M^{-1} after every block has been the pivot (Gauss-Jordan elimination by
    blocks; M_PP^{-1} by `lu_solve`, looped). In plain XLA operations, mostly batched matrix
    products at full precision (no TF32 on GPUs), in one loop whose program is the same for
    every k: it compiles in about 0.5 s at any k on XLA:CPU, where the recursion by halves it
    replaced compiled for 5.3 s at k = 256 (one copy per block size, several per program:
    two_layer_flow compiled for 105 s at n = 256). It runs 1.1 to 1.9 times as long as that
    recursion (47 ms and 102 ms for 40 systems at k = 128 and 256). No pivoting between
    blocks: every pivot block of a positive definite M is positive definite after the sweeps
    before it (a Schur complement).

    **Arguments:**

    - `M`: a symmetric positive definite matrix (k, k) with k >= 1, or a batch (..., k, k),
      real (integers are converted). Neither property is checked.

    **Returns:** M^{-1}, of `M`'s shape, in `M`'s floating dtype (JAX's default float for
    integers). A singular M gives non-finite or huge, meaningless entries: a pivot of rounding
    size rather than the exact zero that `lu_solve`'s pivoting meets, so the result can be
    finite. Callers that can meet a singular M check the product, as `two_layer_flow` does.

    **Raises:** `ValueError` where `M` has fewer than 2 dimensions or its last two are not
    equal. Values are not checked.

    >>> Minv = spd_inverse(jnp.array([[4.0, 2.0], [2.0, 2.0]]))
    >>> [[round(v, 12) for v in row] for row in Minv.tolist()]
    [[0.5, -0.5], [-0.5, 1.0]]
    """
    shape = jnp.shape(M)
    if len(shape) < 2 or shape[-1] != shape[-2]:
        raise ValueError(f"`M` must have shape (..., k, k) (square), got {shape}")
    M = jnp.asarray(M, jnp.result_type(jnp.asarray(M), float))
    k = shape[-1]
    b = min(_BLOCK, k)
    K = -(-k // b) * b
    if K > k:  # padded with the identity: its inverse is the identity there
        eye = jnp.broadcast_to(jnp.eye(K, dtype=M.dtype), shape[:-2] + (K, K))
        M = eye.at[..., :k, :k].set(M)
    inverse = functools.partial(lu_solve, b=jnp.eye(b, dtype=M.dtype), unroll=False)
    for _ in range(M.ndim - 2):
        inverse = jax.vmap(inverse)
    mm = functools.partial(jnp.matmul, precision=jax.lax.Precision.HIGHEST)
    rows = functools.partial(jax.lax.dynamic_slice_in_dim, slice_size=b, axis=-2)
    put_rows = functools.partial(jax.lax.dynamic_update_slice_in_dim, axis=-2)
    put_cols = functools.partial(jax.lax.dynamic_update_slice_in_dim, axis=-1)

    def pivot(p, M):
        s = p * b
        C = jax.lax.dynamic_slice_in_dim(M, s, b, axis=-1)  # the pivot columns (K, b)
        A_inv = inverse(rows(C, s))
        CA, AR = mm(C, A_inv), mm(A_inv, rows(M, s))
        M = put_cols(put_rows(M - mm(CA, rows(M, s)), AR, s), CA, s)
        return put_rows(M, put_cols(rows(M, s), -A_inv, s), s)

    M = jax.lax.fori_loop(0, K // b, pivot, M)
    return -M[..., :k, :k]


def nnqp(G, b, *, tol, max_steps: int, throw: bool = False) -> NNQPSolution:
    """Lawson-Hanson active set for min 1/2 lam^T G lam - b^T lam, lam >= 0 (G PSD).

    The loops stop once no inactive constraint has a gradient above `tol` (success), after
    `max_steps` inner iterations, or when lam becomes non-finite (G singular on the support).

    **Arguments:**

    - `G`: the quadratic term, shape (n, n), real and finite (integers are converted),
      symmetric positive semidefinite to rounding: |G - G^T| within 100 n eps max |G|, and G
      plus that much times I positive definite.
    - `b`: the linear term, shape (n,) with n >= 1, real and finite.
    - `tol`: the tolerance on the gradient b - G lam of the inactive constraints, one finite
      number > 0.
    - `max_steps`: the budget of inner iterations, an integer >= 1.
    - `throw`: raise where the solve failed (default False: the failure shows in `result`);
      exactly True or False.

    **Returns:** an `NNQPSolution`: `lam` (n,) the minimizer, `passive` (n,) its support
    (lam_i > 0), `result` (`successful`; `max_steps_reached`; `nonfinite` where lam blew up)
    and `stats` (`num_steps`), in the floating dtype of `G` and `b` together.

    **Raises:** `ValueError` where `G` is not (n, n) or `b` is not (n,), n = 0, `G` or `b` is
    complex or not finite, `G` is not symmetric or not positive semidefinite, `max_steps` is
    not a concrete integer >= 1, `tol` is not one finite number > 0, or `throw` is not a bool;
    the checks of values are eager on concrete values and go through `eqx.error_if` when
    traced. With `throw=True`, a failed solve raises through `eqx.error_if`, eagerly too
    (`EquinoxRuntimeError`, carrying `result`'s message).

    >>> sol = nnqp(jnp.eye(2), jnp.array([1.0, -1.0]), tol=1e-12, max_steps=20)
    >>> sol.lam.tolist(), sol.passive.tolist(), bool(sol.ok)
    ([1.0, 0.0], [True, False], True)
    """
    n = jnp.shape(b)[0] if jnp.ndim(b) == 1 else -1
    if jnp.ndim(b) != 1 or jnp.shape(G) != (n, n):
        raise ValueError(
            f"`G` must have shape (n, n) and `b` (n,), got {jnp.shape(G)} and {jnp.shape(b)}"
        )
    if n == 0:
        raise ValueError("`b` must hold at least one entry, got none")
    dtype = jnp.result_type(jnp.asarray(G), jnp.asarray(b), float)
    G, b = jnp.asarray(G, dtype), jnp.asarray(b, dtype)  # integer programs are converted
    G, b = check_finite("G", G), check_finite("b", b)
    G = _check_psd(G)
    max_steps = check_positive_int("max_steps", max_steps)
    tol = check_positive("tol", tol, scalar=True)
    return _nnqp(G, b, tol, max_steps).raise_if_failed(throw)


def _nnqp(G, b, tol, max_steps: int) -> NNQPSolution:
    """`nnqp` without its argument checks, for the engine's own programs whose G is a Gram
    matrix (positive semidefinite by construction, finite) and whose `tol` is > 0: the PSD
    check would cost a Cholesky factorization, and a host callback under jit, per call
    (`max_margin` twice, `kkt_residual` and `diagonal_jumps` once per round or jump)."""
    lam, passive, it = _active_set(G, b, tol, max_steps)
    w = b - G @ lam
    finite = jnp.all(jnp.isfinite(lam))
    done = ~jnp.any(~passive & (w > tol))
    result = RESULTS.where(
        finite,
        RESULTS.where(done, RESULTS.successful, RESULTS.max_steps_reached),
        RESULTS.nonfinite,
    )
    return NNQPSolution(lam=lam, passive=passive, result=result, stats={"num_steps": it})


def _check_psd(G):
    """G must be symmetric positive semidefinite, to rounding: |G - G^T| within 100 n eps
    max |G|, and G + that I positive definite (an indefinite G has no minimizer, or a local
    one)."""
    n = G.shape[0]
    size = jnp.max(jnp.abs(G))
    size = jnp.where(size > 0, size, 1.0)  # G = 0 is positive semidefinite
    slack = 100 * n * jnp.finfo(G.dtype).eps * size
    G = check_value(
        G, jnp.max(jnp.abs(G - G.T)) <= slack, f"`G` must be symmetric, got an asymmetric {n}x{n}"
    )
    return check_value(
        G, _cholesky(G + slack * jnp.eye(n, dtype=G.dtype))[1],
        "`G` must be positive semidefinite (the program is then convex), got a negative "
        "eigenvalue",
    )  # fmt: skip


def _cholesky(M):
    """The Cholesky factor L of symmetric M (NaN from the first pivot <= 0 on) and whether
    every pivot was > 0 (M positive definite), in plain XLA operations (no LAPACK: see
    `spd_solve`)."""
    n = M.shape[0]
    idx = jnp.arange(n)

    def column(j, carry):
        L, ok = carry
        v = M[:, j] - L @ L[j, :]
        diag = jnp.sqrt(v[j])
        L = L.at[:, j].set(jnp.where(idx > j, v / diag, jnp.where(idx == j, diag, 0.0)))
        return L, ok & (v[j] > 0)

    return jax.lax.fori_loop(0, n, column, (jnp.zeros_like(M), jnp.asarray(True)))


def _active_set(G, b, tol, max_iter):
    n = b.shape[0]
    eye = jnp.eye(n, dtype=G.dtype)

    def solve_on(passive):
        both = passive[:, None] & passive[None, :]
        M = jnp.where(both, G, eye)
        return jnp.where(passive, spd_solve(M, jnp.where(passive, b, 0.0)), 0.0)

    def inner(state):
        lam, passive, it, _ = state
        s = solve_on(passive)
        bad = passive & (s <= 0)
        ratio = jnp.where(bad, lam / jnp.where(bad, lam - s, 1.0), jnp.inf)
        block = jnp.argmin(ratio)
        step = jnp.minimum(1.0, ratio[block])
        lam = jnp.where(jnp.any(bad), (lam + step * (s - lam)).at[block].set(0.0), s)
        passive = passive & (lam > 0)
        return jnp.where(passive, lam, 0.0), passive, it + 1, jnp.any(bad)

    def outer_cond(state):
        lam, passive, it = state
        w = b - G @ lam
        return (it < max_iter) & jnp.any(~passive & (w > tol)) & jnp.all(jnp.isfinite(lam))

    def outer(state):
        lam, passive, it = state
        w = b - G @ lam
        j = jnp.argmax(jnp.where(passive, -jnp.inf, w))
        passive = passive.at[j].set(True)
        lam, passive, it, _ = jax.lax.while_loop(
            lambda s: s[3] & (s[2] < max_iter) & jnp.all(jnp.isfinite(s[0])),
            inner,
            inner((lam, passive, it, True)),
        )
        return lam, passive, it

    init = (jnp.zeros((n,), G.dtype), jnp.zeros((n,), bool), jnp.zeros((), jnp.int32))
    return jax.lax.while_loop(outer_cond, outer, init)
