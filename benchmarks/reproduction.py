"""docs/reproduction.md from measured results: the paper's tables 1 and 2 beside ours.

Reads the `results.json` of `benchmarks.norm_scaling`, `benchmarks.width_ablation` and
`benchmarks.alpha_limit` and writes the side-by-side tables with, for every difference, the
reason, computed from the same results wherever it can be (finite alpha, GD against the flow,
the loss normalization, widths, or a claim that cannot hold for the model as written). The
paper's numbers are its tables (arXiv:2605.27097, in `benchmarks._paper`). Run the three
benchmarks first, then either command (`benchmarks.docs` also copies their data to
`docs/data/`, from which the test suite checks the page):

    python -m benchmarks.docs --results results
    python -m benchmarks.reproduction [--results results] [--out docs/reproduction.md]
"""

import argparse
from pathlib import Path

from benchmarks._reproduction_page import INPUTS, load, render, render_data

__all__ = ["INPUTS", "load", "render", "render_data", "main"]


def main(argv=None) -> Path:
    p = argparse.ArgumentParser(prog="python -m benchmarks.reproduction", description=__doc__)
    p.add_argument("--results", type=Path, default=Path("results"), help="benchmarks' --out root")
    p.add_argument("--out", type=Path, default=Path("docs") / "reproduction.md")
    args = p.parse_args(argv)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(render(args.results))
    print(f"wrote {args.out}")
    return args.out


if __name__ == "__main__":
    main()
