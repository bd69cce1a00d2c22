import jax

jax.config.update("jax_enable_x64", True)


def pytest_collection_modifyitems(items):
    """The end-to-end main job (about 20 s, the longest default test) starts first: started
    last it would leave one worker running it alone at the end of the run."""
    items.sort(key=lambda item: "test_jump_times.py" not in item.nodeid)
