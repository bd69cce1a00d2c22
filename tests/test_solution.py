import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp
import pytest

from theory import RESULTS, AbstractSolution


def test_results_extend_diffrax_and_promote():
    assert RESULTS.promote(diffrax.RESULTS.successful) == RESULTS.successful
    assert RESULTS.promote(diffrax.RESULTS.max_steps_reached) == RESULTS.max_steps_reached
    assert RESULTS.diverged != RESULTS.successful and RESULTS.infeasible != RESULTS.diverged


class _DemoSolution(AbstractSolution):
    result: RESULTS
    stats: dict


def test_abstract_solution_is_abstract():
    with pytest.raises(TypeError):
        AbstractSolution(result=RESULTS.successful, stats={})


def test_ok_under_vmap_and_throw():
    def solve(x):
        result = RESULTS.where(x > 0, RESULTS.successful, RESULTS.diverged)
        return _DemoSolution(result=result, stats={"num_steps": jnp.asarray(3)})

    sols = jax.vmap(solve)(jnp.array([1.0, -1.0]))
    assert sols.ok.tolist() == [True, False]
    assert bool(solve(1.0).raise_if_failed(True).ok)
    with pytest.raises(Exception, match="diverged"):
        solve(-1.0).raise_if_failed(True)
    with pytest.raises(Exception, match="diverged"):
        jax.jit(lambda x: solve(x).raise_if_failed(True).ok)(-1.0)
    assert not bool(solve(-1.0).raise_if_failed(False).ok)
    assert isinstance(solve(1.0), eqx.Module)


def _callbacks(fn, *args) -> int:
    return jax.jit(fn).lower(*args).as_text().count("callback")


def test_diffeqsolve_compiles_without_host_callbacks():
    """diffrax checks SaveAt(ts) with host callbacks whatever `throw` is; the engine's
    `diffeqsolve` checks the grid with the engine's checks (collected inside a sweep) and
    compiles diffrax's copies without callbacks, so the persistent cache stores the solve;
    the engine's own checks inside the field still raise."""
    from theory.checks import check_value, collect_checks
    from theory.numerics import diffeqsolve

    def solve(call, ts, rate, **kw):
        def field(t, y, a):
            return -check_value(a, a > 0, "`rate` must be > 0") * y

        term = diffrax.ODETerm(field)
        saveat = diffrax.SaveAt(ts=ts)
        return call(
            term,
            diffrax.Tsit5(),
            ts[0],
            ts[-1],
            0.1,
            jnp.array(1.0),
            args=rate,
            saveat=saveat,
            throw=False,
            **kw,
        ).ys

    ts = jnp.linspace(0.0, 1.0, 5)
    assert _callbacks(lambda t: solve(diffrax.diffeqsolve, t, 1.0), ts) > 0
    assert _callbacks(lambda t: solve(diffeqsolve, t, 1.0, grid_checked=True), ts) == 0

    def collected(t):
        with collect_checks(t) as found:
            ys = solve(diffeqsolve, t, 1.0)
        return ys, jnp.stack([ok for ok, _ in found])

    assert _callbacks(collected, ts) == 0
    assert jax.jit(collected)(ts)[1].all() and not jax.jit(collected)(ts[::-1])[1].all()
    run = jax.jit(lambda t, r: solve(diffeqsolve, t, r))  # one program for the three calls
    assert jnp.allclose(run(ts, 2.0), jnp.exp(-2.0 * ts), rtol=1e-3)
    with pytest.raises(Exception, match="rate"):
        run(ts, -1.0)
    with pytest.raises(Exception, match="saveat.ts"):
        run(ts.at[2].set(2.0), 1.0)


def test_diffeqsolve_throw_raises_on_failure_only():
    # diffrax's default throw=True: a spent step budget raises (it had come back NaN); a solve
    # stopped by an event, or saving only its dense output, is fine
    from theory.numerics import diffeqsolve

    term = diffrax.ODETerm(lambda t, y, a: -y)
    with pytest.raises(ValueError, match="the solve failed"):
        diffeqsolve(term, diffrax.Tsit5(), 0.0, 10.0, 0.01, jnp.array(1.0), max_steps=3)
    event = diffrax.Event(lambda t, y, a, **kw: y < 0.5)
    sol = diffeqsolve(term, diffrax.Euler(), 0.0, 2.0, 0.1, jnp.array(1.0), event=event)
    assert sol.result == diffrax.RESULTS.event_occurred
    dense = diffrax.SaveAt(dense=True)
    sol = diffeqsolve(term, diffrax.Tsit5(), 0.0, 1.0, 0.1, jnp.array(1.0), saveat=dense)
    assert abs(float(sol.evaluate(0.5)) - float(jnp.exp(-0.5))) < 1e-4
