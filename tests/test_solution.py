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
