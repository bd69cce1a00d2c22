"""Online SGD of a two-layer student on a two-layer teacher, by its order parameters.

The student f(x) = sum_i a_i g(w_i . x) (K units) learns the teacher f*(x) = sum_n c_n
g(w*_n . x) (M units) from one fresh sample x ~ N(0, I_d) per step, with labels
y = f*(x) + noise zeta (zeta ~ N(0, 1)), by SGD on 1/2 (f(x) - y)^2:

    w_i <- w_i - (lr / d) a_i g'(lambda_i) Delta x,
    a_i <- a_i - (lr_second / d) g(lambda_i) Delta,

with lambda_i = w_i . x and Delta = f(x) - y. (The rows w_i are the engine's `TwoLayerNet.W`;
Saad and Solla's and Goldt et al.'s J_i / sqrt(N) are the same vectors.) As d -> infinity, in
time t = steps / d, the overlaps Q = W W^T, R = W W*^T (T = W* W*^T fixed) and a follow
(Saad and Solla 1995; Goldt et al. 2019, eqs. (9)-(11)), with omega = (a, -c) over all K + M
units and the integrals of `theory._online_integrals`:

    dR_in/dt = -lr a_i sum_j omega_j I3(i, n, j)
    dQ_ik/dt = -lr a_i sum_j omega_j I3(i, k, j) - lr a_k sum_j omega_j I3(k, i, j)
               + lr^2 a_i a_k (sum_jl omega_j omega_l I4(i, k, j, l) + noise^2 J2(i, k))
    da_i/dt  = -lr_second sum_j omega_j I2(i, j)

and the generalization error is eps_g = 1/2 E (f - f*)^2 = 1/2 omega^T I2 omega. The lr^2 term
is the finite-learning-rate correction (the |x|^2 / d = 1 of one step's square); without it
(lr -> 0 at lr t fixed) the ODEs are the population gradient flow of
`dynamics.teacher_student_loss` in time lr t.
"""

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

from ._diffeqsolve import diffeqsolve
from ._online_integrals import EXACT as ONLINE_EXACT, gaussian_integrals
from ._solution import RESULTS, AbstractSolution, Readable, diffrax_stats, name_nonfinite
from .checks import (
    check_finite,
    check_flag,
    check_positive,
    check_positive_int,
    check_shape,
    check_solver_choice,
    check_solver_options,
    check_time_grid,
    check_value,
    inexact,
)


class OrderParameters(Readable):
    """The state of online SGD in the teacher-student setting: Q = W W^T (K, K), R = W W*^T
    (K, M), T = W* W*^T (M, M), the student's second layer `a` (K,) and the teacher's `c`
    (M,). Leading axes (save times, seeds) are allowed on every field.
    `dynamics.order_parameters(model, teacher)` builds one from two `TwoLayerNet`s.

    >>> s = OrderParameters(Q=jnp.eye(2), R=jnp.zeros((2, 1)), T=jnp.eye(1),
    ...                     a=jnp.ones(2), c=jnp.ones(1))
    >>> s.Q.shape, s.R.shape
    ((2, 2), (2, 1))
    """

    Q: Float[Array, "... K K"]
    R: Float[Array, "... K M"]
    T: Float[Array, "... M M"]
    a: Float[Array, "... K"]
    c: Float[Array, "... M"]


class OnlineODESolution(AbstractSolution):
    """Result of `online_sgd_ode`: the order parameters `state` at the times `ts` (each field
    with a leading time axis), the generalization error `eg` there, diffrax's `result` and
    `stats` (steps; `rhs_evals`, the evaluations of the right-hand side). After a failure the
    remaining values are `inf`."""

    ts: Float[Array, " T"]
    state: OrderParameters
    eg: Float[Array, " T"]
    result: RESULTS
    stats: dict


def _activation_name(activation):
    if callable(activation):
        return activation
    if activation not in ONLINE_EXACT:
        raise ValueError(
            f"`activation` must be one of {ONLINE_EXACT} (closed forms) or a callable "
            f"(Gauss-Hermite), got {activation!r}"
        )
    return activation


def _check_state(state) -> OrderParameters:
    if not isinstance(state, OrderParameters):
        raise ValueError(f"`state` must be an OrderParameters, got {type(state).__name__}")
    Q = check_finite("state.Q", inexact(state.Q, name="state.Q"))
    check_shape("state.Q", Q, (None, None))
    K = Q.shape[0]
    if K == 0 or Q.shape[1] != K:
        raise ValueError(f"`state.Q` must be a square (K, K) matrix with K >= 1, got {Q.shape}")
    T = check_finite("state.T", inexact(state.T, Q.dtype, "state.T"))
    check_shape("state.T", T, (None, None))
    M = T.shape[0]
    if M == 0 or T.shape[1] != M:
        raise ValueError(f"`state.T` must be a square (M, M) matrix with M >= 1, got {T.shape}")
    R = check_finite("state.R", inexact(state.R, Q.dtype, "state.R"))
    check_shape("state.R", R, (K, M))
    a = check_finite("state.a", inexact(state.a, Q.dtype, "state.a"))
    check_shape("state.a", a, (K,))
    c = check_finite("state.c", inexact(state.c, Q.dtype, "state.c"))
    check_shape("state.c", c, (M,))
    state = OrderParameters(Q=Q, R=R, T=T, a=a, c=c)
    return _check_covariance(state)


def _check_covariance(s: OrderParameters) -> OrderParameters:
    """Q and T symmetric, and [[Q, R], [R^T, T]] positive semidefinite (to rounding): other
    states are no Gram matrices, and gave negative eps_g or NaN silently."""
    Omega = jnp.block([[s.Q, s.R], [s.R.T, s.T]])
    scale = jnp.maximum(jnp.max(jnp.abs(Omega)), jnp.finfo(Omega.dtype).tiny)
    tol = 1e3 * jnp.finfo(Omega.dtype).eps * scale
    symmetric = (jnp.max(jnp.abs(s.Q - s.Q.T)) <= tol) & (jnp.max(jnp.abs(s.T - s.T.T)) <= tol)
    psd = jnp.min(jnp.linalg.eigvalsh(0.5 * (Omega + Omega.T))) >= -tol * Omega.shape[0]
    message = "`state.Q` and `state.T` must be symmetric (Gram matrices W W^T)"
    Q = check_value(s.Q, symmetric, message)
    Q = check_value(
        Q,
        psd,
        "`state` must be the overlaps of real weight vectors: [[Q, R], [R^T, T]] must be "
        "positive semidefinite (a correlation R_in^2 > Q_ii T_nn, or a negative variance)",
    )
    return OrderParameters(Q=Q, R=s.R, T=s.T, a=s.a, c=s.c)


def _omega(s: OrderParameters):
    """The covariance of all K + M pre-activations, and the weights (a, -c) of Delta. Q and
    T enter symmetrized: a solver's rounding leaves Q asymmetric by 1e-13, and for relu the
    field fed that asymmetry back (it grew like e^(1.6 t) and spoiled eps_g by 1% at t = 40)."""
    Q, T = 0.5 * (s.Q + s.Q.T), 0.5 * (s.T + s.T.T)
    top = jnp.concatenate([Q, s.R], 1)
    bottom = jnp.concatenate([s.R.T, T], 1)
    return jnp.concatenate([top, bottom], 0), jnp.concatenate([s.a, -s.c])


def _tuples(K: int, U: int):
    """The index tuples each integral is needed at (numpy, static)."""
    i2 = np.array(np.meshgrid(np.arange(U), np.arange(U), indexing="ij")).reshape(2, -1).T
    i3 = np.array(np.meshgrid(np.arange(K), np.arange(U), np.arange(U), indexing="ij"))
    i4 = np.meshgrid(np.arange(K), np.arange(K), np.arange(U), np.arange(U), indexing="ij")
    j2 = np.array(np.meshgrid(np.arange(K), np.arange(K), indexing="ij")).reshape(2, -1).T
    return i2, i3.reshape(3, -1).T, np.array(i4).reshape(4, -1).T, j2


def _eg(s: OrderParameters, activation, nodes):
    Omega, omega = _omega(s)
    U = omega.shape[0]
    i2 = _tuples(1, U)[0]
    I2 = gaussian_integrals("i2", activation, Omega, i2, nodes).reshape(U, U)
    return 0.5 * omega @ I2 @ omega


class _Rates(eqx.Module):
    lr: Float[Array, ""]
    lr_second: Float[Array, ""]
    noise: Float[Array, ""]


def _field(s: OrderParameters, rates: _Rates, activation, nodes, second_order=True):
    """d(Q, R, a)/dt (module docstring); T and c do not move."""
    K, M = s.R.shape
    U = K + M
    Omega, omega = _omega(s)
    i2, i3, i4, j2 = _tuples(K, U)
    I2 = gaussian_integrals("i2", activation, Omega, i2[i2[:, 0] < K], nodes).reshape(K, U)
    I3 = gaussian_integrals("i3", activation, Omega, i3, nodes).reshape(K, U, U)
    drift = -rates.lr * s.a[:, None] * (I3 @ omega)  # (K, U): row i, column b
    dQ = drift[:, :K] + drift[:, :K].T
    if second_order:
        I4 = gaussian_integrals("i4", activation, Omega, i4, nodes).reshape(K, K, U, U)
        J2 = gaussian_integrals("j2", activation, Omega, j2, nodes).reshape(K, K)
        square = jnp.einsum("ikjl,j,l->ik", I4, omega, omega) + rates.noise**2 * J2
        dQ = dQ + rates.lr**2 * jnp.outer(s.a, s.a) * square
    da = -rates.lr_second * (I2 @ omega)
    return OrderParameters(Q=dQ, R=drift[:, K:], T=jnp.zeros_like(s.T), a=da, c=jnp.zeros_like(s.c))


def online_field(
    state: OrderParameters,
    *,
    activation="erf",
    lr=1.0,
    lr_second=0.0,
    noise=0.0,
    nodes: int = 12,
    second_order: bool = True,
) -> OrderParameters:
    """The right-hand side d(state)/dt of the order-parameter ODEs (module docstring), as an
    `OrderParameters` (its T and c are zero). `second_order=False` drops the lr^2 terms (the
    small-learning-rate limit).

    **Arguments:**

    - `state`: an `OrderParameters` (Q (K, K) a Gram matrix, R (K, M), T (M, M), a (K,),
      c (M,)).
    - `activation`: `"erf"`, `"relu"`, `"linear"` (closed forms) or a callable
      (Gauss-Hermite with `nodes` points per dimension).
    - `lr`, `lr_second`: the learning rates of the first and second layer (`lr_second=0`
      holds a fixed); `noise`: the label noise's standard deviation.
    - `second_order`: keep the lr^2 terms (default) or drop them.

    **Returns:** an `OrderParameters` holding d(state)/dt.

    **Raises:** `ValueError` on shapes that do not match, a Q that is no Gram matrix,
    negative rates or noise, a bad activation or `nodes` below 4.

    For one linear unit on itself (Q = R = T = 1, a = c = 1) nothing moves:

    >>> one = OrderParameters(Q=jnp.ones((1, 1)), R=jnp.ones((1, 1)), T=jnp.ones((1, 1)),
    ...                       a=jnp.ones(1), c=jnp.ones(1))
    >>> float(online_field(one, activation="linear").Q[0, 0])
    0.0
    """
    state = _check_state(state)
    activation = _activation_name(activation)
    rates = _check_rates(lr, lr_second, noise, state.Q.dtype)
    nodes = check_positive_int("nodes", nodes, minimum=4)
    return _field(state, rates, activation, nodes, check_flag("second_order", second_order))


def generalization_error(state: OrderParameters, *, activation="erf", nodes: int = 12):
    """eps_g = 1/2 E_x (f(x) - f*(x))^2 at the order parameters `state` (no label noise).

    **Arguments:** `state`: an `OrderParameters`; `activation`, `nodes`: as for
    `online_field`.

    **Returns:** eps_g, a scalar array.

    **Raises:** `ValueError` on a state `online_field` refuses.

    >>> s = OrderParameters(Q=jnp.eye(1), R=jnp.zeros((1, 1)), T=jnp.eye(1),
    ...                     a=jnp.ones(1), c=jnp.ones(1))
    >>> float(generalization_error(s, activation="linear"))  # 1/2 E (u - v)^2, u, v independent
    1.0
    """
    state = _check_state(state)
    nodes = check_positive_int("nodes", nodes, minimum=4)
    return _eg(state, _activation_name(activation), nodes)


def _check_rates(lr, lr_second, noise, dtype) -> _Rates:
    # the checked values are the ones used: under jit each check lives in their data flow
    lr = check_positive("lr", lr, scalar=True)
    lr_second = check_positive("lr_second", lr_second, allow_zero=True, scalar=True)
    noise = check_positive("noise", noise, allow_zero=True, scalar=True)
    return _Rates(*(jnp.asarray(x, dtype) for x in (lr, lr_second, noise)))


def _rhs_evals(solver, stats):
    """Right-hand-side evaluations: stages per step (diffrax's tableau; the first-same-as-last
    stage counted once) times the steps tried, plus the first stage of the first step."""
    tableau = getattr(solver, "tableau", None)
    if tableau is None:
        per_step = 1
    else:
        stages = len(tableau.c) + 1
        per_step = stages - (1 if getattr(tableau, "fsal", False) else 0)
    return per_step * stats["num_steps"] + 1


def online_sgd_ode(
    state: OrderParameters,
    ts: Float[Array, " T"],
    *,
    activation="erf",
    lr=1.0,
    lr_second=0.0,
    noise=0.0,
    second_order: bool = True,
    nodes: int = 12,
    solver=None,
    dt: float | None = None,
    rtol: float = 1e-10,
    atol: float = 1e-12,
    max_steps: int = 100_000,
    throw: bool = False,
) -> OnlineODESolution:
    """Integrate the order-parameter ODEs of online SGD (module docstring) from `state` at
    t = 0 to the save times `ts` (t = steps / d).

    **Arguments:**

    - `state`: the initial `OrderParameters` (Q, R, T, a, c).
    - `ts`: save times, nondecreasing from t >= 0.
    - `activation`: "erf" (erf(u)), "relu" or "linear" in closed form, or a callable
      (tensor Gauss-Hermite with `nodes` points per dimension).
    - `lr`, `lr_second`: the learning rates of the first and second layer (`lr_second=0`
      keeps `a` fixed: the soft committee machine); `noise`: the labels' noise std.
    - `second_order`: False drops the lr^2 terms (the small-learning-rate limit).
    - `solver`: a diffrax solver (default `diffrax.Dopri8()` with a `PIDController` at
      `rtol`, `atol`); `dt`: a fixed step instead (with e.g. `diffrax.Euler()`, what the
      public codes do at dt = 0.01).

    **Returns:** an `OnlineODESolution`: `state` and `eg` at `ts`, `result`, and `stats` with
    `rhs_evals`.

    **Raises:** `ValueError` on a malformed state (shapes, non-finite entries), negative
    rates, or a bad time grid.

    Two erf units learn their teacher from a small start: eps_g falls.

    >>> jax.config.update("jax_enable_x64", True)
    >>> s = OrderParameters(Q=0.01 * jnp.eye(2), R=jnp.zeros((2, 2)), T=jnp.eye(2),
    ...                     a=jnp.ones(2), c=jnp.ones(2))
    >>> sol = online_sgd_ode(s, jnp.array([0.0, 50.0]), activation="erf", lr=0.5)
    >>> bool(sol.ok), float(sol.eg[-1]) < float(sol.eg[0])
    (True, True)
    """
    state = _check_state(state)
    activation = _activation_name(activation)
    ts = check_time_grid("ts", ts, state.Q.dtype)
    rates = _check_rates(lr, lr_second, noise, state.Q.dtype)
    nodes = check_positive_int("nodes", nodes, minimum=4)
    rtol, atol, max_steps = check_solver_options(rtol, atol, max_steps)
    check_solver_choice(solver, adaptive=dt is None)
    if dt is not None:
        check_positive("dt", dt, scalar=True)
    second_order = check_flag("second_order", second_order)
    return _solve(state, ts, rates, activation, second_order, nodes, solver, dt,
                  rtol, atol, max_steps, throw)  # fmt: skip


@eqx.filter_jit
def _solve(state, ts, rates, activation, second_order, nodes, solver, dt, rtol, atol, max_steps,
           throw):  # fmt: skip
    def vf(t, y, args):
        return _field(y, args, activation, nodes, second_order)

    if dt is None:
        solver = diffrax.Dopri8() if solver is None else solver
        controller = diffrax.PIDController(rtol=rtol, atol=atol)
    else:
        solver = diffrax.Euler() if solver is None else solver
        controller = diffrax.ConstantStepSize()
        max_steps = int(max_steps)
    sol = diffeqsolve(
        diffrax.ODETerm(vf),
        solver,
        t0=0.0,
        t1=ts[-1],
        dt0=dt,
        y0=state,
        args=rates,
        saveat=diffrax.SaveAt(ts=ts),
        stepsize_controller=controller,
        max_steps=max_steps,
        throw=False,
        grid_checked=True,
    )
    result = name_nonfinite(RESULTS.promote(sol.result), vf(ts[0], state, rates))
    eg = jax.vmap(lambda s: _eg(s, activation, nodes))(sol.ys)
    eg = jnp.where(jnp.isfinite(sol.ys.Q).all((1, 2)), eg, jnp.inf)  # past a failure: inf
    stats = diffrax_stats(sol)
    stats["rhs_evals"] = _rhs_evals(solver, stats) if dt is None else stats["num_steps"]
    return OnlineODESolution(
        ts=ts, state=sol.ys, eg=eg, result=result, stats=stats
    ).raise_if_failed(throw)


class OnlineFixedPoint(AbstractSolution):
    """Result of `online_fixed_point`: the fixed point `state` of the order-parameter ODEs,
    its generalization error `eg`, the eigenvalues of the field's Jacobian there (in the
    free coordinates: Q's upper triangle, R, and a where it moves), sorted by real part
    (`eigenvalues`, complex), the residual `field_norm` and `result`."""

    state: OrderParameters
    eg: Float[Array, ""]
    eigenvalues: Array
    field_norm: Float[Array, ""]
    result: RESULTS
    stats: dict


def online_fixed_point(
    state: OrderParameters,
    *,
    activation="erf",
    lr=1.0,
    lr_second=0.0,
    noise=0.0,
    nodes: int = 12,
    tol: float = 1e-12,
    max_steps: int = 50,
    second_order: bool = True,
    throw: bool = False,
) -> OnlineFixedPoint:
    """A fixed point of the order-parameter ODEs near `state` (a plateau of a trajectory, say)
    by Newton's method on the free coordinates, and the field's Jacobian spectrum there: the
    symmetric plateau of Saad and Solla is a saddle with one unstable eigenvalue lambda, and a
    trajectory that passes it at distance eps from the symmetric manifold stays for about
    log(1 / eps) / lambda. `result` is `RESULTS.singular` where the Jacobian is singular (a
    continuum of fixed points: two linear units on two), `RESULTS.max_steps_reached` where
    ||field|| does not fall below `tol` within `max_steps` Newton steps.

    **Arguments:**

    - `state`: the `OrderParameters` to start Newton's method from (Q (K, K) and T (M, M)
      symmetric, [[Q, R], [R^T, T]] positive semidefinite, R (K, M), a (K,), c (M,), finite).
    - `activation`: `"erf"` (default), `"relu"`, `"linear"` (closed forms) or a callable
      (Gauss-Hermite with `nodes` points per dimension).
    - `lr`, `lr_second`: the learning rates of the first and second layer, one finite number
      each, `lr` > 0 (default 1) and `lr_second` >= 0 (default 0: `a` is held fixed and is no
      free coordinate); `noise`: the label noise's standard deviation, >= 0 (default 0).
    - `nodes`: the Gauss-Hermite points per dimension, an integer >= 4 (default 12).
    - `tol`: the target for ||field||, one finite number > 0 (default 1e-12); the field scales
      with lr.
    - `max_steps`: the Newton steps allowed, an integer >= 1 (default 50).
    - `second_order`: True (default) keeps the lr^2 terms; False drops them: the fixed points
      of the population gradient flow itself (with them, at lr = 1e-6, the symmetric plateau
      of erf K = M = 2 moved by 1e-6 in Q).
    - `throw`: True raises where Newton's method fails instead of returning a failed
      `result` (default False).

    **Returns:** an `OnlineFixedPoint`: the fixed point `state`, its `eg`, the Jacobian's
    `eigenvalues` (complex, sorted by decreasing real part), `field_norm`, `result`
    (`successful`, `singular`, `max_steps_reached`, or `nonfinite` where ||field|| became
    non-finite) and `stats` (`num_steps`).

    **Raises:** `ValueError` where `state` is no `OrderParameters`, has shapes that do not
    match, non-finite entries, or is no Gram matrix; `activation` is neither a name of
    `ONLINE_EXACT` nor a callable; a rate or `noise` is not one finite number of its range;
    `nodes` < 4; `max_steps` is not an integer >= 1; `tol` is not one finite number > 0; or
    `second_order` or `throw` is not True or False; with `throw=True`,
    `eqx.EquinoxRuntimeError` where `result` is not successful.

    >>> jax.config.update("jax_enable_x64", True)
    >>> s = OrderParameters(Q=jnp.full((1, 1), 0.8), R=jnp.full((1, 1), 0.7), T=jnp.ones((1, 1)),
    ...                     a=jnp.ones(1), c=jnp.ones(1))
    >>> fp = online_fixed_point(s, activation="linear", lr=0.1)  # the student on its teacher
    >>> bool(fp.ok), round(float(fp.state.R[0, 0]), 9), bool(jnp.all(fp.eigenvalues.real < 0))
    (True, 1.0, True)
    """  # noqa: E501
    state = _check_state(state)
    activation = _activation_name(activation)
    rates = _check_rates(lr, lr_second, noise, state.Q.dtype)
    nodes = check_positive_int("nodes", nodes, minimum=4)
    max_steps = check_positive_int("max_steps", max_steps)
    tol = check_positive("tol", tol, scalar=True)
    trained = float(lr_second) != 0.0  # a NumPy or 0-d array zero holds `a` fixed too
    second_order = check_flag("second_order", second_order)
    return _fixed_point(
        state, rates, activation, nodes, tol, max_steps, trained, second_order
    ).raise_if_failed(throw)


@eqx.filter_jit
def _fixed_point(state, rates, activation, nodes, tol, max_steps, trained, second_order):
    K = state.Q.shape[0]
    upper = np.triu_indices(K)

    def pack(s):
        parts = [s.Q[upper], s.R.ravel()] + ([s.a] if trained else [])
        return jnp.concatenate(parts)

    def unpack(y):
        n = len(upper[0])
        Q = jnp.zeros_like(state.Q).at[upper].set(y[:n])
        Q = Q + jnp.triu(Q, 1).T
        R = y[n : n + state.R.size].reshape(state.R.shape)
        a = y[n + state.R.size :] if trained else state.a
        return OrderParameters(Q=Q, R=R, T=state.T, a=a, c=state.c)

    def F(y):
        return pack(_field(unpack(y), rates, activation, nodes, second_order))

    def newton(carry):
        y, norm, k, _ = carry
        J = jax.jacobian(F)(y)
        step = jnp.linalg.solve(J, F(y))
        # a finite but singular Jacobian (a continuum of fixed points, as two linear units
        # on two have) gives a non-finite step: stop there and say so (a non-finite J is
        # a non-finite point, and the step below makes the norm NaN)
        singular = jnp.all(jnp.isfinite(J)) & ~jnp.all(jnp.isfinite(step))
        y = jnp.where(singular, y, y - step)
        return y, jnp.where(singular, norm, jnp.linalg.norm(F(y))), k + 1, singular

    def going(carry):
        _, norm, k, singular = carry
        return (norm > tol) & (k < max_steps) & jnp.isfinite(norm) & ~singular

    y0 = pack(state)
    init = (y0, jnp.linalg.norm(F(y0)), 0, jnp.asarray(False))
    y, norm, steps, singular = jax.lax.while_loop(going, newton, init)
    eigenvalues = jnp.linalg.eigvals(jax.jacobian(F)(y))
    eigenvalues = eigenvalues[jnp.argsort(-eigenvalues.real)]
    fixed = unpack(y)
    result = RESULTS.where(
        norm <= tol,
        RESULTS.successful,
        RESULTS.where(
            singular,
            RESULTS.singular,
            RESULTS.where(jnp.isfinite(norm), RESULTS.max_steps_reached, RESULTS.nonfinite),
        ),
    )
    return OnlineFixedPoint(state=fixed, eg=_eg(fixed, activation, nodes), eigenvalues=eigenvalues,
                            field_norm=norm, result=result, stats={"num_steps": steps})  # fmt: skip
