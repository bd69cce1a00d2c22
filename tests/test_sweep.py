import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from bench import xla_flags

from integrators import SweepConfigError, load_sweep, pick_batch_size, sweep
from integrators._sweep_store import _SECONDS

JOB = str(Path(__file__).with_name("sweep_job.py"))
ROOT = str(Path(__file__).resolve().parents[1])


def _job(out, result, *extra, devices=1, wait=True):
    env = dict(os.environ, PYTHONPATH=ROOT)
    env["XLA_FLAGS"] = xla_flags(devices)
    cmd = [sys.executable, JOB, str(out), str(result), *extra]
    if not wait:
        return subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _same(path_a, path_b):
    """Two chunk files hold the same results (their recorded seconds aside)."""
    a, b = np.load(path_a), np.load(path_b)
    assert sorted(a.files) == sorted(b.files)
    for k in set(a.files) - {_SECONDS}:
        np.testing.assert_array_equal(a[k], b[k], err_msg=k)


@pytest.mark.slow
def test_sharded_over_8_devices_equals_one_device(tmp_path):
    one = _job("-", tmp_path / "one.npz", devices=1)
    eight = _job("-", tmp_path / "eight.npz", "--chunk", "8", devices=8)
    assert one["devices"] == 1 and eight["devices"] == 8
    _same(tmp_path / "one.npz", tmp_path / "eight.npz")


@pytest.mark.slow
def test_killed_sweep_resumes_without_recomputing(tmp_path):
    full = _job(tmp_path / "full", tmp_path / "full.npz", "--steps", "20000")
    assert full["computed"] == 12 and full["loaded"] == 0  # 2 points x 6 chunks

    out = tmp_path / "killed"
    proc = _job(out, tmp_path / "never.npz", "--steps", "20000", wait=False)
    chunks = out / "chunks"
    deadline = time.time() + 240
    while time.time() < deadline and len(list(chunks.glob("*.npz"))) < 3:
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    finished = sorted(chunks.glob("*.npz"))
    assert 3 <= len(finished) < 12, "the kill must land midway"
    stamps = {p: p.stat().st_mtime_ns for p in finished}

    resumed = _job(out, tmp_path / "resumed.npz", "--steps", "20000")
    assert resumed["loaded"] == len(finished)
    assert resumed["computed"] == 12 - len(finished)
    assert all(p.stat().st_mtime_ns == t for p, t in stamps.items())  # not rewritten
    _same(tmp_path / "full.npz", tmp_path / "resumed.npz")


def test_corrupt_and_partial_chunks_are_recomputed(tmp_path):
    def run(key, scale):
        return {"x": scale * jax.random.normal(key, (2,))}

    kwargs = dict(seeds=12, grid=[{"scale": 1.0}], out=tmp_path, chunk_size=2, progress=False)
    first = sweep(run, **kwargs)
    files = sorted((tmp_path / "chunks").glob("*.npz"))
    assert len(files) == 6
    files[0].write_bytes(files[0].read_bytes()[:100])  # partial write
    files[1].write_bytes(b"not a zip file at all")  # corrupt
    files[2].write_bytes(files[3].read_bytes())  # another chunk's (valid) file
    again = sweep(run, **kwargs)
    assert again.computed_chunks == 3 and again.loaded_chunks == 3
    np.testing.assert_array_equal(first.outputs[0]["x"], again.outputs[0]["x"])


@pytest.mark.slow
def test_changed_configuration_is_refused(tmp_path):
    out = tmp_path / "run"
    _job(out, tmp_path / "a.npz", "--seeds", "8")
    env = dict(os.environ, PYTHONPATH=ROOT)
    for extra in (["--eta", "0.25"], ["--steps", "1000"]):
        proc = subprocess.run(
            [sys.executable, JOB, str(out), str(tmp_path / "b.npz"), *extra],
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert proc.returncode != 0
        assert "different configuration" in proc.stderr and "SweepConfigError" in proc.stderr


def test_failed_chunk_is_recorded_and_the_sweep_goes_on(tmp_path):
    bad = jax.random.fold_in(jax.random.PRNGKey(0), 5)

    def run(key, scale):
        x = scale * jax.random.normal(key, (3,))
        x = eqx.error_if(x, jnp.all(key == bad), "seed 5 diverged")
        return {"x": x}

    res = sweep(run, seeds=12, grid=[{"scale": 2.0}], out=tmp_path, chunk_size=4, batch_size=2)
    assert [f["seeds"] for f in res.failed[0]] == [[4, 8]]
    assert "seed 5 diverged" in res.failed[0][0]["error"]
    x = res.outputs[0]["x"]
    assert np.isnan(x[4:8]).all() and np.isfinite(x[:4]).all() and np.isfinite(x[8:]).all()
    assert (tmp_path / "chunks" / "p000_s0000004-0000008.failed.json").exists()
    again = sweep(run, seeds=12, grid=[{"scale": 2.0}], out=tmp_path, chunk_size=4, batch_size=2)
    assert again.loaded_chunks == 2 and again.computed_chunks == 0 and len(again.failed[0]) == 1


def test_results_do_not_depend_on_chunk_or_batch_size():
    def run(key, scale):
        return {"x": scale * jax.random.normal(key, (2,))}

    a = sweep(run, seeds=10, grid=[{"scale": 1.0}], chunk_size=3, batch_size=1, progress=False)
    b = sweep(run, seeds=10, grid=[{"scale": 1.0}], chunk_size=10, batch_size=4, progress=False)
    np.testing.assert_array_equal(a.outputs[0]["x"], b.outputs[0]["x"])
    assert a.outputs[0]["x"].shape == (10, 2)


def test_batch_rule():
    cpu = jax.devices("cpu")[0]
    assert pick_batch_size(1, cpu, limit=64) == 64
    assert pick_batch_size(10**12, cpu) == 1
    b = pick_batch_size(100_000, cpu)
    assert b & (b - 1) == 0  # a power of two


def test_changed_configuration_raises_sweep_config_error_in_process(tmp_path):
    def run(key, scale):
        return {"x": scale * jax.random.normal(key)}

    sweep(run, seeds=4, grid=[{"scale": 1.0}], out=tmp_path, progress=False)
    with pytest.raises(SweepConfigError, match="points"):
        sweep(run, seeds=4, grid=[{"scale": 2.0}], out=tmp_path, progress=False)
    with pytest.raises(SweepConfigError, match="config"):
        sweep(run, seeds=4, grid=[{"scale": 1.0}], out=tmp_path, config={"x": 1}, progress=False)


def test_any_chunk_size_gives_the_same_results():
    def run(key, scale):
        return {"x": scale * jax.random.normal(key)}

    a = sweep(run, seeds=7, grid=[{"scale": 1.0}], chunk_size=3, progress=False)
    b = sweep(run, seeds=7, grid=[{"scale": 1.0}], chunk_size=5, progress=False)
    assert (a.chunk_size, b.chunk_size) == (3, 5)
    np.testing.assert_array_equal(a.outputs[0]["x"], b.outputs[0]["x"])


def test_another_run_function_in_the_same_folder_is_refused(tmp_path):
    def run(key, scale):
        return {"x": scale * jax.random.normal(key)}

    def run_other(key, scale):
        return {"x": scale * jax.random.uniform(key)}

    sweep(run, seeds=4, grid=[{"scale": 1.0}], out=tmp_path, progress=False)
    with pytest.raises(SweepConfigError, match="code"):
        sweep(run_other, seeds=4, grid=[{"scale": 1.0}], out=tmp_path, progress=False)


def _scaled(key, scale):
    return {"x": scale * jax.random.normal(key, (2,))}


def test_a_chunk_of_another_grid_point_is_recomputed(tmp_path):
    grid = [{"scale": 1.0}, {"scale": 2.0}]
    first = sweep(_scaled, seeds=4, grid=grid, out=tmp_path, progress=False)
    chunks = tmp_path / "chunks"
    (chunks / "p001_s0000000-0000004.npz").write_bytes(
        (chunks / "p000_s0000000-0000004.npz").read_bytes()
    )
    again = sweep(_scaled, seeds=4, grid=grid, out=tmp_path, progress=False)
    assert again.computed_chunks == 1 and again.loaded_chunks == 1
    np.testing.assert_array_equal(again.outputs[1]["x"], first.outputs[1]["x"])


SCALE = 1.0


def _reads_a_global(key):
    return {"x": SCALE * jax.random.normal(key)}


def test_a_module_global_that_run_reads_enters_the_fingerprint(tmp_path):
    global SCALE
    sweep(_reads_a_global, seeds=2, out=tmp_path, progress=False)
    SCALE = 2.0
    try:
        with pytest.raises(SweepConfigError, match="code"):
            sweep(_reads_a_global, seeds=2, out=tmp_path, progress=False)
    finally:
        SCALE = 1.0


class _Sim:
    def __init__(self, scale):
        self.scale = scale

    def run(self, key):
        return {"x": self.scale * jax.random.normal(key)}


class _Config:  # the default repr: only an address
    pass


class _Scaled(eqx.Module):
    scale: jax.Array

    def __call__(self, key):
        return {"x": self.scale * jax.random.normal(key)}


def test_the_in_memory_program_cache_follows_what_run_reads():
    # in one process, a second sweep with no `out` reused the first's program (keyed on the
    # function object) after a value it reads changed, and returned the old values
    config = _Config()
    config.scale = 1.0

    def run(key):
        return {"x": config.scale * jax.random.normal(key)}

    first = sweep(run, seeds=3, progress=False).outputs[0]["x"]
    config.scale = 3.0
    again = sweep(run, seeds=3, progress=False).outputs[0]["x"]
    np.testing.assert_allclose(again, 3 * first)


def test_partial_resumes_and_module_name_does_not_matter(tmp_path):
    import functools
    import importlib.util

    run = functools.partial(_scaled, scale=3.0)
    first = sweep(run, seeds=4, out=tmp_path, progress=False)
    again = sweep(functools.partial(_scaled, scale=3.0), seeds=4, out=tmp_path, progress=False)
    assert again.computed_chunks == 0 and again.loaded_chunks == 1
    # the same function, defined in a module of another name, reads the sweep back
    import inspect

    source = "import jax\n\n\n" + inspect.getsource(_scaled)
    path = tmp_path / "elsewhere.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location("elsewhere", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    other = sweep(functools.partial(module._scaled, scale=3.0), seeds=4, out=tmp_path)
    assert other.computed_chunks == 0
    np.testing.assert_array_equal(other.outputs[0]["x"], first.outputs[0]["x"])


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(seeds=0), "seeds"),
        (dict(seeds=4, chunk_size=-1), "chunk_size"),
        (dict(seeds=4, batch_size=0), "batch_size"),
        (dict(seeds=4, chunk_size=2.5), "chunk_size"),
        (dict(seeds=4, grid=[]), "grid"),
        (dict(seeds=4, static=("width",)), "width"),
    ],
)
def test_bad_arguments_are_refused(kwargs, match):
    with pytest.raises(ValueError, match=match):
        sweep(lambda key: {"x": jax.random.normal(key)}, progress=False, **kwargs)


def test_a_chunk_size_above_the_seeds_is_not_padded():
    res = sweep(_scaled, seeds=3, grid=[{"scale": 1.0}], chunk_size=20_000, progress=False)
    assert res.chunk_size == 3 and res.outputs[0]["x"].shape == (3, 2)


def test_a_damaged_manifest_is_rewritten_and_chunks_still_load(tmp_path):
    first = sweep(_scaled, seeds=4, grid=[{"scale": 1.0}], out=tmp_path, progress=False)
    size = json.loads((tmp_path / "sweep.json").read_text())["chunk_size"]
    for damage in ("{not json", "[]", '{"fingerprint": 3}'):
        (tmp_path / "sweep.json").write_text(damage)
        again = sweep(_scaled, seeds=4, grid=[{"scale": 1.0}], out=tmp_path, progress=False)
        assert again.computed_chunks == 0
        np.testing.assert_array_equal(again.outputs[0]["x"], first.outputs[0]["x"])
        assert json.loads((tmp_path / "sweep.json").read_text())["chunk_size"] == size


def test_a_sweep_on_disk_loads_without_compiling(tmp_path):
    sweep(_scaled, seeds=6, grid=[{"scale": 1.0}], out=tmp_path, chunk_size=3, progress=False)
    compiles = []

    def listener(event, duration, **kwargs):
        if event.endswith("backend_compile_duration"):  # XLA compiled a program
            compiles.append(event)

    jax.monitoring.register_event_duration_secs_listener(listener)
    try:
        import types

        # a new function object with the same code (so no compiled program can be reused)
        copy = types.FunctionType(_scaled.__code__, _scaled.__globals__, "_scaled")
        again = sweep(copy, seeds=6, grid=[{"scale": 1.0}], out=tmp_path, progress=False)
    finally:
        jax.monitoring.unregister_event_duration_listener(listener)
    assert again.loaded_chunks == 2 and again.computed_chunks == 0
    assert compiles == []


def test_a_resumed_sweep_reports_what_its_points_cost(tmp_path):
    # point_seconds: each chunk's seconds as recorded when it was computed, not the time
    # it took to load (a resumed benchmark's table showed 2 s for a point of 90 minutes)
    first = sweep(_scaled, seeds=4, grid=[{"scale": 1.0}], out=tmp_path, chunk_size=2,
                  progress=False)  # fmt: skip
    again = sweep(_scaled, seeds=4, grid=[{"scale": 1.0}], out=tmp_path, progress=False)
    assert again.loaded_chunks == 2 and first.point_seconds[0] > 0
    assert again.point_seconds == pytest.approx(first.point_seconds, rel=1e-12)
    assert load_sweep(tmp_path).point_seconds == pytest.approx(first.point_seconds, rel=1e-12)
    # a chunk written before chunk files recorded their time: the cost is unknown
    chunk = sorted(tmp_path.glob("chunks/*.npz"))[0]
    with np.load(chunk) as z:
        arrays = {k: z[k] for k in z.files if k != _SECONDS}
    np.savez(chunk, **arrays)
    assert np.isnan(load_sweep(tmp_path).point_seconds[0])


def test_more_seeds_compute_only_the_new_ones_and_fewer_read_the_first(tmp_path):
    from integrators import load_sweep

    grid = [{"scale": 1.0}, {"scale": 2.0}]
    four = sweep(_scaled, seeds=4, grid=grid, out=tmp_path, chunk_size=2, progress=False)
    files = sorted((tmp_path / "chunks").glob("*.npz"))
    stamps = {p: p.stat().st_mtime_ns for p in files}
    seven = sweep(_scaled, seeds=7, grid=grid, out=tmp_path, progress=False)
    assert seven.loaded_chunks == 4 and seven.computed_chunks == 4  # [4, 6) and [6, 7)
    assert all(p.stat().st_mtime_ns == t for p, t in stamps.items())  # not rewritten
    alone = sweep(_scaled, seeds=7, grid=grid, chunk_size=3, progress=False)
    for a, b, c in zip(four.outputs, seven.outputs, alone.outputs, strict=True):
        np.testing.assert_array_equal(a["x"], b["x"][:4])
        np.testing.assert_array_equal(b["x"], c["x"])
    assert load_sweep(tmp_path).outputs[0]["x"].shape == (7, 2)
    three = sweep(_scaled, seeds=3, grid=grid, out=tmp_path, progress=False)
    assert three.loaded_chunks == 4 and three.computed_chunks == 0
    np.testing.assert_array_equal(three.outputs[1]["x"], seven.outputs[1]["x"][:3])
    assert load_sweep(tmp_path).outputs[0]["x"].shape == (7, 2)  # the folder keeps all 7


@pytest.mark.slow
def test_extending_keeps_the_earlier_chunks_and_their_failure_records_go(tmp_path, monkeypatch):
    from integrators import load_sweep

    grid = [{"scale": 1.0}]

    def run(key, scale):
        x = scale * jax.random.normal(key, (2,))
        # seed 4 fails in the first run only (read at tracing, outside the fingerprint)
        on = os.environ.get("SWEEP_TEST_FAIL") == "1"
        fail = on & jnp.all(key == jax.random.fold_in(jax.random.PRNGKey(0), 4))
        return {"x": eqx.error_if(x, fail, "seed 4 diverged")}

    monkeypatch.setenv("SWEEP_TEST_FAIL", "1")

    # 5 seeds in chunks of 2: [0, 2), [2, 4), [4, 5), the last one failed
    five = sweep(run, seeds=5, grid=grid, out=tmp_path, chunk_size=2, progress=False)
    assert [f["seeds"] for f in five.failed[0]] == [[4, 5]]
    monkeypatch.setenv("SWEEP_TEST_FAIL", "0")
    jax.clear_caches()  # the programs of the first run were traced with the failure on
    # 7 more: the old boundaries stay ([4, 5) is recomputed as itself), the new seeds start
    # at 5, and the stale failure record goes
    seven = sweep(run, seeds=7, grid=grid, out=tmp_path, progress=False)
    assert seven.loaded_chunks == 2 and seven.computed_chunks == 2 and seven.failed == [[]]
    assert sorted(p.name for p in (tmp_path / "chunks").glob("*")) == [
        "p000_s0000000-0000002.npz", "p000_s0000002-0000004.npz",
        "p000_s0000004-0000005.npz", "p000_s0000005-0000007.npz",
    ]  # fmt: skip
    back = load_sweep(tmp_path)
    assert back.ok and back.missing == [[]] and back.outputs[0]["x"].shape == (7, 2)
    alone = sweep(run, seeds=7, grid=grid, progress=False)
    np.testing.assert_array_equal(back.outputs[0]["x"], alone.outputs[0]["x"])
    # a small first run does not fix the chunk size for the next: 2 seeds, then 20 in one
    small = tmp_path / "small"
    sweep(_scaled, seeds=2, grid=grid, out=small, chunk_size=16, progress=False)
    more = sweep(_scaled, seeds=20, grid=grid, out=small, progress=False)
    assert more.loaded_chunks == 1 and more.computed_chunks == 2  # [2, 18), [18, 20)


def test_load_sweep_reads_finished_and_partial_sweeps(tmp_path):
    from integrators import load_sweep

    grid = [{"scale": 1.0}, {"scale": 2.0}]
    res = sweep(_scaled, seeds=6, grid=grid, out=tmp_path, chunk_size=3, progress=False)
    back = load_sweep(tmp_path)
    assert back.points == res.points and back.loaded_chunks == 4 and back.missing == [[], []]
    for a, b in zip(res.outputs, back.outputs, strict=True):
        np.testing.assert_array_equal(a["x"], b["x"])
    (tmp_path / "chunks" / "p001_s0000003-0000006.npz").unlink()
    partial = load_sweep(tmp_path)
    assert partial.missing == [[], [[3, 6]]]
    assert np.isnan(partial.outputs[1]["x"][3:]).all()
    with pytest.raises(ValueError, match="out"):
        load_sweep(tmp_path / "nothing_here")


@pytest.mark.slow
def test_two_processes_writing_one_folder_do_not_corrupt_it(tmp_path):
    out = tmp_path / "shared"
    procs = [_job(out, tmp_path / f"r{i}.npz", "--steps", "3000", wait=False) for i in range(2)]
    for proc in procs:
        # communicate() reads and closes the pipes (wait() left them open: ResourceWarnings)
        _, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err.decode()
    _same(tmp_path / "r0.npz", tmp_path / "r1.npz")
    again = _job(out, tmp_path / "r2.npz", "--steps", "3000")
    assert again["computed"] == 0  # every chunk on disk is whole and valid
    _same(tmp_path / "r0.npz", tmp_path / "r2.npz")


def test_argument_checks_in_a_sweep_are_collected_not_callbacks():
    # a traced check inside run is recorded (no host callback in the program) and fails its
    # chunk with the check's own message
    from theory.checks import check_positive

    def run(key, scale):
        return {"x": check_positive("scale", scale) * jax.random.normal(key)}

    res = sweep(run, seeds=4, grid=[{"scale": 1.0}, {"scale": -1.0}], progress=False)
    assert res.failed[0] == [] and len(res.failed[1]) == 1 and not res.ok
    assert "`scale` must be finite and > 0" in res.failed[1][0]["error"]
    assert "seed 0" in res.failed[1][0]["error"]


def test_loop_state_bytes_counts_the_largest_loop_state_that_is_read():
    from integrators._sweep_programs import loop_state_bytes

    def nested(x):
        def outer(carry, _):
            inner = jax.lax.fori_loop(0, 2, lambda i, v: v + 1.0, carry)  # 1,000 float64
            return inner, jnp.sum(inner)

        return jax.lax.scan(outer, x, None, length=3)

    jaxpr = jax.make_jaxpr(nested)(jnp.zeros(1000, jnp.float64)).jaxpr
    assert loop_state_bytes(jaxpr) == 8000 + 3 * 8  # the scan's carry and its stacked sums

    def unread(x):
        jax.lax.fori_loop(0, 2, lambda i, v: v + 1.0, x)  # its state is never read
        return x

    assert loop_state_bytes(jax.make_jaxpr(unread)(jnp.zeros(1000)).jaxpr) == 0


def test_the_batch_size_without_compiling_agrees_with_the_compiled_rule():
    """Where one seed's loop state alone passes half the cache budget, the batch size is 1
    without the memory-analysis compile, as the compiled rule gives; below, the compile."""
    from integrators._sweep_programs import _key_itself, _l2_bytes, _Programs

    mesh = jax.sharding.Mesh(np.array(jax.devices()[:1]), ("seed",))
    key = jax.random.PRNGKey(0)
    for size, expected in ((_l2_bytes(), 1), (8, None)):  # float64 entries: 8x L2, 64 bytes

        def run(key, size=size):
            x = jax.random.normal(key, (size,), jnp.float64)
            return {"x": jnp.sum(jax.lax.fori_loop(0, 3, lambda i, v: jnp.sin(v), x))}

        prog = _Programs(_key_itself, run, {}, mesh, None)
        assert prog._batch_without_compiling(key, {}) == expected
        compiled = prog.run_checked.lower(key, {}).compile().memory_analysis()
        per_seed = sum(
            (compiled.temp_size_in_bytes, compiled.argument_size_in_bytes,
             compiled.output_size_in_bytes)
        )  # fmt: skip
        if expected == 1:
            assert pick_batch_size(per_seed) == 1


def test_run_is_traced_once_per_configuration_and_again_after_clear_caches():
    traces = []

    def run(key, scale):
        traces.append(None)  # Python runs only while JAX traces
        return {"x": scale * jax.random.normal(key, (2,))}

    first = sweep(run, seeds=4, grid=[{"scale": 1.0}, {"scale": 2.0}], progress=False)
    assert len(traces) == 1  # shapes, batch size and the sharded program from one trace
    jax.clear_caches()
    again = sweep(run, seeds=4, grid=[{"scale": 1.0}, {"scale": 2.0}], progress=False)
    assert len(traces) == 2
    np.testing.assert_array_equal(first.outputs[1]["x"], again.outputs[1]["x"])


def test_typed_keys_in_a_loop_state_and_messages_per_point_of_another_shape():
    from theory.checks import check_value

    def run(key):  # a typed PRNG key carried by a loop: its bytes are not counted, no crash
        k = jax.random.wrap_key_data(key)
        k, x = jax.lax.fori_loop(
            0, 3, lambda i, c: (jax.random.split(c[0])[0], c[1] + jax.random.normal(c[0], (4,))),
            (k, jnp.zeros(4)),
        )  # fmt: skip
        return {"x": x + jax.random.uniform(k)}

    assert sweep(run, seeds=4, progress=False).ok

    def checked(key, w):  # one program, two shapes of w: each point names its own
        x = jax.random.normal(key)
        return {"y": check_value(x, x > 10.0, f"`x` too small (w of shape {w.shape})")}

    res = sweep(checked, seeds=2, grid=[{"w": np.ones(2)}, {"w": np.ones(3)}], progress=False)
    assert "(w of shape (2,))" in res.failed[0][0]["error"]
    assert "(w of shape (3,))" in res.failed[1][0]["error"]


def test_the_shortcut_leaves_dead_loops_and_unused_arguments_to_the_compile():
    from integrators._sweep_programs import _Programs

    mesh = jax.sharding.Mesh(np.array(jax.devices()[:1]), ("seed",))
    big = 100_000  # float64 entries: 800 kB, over half of any L2 budget up to 1.6 MB

    def dead(key):
        x = jax.random.normal(key, (4,))
        state = jax.lax.fori_loop(0, 3, lambda i, v: jnp.sin(v), jnp.ones(big) * x[0])
        _ = state + 1.0  # read only by dead code: XLA drops the loop
        return {"x": x}

    def unused(inst):  # the instance's large array is never read: jit prunes it
        return {"x": jnp.sin(inst["a"])}

    def make(key):
        return {"a": jax.random.normal(key, (4,)), "b": jnp.zeros(big)}

    key = jax.random.PRNGKey(0)
    for run, maker in ((dead, lambda key: key), (unused, make)):
        prog = _Programs(maker, run, {}, mesh, None)
        instance = jax.eval_shape(prog.make_checked, key, {})[0]
        assert prog._batch_without_compiling(instance, {}) is None
