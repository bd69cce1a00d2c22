"""`diagonal_flow`: the exact gradient flow of a diagonal linear network, in log form.

Pesme and Flammarion, "Saddle-to-Saddle Dynamics in Diagonal Linear Networks", NeurIPS 2023
(arXiv 2304.00488). For beta = u * u - v * v from u = v = alpha 1 under
L(beta) = 1/(2n) ||X beta - y||^2, u v = alpha^2 is conserved and the flow is exactly
(`theory._diagonal` derives it)

    dS/dt~ = -4 X^T (X beta - y) / n,
    beta_i = 2 alpha^2 sinh(tau S_i) = sign(S_i) e^{tau (|S_i| - 2)} (1 - e^{-2 tau |S_i|}),

in the rescaled clock t = tau t~, tau = log(1/alpha). S is O(1) at every alpha, so the state
never under- or overflows: this integrates alpha = 10^-1000 (tau = 2302.6) as easily as
alpha = 0.1, where the network's own parameters (alpha e^{+-tau S / 2}) underflow float64.
The field's Jacobian, -4 G diag(tau |beta| + ...), has rates up to 4 tau ||G|| max|beta|:
stiff at small alpha, hence the L-stable Rodas5P, whose linear systems (shift I - J) are
solved by Woodbury through an n x n system (J has rank n).
"""

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp
import jax.scipy.linalg
from jaxtyping import Array, Float

from theory import RESULTS, AbstractSolution, diffrax_stats, name_nonfinite
from theory.checks import (
    check_flag,
    check_regression,
    check_solver_choice,
    check_solver_options,
    check_time_grid,
    check_time_scale,
)
from theory.numerics import Rodas5P, diffeqsolve


class DiagonalFlowSolution(AbstractSolution):
    """`diagonal_flow`'s solution at the saved times `ts` (rescaled clock t~).

    - `loss` (T,): L(beta(t~)); with `save_trajectory=True`, `beta` (T, d): the regression
      vector and `dual` (T, d): S(t~) (else `None`).
    - `final_beta`, `final_dual` (d,): beta and S at `ts[-1]`.
    - `time_scale`: tau = log(1/alpha).
    - `result`, `stats`: diffrax's outcome and step counts.
    """

    result: RESULTS
    stats: dict
    ts: Float[Array, " T"]
    loss: Float[Array, " T"]
    beta: Float[Array, "T d"] | None
    dual: Float[Array, "T d"] | None
    final_beta: Float[Array, " d"]
    final_dual: Float[Array, " d"]
    time_scale: Float[Array, ""]


def _beta_of_dual(S, tau):
    """beta_i = 2 alpha^2 sinh(tau S_i), alpha = e^{-tau}, without forming alpha^2."""
    a = jnp.abs(S)
    return jnp.sign(S) * jnp.exp(tau * (a - 2.0)) * -jnp.expm1(-2.0 * tau * a)


def diagonal_flow(
    X: Float[Array, "n d"],
    y: Float[Array, " n"],
    ts: Float[Array, " T"],
    *,
    time_scale,
    rtol: float = 1e-8,
    atol: float = 1e-8,
    max_steps: int = 100000,
    save_trajectory: bool = False,
    solver: diffrax.AbstractAdaptiveSolver | None = None,
    throw: bool = False,
) -> DiagonalFlowSolution:
    """The gradient flow of beta = u*u - v*v from u = v = alpha 1, exactly, in the rescaled
    clock t = tau t~ with `time_scale` tau = log(1/alpha) (module docstring).

    **Arguments:**

    - `X` (n, d), `y` (n,): any real, finite regression data.
    - `ts` (T,): nondecreasing save times from `ts[0]` >= 0 (S = 0 there: the flow starts at
      the initialization at `ts[0]`).
    - `time_scale`: tau = log(1/alpha) > 0, finite.
    - `rtol` > 0, `atol` >= 0: the solver's tolerances on S; `max_steps` >= 1 its budget.
    - `save_trajectory`: also save beta and S at every `ts` (T x d numbers).
    - `solver`: a diffrax adaptive solver; default Rodas5P (L-stable, Woodbury linear
      solves).
    - `throw`: raise where the solve fails instead of saying so through `result`.

    **Returns:** a `DiagonalFlowSolution` (loss at `ts`, final beta and S, the trajectory
    where asked). Jit-compiled and `jax.vmap`-able.

    **Raises:** `ValueError` on data that are not (n, d) and (n,), real and finite; a
    `time_scale` not finite and > 0; a negative or non-finite tolerance, `max_steps` < 1; a
    `solver` that is not a diffrax adaptive solver; `ts` not finite, >= 0 and nondecreasing;
    a non-boolean `save_trajectory`.

    One coordinate, y = 1: a logistic jump from loss 1/2 to 0 at t~ = 1/2 - log(1 + sqrt 2) /
    (4 tau); at t~ = 1/2, beta = 1/2 and the loss is 1/8.

    >>> X = jnp.ones((1, 1)); y = jnp.array([1.0])
    >>> sol = diagonal_flow(X, y, jnp.linspace(0.0, 1.0, 5), time_scale=50.0)
    >>> bool(sol.ok), round(float(sol.final_beta[0]), 6), round(float(sol.loss[2]), 3)
    (True, 1.0, 0.125)
    """
    X, y = check_regression("X", X, "y", y)
    dtype = X.dtype
    tau = check_time_scale(time_scale, dtype)
    rtol, atol, max_steps = check_solver_options(rtol, atol, max_steps)
    check_solver_choice(solver)
    ts = check_time_grid("ts", ts, dtype)
    save_trajectory = check_flag("save_trajectory", save_trajectory)
    solver = Rodas5P(shifted_solve=_woodbury_solve) if solver is None else solver
    controller = diffrax.PIDController(rtol=rtol, atol=atol)
    out = _solve(X, y, ts, tau, solver, controller, max_steps, save_trajectory)
    return out.raise_if_failed(throw)


def _dbeta_dS(S, tau):
    """d beta_i / d S_i = 2 alpha^2 tau cosh(tau S_i), without forming alpha^2."""
    a = jnp.abs(S)
    return tau * jnp.exp(tau * (a - 2.0)) * (1.0 + jnp.exp(-2.0 * tau * a))


def _woodbury_solve(vector_field, t, S, args, shift):
    """solve(b) = (shift I - J)^-1 b for the field's Jacobian J = -(4/n) X^T X D, D =
    diag(d beta / d S): by Woodbury, x = (b - U z) / shift with U = (4/n) X^T and
    (shift I_n + (4/n) X D X^T) z = X D b, O(n^2 d + n^3) instead of the dense O(d^3)."""
    X, _, tau = args
    n = X.shape[0]
    XD = X * _dbeta_dS(S, tau)[None, :]
    small = shift * jnp.eye(n, dtype=X.dtype) + (4.0 / n) * XD @ X.T
    lu = jax.scipy.linalg.lu_factor(small)

    def solve(b):
        z = jax.scipy.linalg.lu_solve(lu, XD @ b)
        return (b - (4.0 / n) * X.T @ z) / shift

    return solve


def _field(t, S, args):
    X, y, tau = args
    beta = _beta_of_dual(S, tau)
    return -4.0 * X.T @ (X @ beta - y) / X.shape[0]


@eqx.filter_jit
def _solve(X, y, ts, tau, solver, controller, max_steps, save_trajectory):
    def save(t, S, args):
        beta = _beta_of_dual(S, tau)
        r = X @ beta - y
        return (0.5 * jnp.mean(r * r),) + ((beta, S) if save_trajectory else ())

    sol = diffeqsolve(
        diffrax.ODETerm(_field),
        solver,
        t0=ts[0],
        t1=ts[-1],
        dt0=None,
        y0=jnp.zeros(X.shape[1], X.dtype),
        args=(X, y, tau),
        saveat=diffrax.SaveAt(subs=[diffrax.SubSaveAt(ts=ts, fn=save), diffrax.SubSaveAt(t1=True)]),
        stepsize_controller=controller,
        max_steps=max_steps,
        throw=False,
        grid_checked=True,
    )
    saved, S1 = sol.ys
    return DiagonalFlowSolution(
        result=name_nonfinite(RESULTS.promote(sol.result), saved[0], S1),
        stats=diffrax_stats(sol),
        ts=ts,
        loss=saved[0],
        beta=saved[1] if save_trajectory else None,
        dual=saved[2] if save_trajectory else None,
        final_beta=_beta_of_dual(S1[-1], tau),
        final_dual=S1[-1],
        time_scale=tau,
    )
