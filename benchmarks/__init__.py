"""Theory against simulation, side by side: one module per question, `python -m benchmarks.X`."""
