"""The weight-decay gradient flow of the mean-field network, population or finite-sample.

    dw_i/dt = -lambda_t w_i - m grad_{w_i} L(W),   lambda_t = lambda for t < t_off, else 0,

with L the closed-form population loss (`dynamics.population_loss`) or the mean over n
samples (`dynamics.sample_loss`, in batches). Integrated with diffrax (Tsit5 and a PID
controller by default, the switch t_off passed as a jump time). The observables of the
staircase paper are saved at the requested times (`dynamics.observables`): the population
loss, the mass alpha~ = (1/m) sum ||w_i||^2, beta_1 and beta_2 (mean squared coordinate over
the r relevant / d - r irrelevant directions of the target), and per target direction the
best neuron's alignment max_i <w_i / ||w_i||, w*_k>^2.

Paper: *Learning Orthogonal Multi-Index Models Beyond Small Initialization: Incremental
Learning, Competitive Dynamics and Symmetry* (NeurIPS 2026, arXiv:2609.10879).
"""

import diffrax
import jax
import jax.numpy as jnp
from jaxtyping import Array, Float

from dynamics import MeanFieldNet, MultiIndexTarget, observables, unchecked
from theory import RESULTS, AbstractSolution, diffrax_stats
from theory.checks import (
    check_activation,
    check_dtype,
    check_finite,
    check_flag,
    check_model,
    check_positive,
    check_positive_int,
    check_shape,
    check_solver_choice,
    check_solver_options,
    check_time_grid,
    check_value,
    inexact,
)
from theory.numerics import diffeqsolve

from ._memory import available_bytes


class MeanFieldFlowSolution(AbstractSolution):
    """Result of `mean_field_flow`: the observables at the save times `ts` (T,).

    `loss` (population loss, also in finite-sample mode), `train_loss` (the sample loss in
    finite-sample mode, else equal to `loss`), `alpha`, `beta1`, `beta2` (T,), `alignment`
    (T, r) (see `dynamics.observables`), `model` (the final net), diffrax's `stats` and
    `result` (`ok`).

    >>> from dynamics import mean_field_init, standard_target
    >>> sol = mean_field_flow(standard_target(1, 3), mean_field_init(4, 3, key=jax.random.PRNGKey(0)),
    ...                       jnp.array([0.0, 0.5]))
    >>> sol.alignment.shape, sol.model.W.shape
    ((2, 1), (4, 3))
    """  # noqa: E501

    result: RESULTS
    stats: dict
    ts: Float[Array, " T"]
    loss: Float[Array, " T"]
    train_loss: Float[Array, " T"]
    alpha: Float[Array, " T"]
    beta1: Float[Array, " T"]
    beta2: Float[Array, " T"]
    alignment: Float[Array, "T r"]
    model: MeanFieldNet


def check_memory(n: int, d: int, m: int, batch_size: int, dtype=jnp.float64) -> int:
    """Bytes a finite-sample flow needs (data, labels, and ~8 copies of one batch's (b, m)
    activations for the forward and backward pass); raises `MemoryError` before the run when
    that exceeds the device's memory (or the host's physical memory on CPU).

    **Arguments:** `n`, `d`: samples and input dimension; `m`: neurons; `batch_size`: the
    samples per batch; `dtype`: a floating dtype.

    **Returns:** the bytes needed, an int.

    **Raises:** `ValueError` on non-positive sizes or a dtype that is not floating;
    `MemoryError` where the need exceeds 80% of the memory available.

    >>> check_memory(1000, 10, 5, 100) > 0
    True
    """
    n, d, m = (check_positive_int(k, v) for k, v in (("n", n), ("d", d), ("m", m)))
    batch_size = check_positive_int("batch_size", batch_size)
    item = check_dtype(dtype).itemsize  # a floating dtype (int32 was taken)
    need = item * (n * d + n + 8 * batch_size * m + 16 * m * d)
    have = available_bytes()
    if need > 0.8 * have:
        raise MemoryError(
            f"a finite-sample flow with n = {n}, d = {d}, m = {m}, batch {batch_size} needs "
            f"~{need / 2**30:.1f} GiB, more than 80% of the {have / 2**30:.1f} GiB available: "
            "use fewer samples or a smaller batch"
        )
    return need


def _check_samples(samples, batch_size, d):
    """(samples, batch_size) checked: a pair (X (n, d), y (n,)) of at least one finite
    sample, and a batch size only with samples."""
    if samples is None:
        if batch_size is not None:
            raise ValueError("`batch_size` batches `samples`: pass it only with `samples`")
        return None, None
    if not (isinstance(samples, tuple | list) and len(samples) == 2):
        raise ValueError(
            f"`samples` must be a pair (X, y), got {type(samples).__name__}"
            + (f" of length {len(samples)}" if isinstance(samples, tuple | list) else "")
        )
    X, y = samples
    check_shape("samples[0]", X, (None, d))
    check_shape("samples[1]", y, (jnp.shape(X)[0],))
    if jnp.shape(X)[0] == 0:  # the finite-sample loss would be 0 / 0
        raise ValueError("`samples` must hold at least one sample, got none")
    if batch_size is not None:
        batch_size = check_positive_int("batch_size", batch_size)
    return (check_finite("samples[0]", X), check_finite("samples[1]", y)), batch_size


def _check_decay_off(decay_off, ts, dtype):
    """One time from ts[0] on (or inf) at which weight decay stops: an earlier time leaves
    it off at once."""
    off = inexact(decay_off, dtype, "decay_off")  # a string is refused, not parsed
    if off.shape != ():
        raise ValueError(f"`decay_off` must be one time (or inf), got shape {off.shape}")
    return check_value(
        off,
        ~jnp.isnan(off) & (off >= ts[0]),
        f"`decay_off` must be a time from ts[0] on (or inf), got {decay_off}",
    )


def _loss_and_gradient(target, activation, samples, batch_size):
    """W -> the loss the flow descends (the population's, or the samples' in batches) and
    its gradient."""
    if samples is None:

        def loss(W):
            return unchecked.population_loss(W, target)

        return loss, jax.grad(loss)
    X, y = samples

    def loss(W):
        return unchecked.sample_loss(MeanFieldNet(W, activation), X, y, batch_size)

    def grad(W):
        return unchecked.sample_loss_gradient(MeanFieldNet(W, activation), X, y, batch_size)

    return loss, grad


def _checked_inputs(target, model, ts, weight_decay, decay_off, samples, batch_size,
                    tolerances, solver, stepsize_controller):  # fmt: skip
    """`mean_field_flow`'s arguments checked (its Raises): the initial weights, the time
    grid, the weight decay and its end, the samples and their batch, and the tolerances
    (defaults by loss: the population's or the samples')."""
    check_model("model", model, MeanFieldNet)
    if not isinstance(target, MultiIndexTarget):
        raise ValueError(
            f"`target` must be a MultiIndexTarget (e.g. `standard_target`), got "
            f"{type(target).__name__}"
        )
    W0 = model.W
    d = W0.shape[1]
    check_shape("model.W", W0, (None, target.directions.shape[1]))
    check_activation(model.activation, expected=target.activation)
    rtol, atol, max_steps = tolerances
    smooth = samples is None
    rtol = (1e-6 if smooth else 1e-4) if rtol is None else rtol
    atol = (1e-8 if smooth else 1e-6) if atol is None else atol
    lam = check_positive("weight_decay", weight_decay, allow_zero=True, scalar=True)
    lam = jnp.asarray(lam, W0.dtype)
    W0 = check_finite("model.W", W0)
    tolerances = check_solver_options(rtol, atol, max_steps)
    check_solver_choice(solver, stepsize_controller)
    ts = check_time_grid("ts", ts, W0.dtype)
    samples, batch_size = _check_samples(samples, batch_size, d)
    off = _check_decay_off(decay_off, ts, W0.dtype)
    return W0, ts, lam, off, samples, batch_size, tolerances


def mean_field_flow(
    target: MultiIndexTarget,
    model: MeanFieldNet,
    ts: Float[Array, " T"],
    *,
    weight_decay=0.0,
    decay_off=jnp.inf,
    samples: tuple | None = None,
    batch_size: int | None = None,
    rtol: float | None = None,
    atol: float | None = None,
    max_steps: int = 200_000,
    solver: diffrax.AbstractAdaptiveSolver | None = None,
    stepsize_controller: diffrax.AbstractStepSizeController | None = None,
    progress: bool | diffrax.AbstractProgressMeter = False,
    throw: bool = False,
) -> MeanFieldFlowSolution:
    """Integrate dw_i/dt = -lambda_t w_i - m grad_{w_i} L from `model` and save the observables.

    **Arguments:**

    - `target`: a `dynamics.MultiIndexTarget` (e.g. `dynamics.standard_target`).
    - `model`: a `dynamics.MeanFieldNet`, `W` (m, d) finite, its activation the target's.
    - `ts` (T,): nondecreasing save times, finite and >= 0.
    - `weight_decay`: lambda >= 0, finite (an array, so sweeps do not recompile); it acts
      until `decay_off` (one time from `ts[0]` on, or inf), then lambda = 0 so that the loss
      can go to 0.
    - `samples`: None for the population loss, or (X (n, d), y (n,)), finite, for the
      finite-sample loss over those n points, in batches of `batch_size` (>= 1; only with
      `samples`).
    - `rtol`, `atol`: default rtol = 1e-6, atol = 1e-8 for the population loss (a smooth
      kernel) and 1e-4, 1e-6 for finite samples: there every sample puts a kink of |z| in
      every neuron's field, the error estimate jumps at each crossing, and a tight rtol buys
      steps (an order of magnitude more at rtol = 1e-6) without changing the loss beyond the
      sampling noise. `max_steps` >= 1: the solver's budget.
    - `solver`: default `diffrax.Tsit5()`; `stepsize_controller`: default a PID controller
      at `rtol`/`atol` with `decay_off` as a jump time (a controller you pass should declare
      that jump itself).
    - `progress`: True, or a diffrax meter such as `diffrax.TqdmProgressMeter()`: how far
      the solve is, for long finite-sample runs.
    - `throw`: raise where the solve fails instead of saying so through `result`.

    **Returns:** a `MeanFieldFlowSolution`: population and training loss and the observables
    (alpha, beta1, beta2, alignment) at `ts`, the final net. Pure and `jax.vmap`-able over
    seeds.

    **Raises:** `ValueError` where `model` is not a `MeanFieldNet` or `target` not a
    `MultiIndexTarget`, their dimensions or activations differ, `weight_decay` is negative
    or not finite, `model.W` or `samples` are not finite or of the wrong shapes,
    `batch_size` comes without `samples` or is not a positive int, `decay_off` is not one
    time from `ts[0]` on, a tolerance, `max_steps`, `solver` or `ts` is refused as in
    `gradient_flow`.

    >>> from dynamics import mean_field_init, standard_target
    >>> target = standard_target(2, 6)
    >>> net = mean_field_init(20, 6, key=jax.random.PRNGKey(0))
    >>> sol = mean_field_flow(target, net, jnp.array([0.0, 1.0, 20.0]), weight_decay=0.1)
    >>> bool(sol.ok), bool(sol.loss[-1] < 0.1 * sol.loss[0])
    (True, True)
    """
    W0, ts, lam, off, samples, batch_size, (rtol, atol, max_steps) = _checked_inputs(
        target, model, ts, weight_decay, decay_off, samples, batch_size,
        (rtol, atol, max_steps), solver, stepsize_controller,
    )  # fmt: skip
    m = W0.shape[0]
    activation = model.activation
    loss, grad = _loss_and_gradient(target, activation, samples, batch_size)

    def field(t, W, args):
        return -jnp.where(t < off, lam, 0.0) * W - m * grad(W)

    def save(t, W, args):
        net = MeanFieldNet(W, activation)
        pop = unchecked.population_loss(W, target)
        return pop, (loss(W) if samples is not None else pop), observables(net, target)

    if stepsize_controller is None:
        # the switch is a jump time only when it falls inside the interval: a jump time at
        # t1 itself made diffrax drop the save at t1 when one step spanned the whole interval
        stepsize_controller = diffrax.PIDController(
            rtol=rtol,
            atol=atol,
            jump_ts=jnp.reshape(jnp.where(off < ts[-1], off, 2 * ts[-1] + 1), (1,)),
        )
    sol = diffeqsolve(
        diffrax.ODETerm(field),
        diffrax.Tsit5() if solver is None else solver,
        t0=ts[0],
        t1=ts[-1],
        dt0=None,
        y0=W0,
        saveat=diffrax.SaveAt(subs=[diffrax.SubSaveAt(ts=ts, fn=save), diffrax.SubSaveAt(t1=True)]),
        stepsize_controller=stepsize_controller,
        max_steps=max_steps,
        throw=False,
        progress_meter=_meter(progress),
        grid_checked=True,
    )
    (pop, train, obs), final = sol.ys
    out = MeanFieldFlowSolution(
        ts=ts,
        loss=pop,
        train_loss=train,
        alpha=obs.alpha,
        beta1=obs.beta1,
        beta2=obs.beta2,
        alignment=obs.alignment,
        model=MeanFieldNet(final[-1], activation),
        result=RESULTS.promote(sol.result),
        stats=diffrax_stats(sol),
    )
    return out.raise_if_failed(throw)


def _meter(progress) -> diffrax.AbstractProgressMeter:
    """`progress` as a diffrax progress meter: True gives a text meter, False none."""
    if isinstance(progress, diffrax.AbstractProgressMeter):
        return progress
    if check_flag("progress", progress):
        return diffrax.TextProgressMeter(minimum_increase=0.05)
    return diffrax.NoProgressMeter()
