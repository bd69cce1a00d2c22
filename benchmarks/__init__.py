"""Theory against simulation, side by side: one module per question, `python -m benchmarks.X`.

Each benchmark is a thin program: it configures, calls the library, compares, and writes
`results.json` and its figures. Benchmarks never import one another; what several share lives
in private helpers (`benchmarks/_*.py`). Importing a benchmark changes nothing process-wide:
its `main` sets the one option the library never sets (on CPU, one XLA host device per core,
so that `integrators.sweep` shards seeds over all cores) before JAX starts.
"""
