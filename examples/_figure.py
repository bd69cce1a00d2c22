"""Where an example puts its figure: the folder named by its first argument, else the current
folder (`python examples/jump_process.py figures/`)."""

import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def figure(width=5.5, height=3.6):
    """A new figure and its axes."""
    return plt.subplots(figsize=(width, height))


def save(fig, name: str) -> None:
    """Save `fig` as `name` in the figure folder and say so."""
    folder = Path(sys.argv[1]) if len(sys.argv) > 1 else Path.cwd()
    folder.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(folder / name, dpi=110)
    plt.close(fig)
    print(f"figure: {name}")


def save_jump_times(predicted, measured, label: str, name: str) -> None:
    """The flow's jump times against Algorithm 1's (every seed's jumps, NaN-padded), with the
    diagonal, saved as `name`."""
    import numpy as np

    predicted, measured = np.asarray(predicted).ravel(), np.asarray(measured).ravel()
    fig, ax = figure(4.5, 4.0)
    ax.plot(predicted, measured, "o", ms=4, label=label)
    top = float(np.max(predicted[np.isfinite(predicted)]))  # (jumps that never come: inf)
    ax.plot([0, top], [0, top], "k--", lw=1, label="measured = predicted")
    ax.set_xlabel("Algorithm 1's jump time (rescaled)")
    ax.set_ylabel("the flow's jump time")
    ax.legend()
    save(fig, name)
