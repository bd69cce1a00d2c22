import jax

jax.config.update("jax_enable_x64", True)


def pytest_collection_modifyitems(items):
    """The end-to-end main job (about 20 s, the longest default test) starts first: started
    last it would leave one worker running it alone at the end of the run."""
    items.sort(key=lambda item: "test_jump_times.py" not in item.nodeid)


def pytest_configure(config):
    """One garbage collection at the end of each worker instead of pytest's five: with JAX's
    compiled programs alive each pass takes about 1.7 s, and one finds the unraisable
    exceptions that pytest reports (it still reports them)."""
    try:
        from _pytest.unraisableexception import gc_collect_iterations_key
    except ImportError:  # another pytest: its default stands
        return
    config.stash[gc_collect_iterations_key] = 1
