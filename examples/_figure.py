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
