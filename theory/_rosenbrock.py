"""Rodas4 and Rodas5P: L-stable Rosenbrock methods for diffrax, with a pluggable linear solve.

A Rosenbrock method is linearly implicit: each step solves linear systems with one matrix
W = I / (h gamma) - J, J = df/dy at the step's start, instead of Newton iterations. For the
stiff flows of this engine that matters twice: no iteration can fail to converge at a kink of
relu, and the solve can use whatever structure J has (`vanishing_flow` passes a Woodbury
solve that costs O(m n^2 + n^3) for its (m + m n)-dimensional state). Wrap a Rodas solver in
`HoldArgs` to hold a discrete state of the field (a relu live set) fixed within each step.

**The scheme** (Hairer & Wanner, *Solving ODEs II*, sec. IV.7, in the W-transformed form of
OrdinaryDiffEq.jl, whose published coefficients these are). With c = 1 / (h gamma), for
stages i = 1..s

    (c I - J) k_i = f(t0 + c_i h, u_i) + sum_{j<i} (C_ij / h) k_j + d_i h df/dt,
    u_i = y0 + sum_{j<i} a_ij k_j  (the first stages),   u_i = u_{i-1} + k_{i-1}  (the last),
    y1 = u_s + k_s,

stiffly accurate (the last stages sit at t1), with k_s as the error estimate of the embedded
solution y1 - k_s, and a continuous extension for dense output,

    y(t0 + theta h) = (1 - theta) y0 + theta (y1 + (1 - theta) (K_1 + theta (K_2 + ...))),
    K_q = sum_j H_qj k_j.

Rodas4: s = 6, order 4(3), dense order 3. Rodas5P (Steinebach 2023): s = 8, order 5(4),
dense order 4. The orders are checked in `tests/test_rosenbrock.py`.

L-stability makes the step independent of the stiff modes' rates once they have relaxed:
an explicit method's step is capped at ~3 / |lambda_max|, Rodas4's only by accuracy.
"""

from collections.abc import Callable
from typing import ClassVar, NamedTuple

import diffrax
import equinox as eqx
import jax
import jax.flatten_util
import jax.numpy as jnp
import jax.tree_util as jtu
import numpy as np

from ._hold import _finite
from .checks import is_concrete


class _Tableau(NamedTuple):
    """A stiffly accurate Rosenbrock method in W-transformed form (OrdinaryDiffEq's layout).

    Stage i < len(a) sits at y0 + sum_j a[i][j] k_j and time t0 + nodes[i] h; every later
    stage at the previous stage's value + the previous k, at t1; y1 = last stage + last k, and
    the last k is the error estimate. `C[i]` couples stage i to the earlier k's (divided by h),
    `d[i]` weighs h df/dt, `H` gives the dense-output combinations K_1, K_2, ...
    """

    gamma: float
    a: np.ndarray
    C: np.ndarray
    nodes: np.ndarray
    d: np.ndarray
    H: np.ndarray
    order: int


def _lower(rows, size):
    out = np.zeros((size, size))
    for i, row in enumerate(rows):
        out[i + 1, : len(row)] = row
    return out


# Rodas4 (Hairer & Wanner): 6 stages, order 4(3), dense output of order 3.
_RODAS4 = _Tableau(
    gamma=0.25,
    a=_lower(
        [
            [1.544],
            [0.9466785280815826, 0.2557011698983284],
            [3.314825187068521, 2.896124015972201, 0.9986419139977817],
            [1.221224509226641, 6.019134481288629, 12.53708332932087, -0.6878860361058950],
        ],
        5,
    ),
    C=_lower(
        [
            [-5.6688],
            [-2.430093356833875, -0.2063599157091915],
            [-0.1073529058151375, -9.594562251023355, -20.47028614809616],
            [7.496443313967647, -10.24680431464352, -33.99990352819905, 11.70890893206160],
            [
                8.083246795921522,
                -7.981132988064893,
                -31.52159432874371,
                16.31930543123136,
                -6.058818238834054,
            ],
        ],
        6,
    ),
    nodes=np.array([0.0, 0.386, 0.21, 0.63, 1.0]),
    d=np.array([0.25, -0.1043, 0.1035, -0.03620000000000023, 0.0, 0.0]),
    H=np.array(
        [
            [
                10.12623508344586,
                -7.487995877610167,
                -34.80091861555747,
                -7.992771707568823,
                1.025137723295662,
                0.0,
            ],
            [
                -0.6762803392801253,
                6.087714651680015,
                16.43084320892478,
                24.76722511418386,
                -6.594389125716872,
                0.0,
            ],
        ]
    ),
    order=4,
)

# Rodas5P (Steinebach 2023): 8 stages, order 5(4), dense output of order 4.
_RODAS5P = _Tableau(
    gamma=0.21193756319429014,
    a=_lower(
        [
            [3.0],
            [2.849394379747939, 0.45842242204463923],
            [-6.954028509809101, 2.489845061869568, -10.358996098473584],
            [2.8029986275628964, 0.5072464736228206, -0.3988312541770524,
             -0.04721187230404641],
            [-7.502846399306121, 2.561846144803919, -11.627539656261098,
             -0.18268767659942256, 0.030198172008377946],
        ],
        6,
    ),
    C=_lower(
        [
            [-14.155112264123755],
            [-17.97296035885952, -2.859693295451294],
            [147.12150275711716, -1.41221402718213, 71.68940251302358],
            [165.43517024871676, -0.4592823456491126, 42.90938336958603, -5.961986721573306],
            [24.854864614690072, -3.0009227002832186, 47.4931110020768, 5.5814197821558125,
             -0.6610691825249471],
            [30.91273214028599, -3.1208243349937974, 77.79954646070892, 34.28646028294783,
             -19.097331116725623, -28.087943162872662],
            [37.80277123390563, -3.2571969029072276, 112.26918849496327, 66.9347231244047,
             -40.06618937091002, -54.66780262877968, -9.48861652309627],
        ],
        8,
    ),
    nodes=np.array([0.0, 0.6358126895828704, 0.4095798393397535, 0.9769306725060716,
                    0.4288403609558664, 1.0]),
    d=np.array([0.21193756319429014, -0.42387512638858027, -0.3384627126235924,
                1.8046452872882734, 2.325825639765069, 0.0, 0.0, 0.0]),
    H=np.array(
        [
            [25.948786856663858, -2.5579724845846235, 10.433815404888879, -2.3679251022685204,
             0.524948541321073, 1.1241088310450404, 0.4272876194431874, -0.17202221070155493],
            [-9.91568850695171, -0.9689944594115154, 3.0438037242978453, -24.495224566215796,
             20.176138334709044, 15.98066361424651, -6.789040303419874, -6.710236069923372],
            [11.419903575922262, 2.8879645146136994, 72.92137995996029, 80.12511834622643,
             -52.072871366152654, -59.78993625266729, -0.15582684282751913, 4.883087185713722],
        ]
    ),
    order=5,
)  # fmt: skip


ShiftedSolve = Callable[..., Callable]


def dense_shifted_solve(vector_field, t, y, args, shift):
    """The generic W-solve: J = df/dy by forward mode, (shift I - J) LU-factored once.

    O(N^3) per step for a state of size N, the cost a structured solve exists to avoid.

    **Arguments:**

    - `vector_field`: f(t, y, args), returning a pytree shaped like `y`.
    - `t`: the time at which J = df/dy(t, y) is taken.
    - `y`: the state, a pytree of floating arrays (raveled into one vector of size N).
    - `args`: passed to `vector_field` as it is.
    - `shift`: the scalar c of c I - J (the Rodas solvers pass 1 / (h gamma)); where it is
      concrete, one finite nonzero number.

    **Returns:** `solve(b)`, which returns (shift I - J)^{-1} b, shaped like `y`, for pytrees
    b shaped like `y`. Under `jit` a singular system is not refused: its solves come out
    non-finite (a Rodas step then reports `singular`).

    **Raises:** `ValueError` where a concrete `shift` is not 0-d, not finite or zero, or, in
    an eager call, where shift I - J has a zero or non-finite pivot (`shift` an eigenvalue of
    J, or the field not finite at `y`).

    >>> solve = dense_shifted_solve(lambda t, y, args: -y, 0.0, jnp.ones(2), None, 1.0)
    >>> [float(v) for v in solve(jnp.array([2.0, 4.0]))]  # (1 + 1) x = b
    [1.0, 2.0]
    """
    if is_concrete(shift):
        value = np.asarray(shift)
        if value.shape != () or not np.isfinite(value) or value == 0:
            raise ValueError(f"`shift` must be one finite nonzero number, got {shift!r}")
    flat, unravel = jax.flatten_util.ravel_pytree(y)

    def f(z):
        return jax.flatten_util.ravel_pytree(vector_field(t, unravel(z), args))[0]

    J = jax.jacfwd(f)(flat)
    eye = jnp.eye(flat.size, dtype=flat.dtype)
    lu = jax.scipy.linalg.lu_factor(jnp.asarray(shift, flat.dtype) * eye - J)
    if is_concrete(lu[0]):  # eagerly, a singular system is an error (under jit: the step's
        # `result` says `singular` where the solve comes out non-finite)
        pivots = np.abs(np.diag(np.asarray(lu[0])))
        if not (np.all(np.isfinite(pivots)) and np.all(pivots > 0)):
            raise ValueError(
                "`shift` I - df/dy is singular or not finite (smallest |pivot| "
                f"{pivots.min() if pivots.size else 0:.3e}): `shift` = {shift!r} is an "
                "eigenvalue of the Jacobian, or the field is not finite at `y`"
            )

    def solve(b):
        return unravel(jax.scipy.linalg.lu_solve(lu, jax.flatten_util.ravel_pytree(b)[0]))

    return solve


class RodasInterpolation(diffrax.AbstractLocalInterpolation):
    """A Rodas method's continuous extension on one step, for `SaveAt(ts=...)`:

    y(t0 + theta h) = (1 - theta) y0 + theta (y1 + (1 - theta) (K_1 + theta (K_2 + ...))),

    stored as the coefficients of that polynomial in theta (formed once per step), so that
    each save time costs one fused polynomial evaluation.
    """

    t0: float
    t1: float
    coeffs: object  # pytree of (q + 2, ...) arrays, highest power of theta first

    def __init__(self, *, t0, t1, y0, y1, k):
        self.t0 = t0
        self.t1 = t1

        def coefficients(y0, y1, k):
            # theta (1 - theta) P(theta), P = sum_q K_q theta^(q-1): powers 1 .. q + 1
            q = k.shape[0]
            low = [jnp.zeros_like(y0)] * (q + 2)  # low[p]: coefficient of theta^p
            for row in range(q):
                low[row + 1] = low[row + 1] + k[row]
                low[row + 2] = low[row + 2] - k[row]
            low[0] = y0
            low[1] = low[1] + (y1 - y0)
            return jnp.stack(low[::-1])

        self.coeffs = jtu.tree_map(coefficients, y0, y1, k)

    def evaluate(self, t0, t1=None, left=True):
        del left
        if t1 is not None:
            return jtu.tree_map(lambda a, b: a - b, self.evaluate(t1), self.evaluate(t0))
        span = self.t1 - self.t0
        theta = jnp.where(span == 0, 0.0, (t0 - self.t0) / jnp.where(span == 0, 1.0, span))

        def horner(c):
            out = c[0]
            for row in range(1, c.shape[0]):
                out = out * theta + c[row]
            return out

        return jtu.tree_map(horner, self.coeffs)


class _AbstractRodas(diffrax.AbstractAdaptiveSolver):
    """The step shared by the Rodas methods; subclasses name their `_tableau`."""

    shifted_solve: ShiftedSolve = eqx.field(static=True, default=dense_shifted_solve)

    def __check_init__(self):
        if not callable(self.shifted_solve):
            raise ValueError(
                "`shifted_solve` must be callable (vector_field, t, y, args, shift) -> solve, "
                f"got {type(self.shifted_solve).__name__}"
            )

    def step(self, terms, t0, t1, y0, args, solver_state, made_jump):
        del solver_state, made_jump
        return self._step(terms, t0, t1, y0, args)

    term_structure: ClassVar = diffrax.ODETerm  # diffeqsolve refuses other terms
    interpolation_cls: ClassVar = RodasInterpolation
    _tableau: ClassVar[_Tableau]

    def order(self, terms):
        return self._tableau.order

    def error_order(self, terms):
        return self._tableau.order  # the embedded solution has order p - 1: error O(h^p)

    def init(self, terms, t0, t1, y0, args):
        return None

    def func(self, terms, t0, y0, args):
        return terms.vf(t0, y0, args)

    def _step(self, terms, t0, t1, y0, args):
        tab = self._tableau
        h = t1 - t0
        # A backward solve reaches the step as a term whose control is -(t1 - t0) and whose
        # field is the original one at the flipped time. The step is then the method's step
        # of signed size hs = direction * h on the original field: the stages sit at the same
        # (internal) times, and only the scalars 1 / (hs gamma) and C_ij / hs change sign
        # (the d_i h df/dt terms do not: df/dt flips sign with the clock).
        direction = jnp.sign(terms.contr(t0, t1))
        hs = jnp.where(direction == 0, h, direction * h)

        def f(t, y):
            return terms.vf(t, y, args)

        f0, dfdt = jax.jvp(lambda t: f(t, y0), (t0,), (jnp.ones_like(t0),))
        solve = self.shifted_solve(terms.vf, t0, y0, args, 1.0 / (hs * tab.gamma))

        def combine(coeffs, ks, base=None, scale=1.0):
            """base + scale * sum_j coeffs[j] k_j over the nonzero coefficients, in the state's
            own dtype (a Python float and a cast scale never promote float32 to float64)."""
            out = base
            for c, k in zip(coeffs, ks, strict=False):
                if c != 0.0:
                    term = jtu.tree_map(
                        lambda x, c=float(c): jnp.asarray(c * scale, x.dtype) * x, k
                    )
                    out = term if out is None else jtu.tree_map(jnp.add, out, term)
            return out

        ks = []
        u = y0
        for i in range(tab.C.shape[0]):
            if i == 0:
                rhs = f0
            else:
                if i < tab.a.shape[0]:
                    u, node = combine(tab.a[i], ks, y0), float(tab.nodes[i])
                else:
                    u, node = jtu.tree_map(jnp.add, u, ks[-1]), 1.0
                rhs = combine(tab.C[i], ks, f(t0 + node * h, u), scale=1.0 / hs)
            if tab.d[i] != 0.0:
                rhs = jtu.tree_map(
                    lambda r, g, di=float(tab.d[i]): r + jnp.asarray(di * h, r.dtype) * g,
                    rhs,
                    dfdt,
                )
            ks.append(solve(rhs))
        y1 = jtu.tree_map(jnp.add, u, ks[-1])
        k_dense = jtu.tree_map(lambda *k: jnp.stack([combine(row, k) for row in tab.H]), *ks)
        dense_info = dict(y0=y0, y1=y1, k=k_dense)
        # A step that diffrax keeps (a constant step, or one its controller accepts) must be
        # finite. Non-finite field or df/dt at the start: `nonfinite`; a finite one that the
        # first W-solve made non-finite: `singular` (h gamma J has an eigenvalue 1); a later
        # stage that overflowed: `nonfinite`. An adaptive controller rejects such a trial
        # step first (its error is not finite), and diffrax ignores a rejected step's result.
        # Only y1 is reduced on the way to `successful` (a non-finite stage makes y1
        # non-finite): reducing every stage each step cost vanishing_flow 80% more wall time.
        R = diffrax.RESULTS
        result = R.where(
            _finite(y1),
            R.successful,
            R.where(
                _finite((f0, dfdt)), R.where(_finite(ks[0]), R.nonfinite, R.singular), R.nonfinite
            ),
        )
        return y1, ks[-1], dense_info, None, result


class Rodas4(_AbstractRodas):
    """Rodas4, a stiffly accurate, L-stable Rosenbrock method of order 4(3), for ODETerms.

    **Arguments:**

    - `shifted_solve`: `shifted_solve(vector_field, t, y, args, shift)` returning `solve(b)`,
      which solves (shift I - df/dy(t, y)) x = b for pytrees b shaped like y. Default
      `dense_shifted_solve` (the Jacobian by forward mode and a dense LU), right for small
      states; pass a structured solve for large ones.

    Six stages, each one vector-field evaluation and one linear solve with the same matrix,
    formed once per step; dense output of order 3.

    A stiff linear test problem y' = -1e6 (y - cos t): the step follows cos t, not 1e-6.

    >>> term = diffrax.ODETerm(lambda t, y, args: -1e6 * (y - jnp.cos(t)))
    >>> sol = diffrax.diffeqsolve(term, Rodas4(), 0.0, 1.0, None, jnp.array(1.0),
    ...     stepsize_controller=diffrax.PIDController(rtol=1e-6, atol=1e-6))
    >>> int(sol.stats["num_steps"]) < 100, round(float(sol.ys[-1]), 5)
    (True, 0.5403)
    """

    _tableau: ClassVar[_Tableau] = _RODAS4


class Rodas5P(_AbstractRodas):
    """Rodas5P (Steinebach 2023), a stiffly accurate, L-stable Rosenbrock method of order
    5(4), for ODETerms; `shifted_solve` as in `Rodas4`.

    Eight stages, dense output of order 4. At tight tolerances (rtol 1e-9) it takes fewer
    steps than `Rodas4` on smooth stretches, as Dopri5 does against a fourth-order method.

    >>> term = diffrax.ODETerm(lambda t, y, args: -1e6 * (y - jnp.cos(t)))
    >>> sol = diffrax.diffeqsolve(term, Rodas5P(), 0.0, 1.0, None, jnp.array(1.0),
    ...     stepsize_controller=diffrax.PIDController(rtol=1e-9, atol=1e-9))
    >>> exact = (jnp.cos(1.0) + 1e-6 * jnp.sin(1.0)) / (1 + 1e-12)  # the slow manifold at t = 1
    >>> int(sol.stats["num_steps"]) < 100, bool(abs(sol.ys[-1] - exact) < 1e-9)
    (True, True)
    """

    _tableau: ClassVar[_Tableau] = _RODAS5P
