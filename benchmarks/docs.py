"""The documentation's tables of measured figures, generated from the benchmarks' results.

    python -m benchmarks.docs [--results results]   # copy the results in, write the tables
    python -m benchmarks.docs --check               # fail if a table differs from its data
    python -m benchmarks.docs --rerender            # after a change to a table: every page

Pages drawn from several benchmarks' data (`COMBINED`) are generated the same way from the
copies: `docs/reproduction.md` (the paper's tables beside ours, `benchmarks._reproduction_page`,
from `norm_scaling`, `width_ablation` and `alpha_limit`) and
`docs/results/beyond_orthogonal_by_n.md` (`beyond_orthogonal` at every n).

For every page below whose `<results>/<name>/results.json` exists (a benchmark's name, or a
page of a benchmark run with other options, `COMMANDS`), the results (without
their curves) are copied to `docs/data/<name>.json` and the benchmark's own `table()` renders
`docs/results/<name>.md` from that copy, with the benchmark's figures (copied to
`docs/results/<name>/`). The copies are committed with the docs, so the test
suite can check (`--check`) that every documented table is what its data says: a table edited
by hand, or data refreshed without its table, fails.
"""

import argparse
import importlib
import json
import re
import shutil
import sys
from pathlib import Path

from benchmarks import _beyond_by_n, _reproduction_page
from benchmarks._common import from_jsonable

BENCHMARKS = {
    "jump_times": "Saddle-to-saddle jumps: Algorithm 1 against the rescaled flow",
    "alpha_limit": "The alpha -> 0 limit: the vanishing-initialization flow and its solvers",
    "beyond_orthogonal": "Beyond orthogonal inputs: correlated and Gaussian inputs, and the flows",
    "beyond_orthogonal_n64": "Beyond orthogonal inputs at n = 64: correlated and Gaussian inputs",
    "beyond_orthogonal_n256": "Beyond orthogonal inputs at n = 256: the first paper's size",
    "beyond_orthogonal_n256_c1e-6": "Nearly orthogonal inputs (c = 1e-6) at n = 256",
    "beyond_orthogonal_n256_gaussian": "Gaussian inputs (d = n and 4n) at n = 256",
    "correlated_vs_gd_n64": "Correlated inputs at n = 64 against gradient descent",
    "correlated_vs_gd_n256": "Correlated inputs at n = 256 against gradient descent",
    "correlated_vs_gd_n256_c1e-6": "Nearly orthogonal inputs (c = 1e-6) at n = 256 against GD",
    "diagonal_networks": "Diagonal linear networks: the jump process against the exact flow",
    "teacher_student": "Gaussian teacher-student: population flow, plateaus and saddles",
    "saddles": "Critical points of any model: polishing and Morse indices",
    "any_model": "Any Equinox model: the generic flow against references",
    "relu_networks": "Deep ReLU networks through their loss drop against gradient descent",
    "relu_networks_n1000": "A width-64 ReLU network on 1,000 samples against gradient descent",
    "relu_networks_n1000_steps": "The same width-64 network on 1,000 samples, stepped",
    "saddle_chain": (
        "Saddle chains (tanh nets, ReLU nets on orthonormal data against Algorithm 1, a "
        "teacher-student loss against its ODEs) and Hessian spectral densities"
    ),
    "online_sgd": "Online SGD: order-parameter ODEs against simulations, Euler and the plateau",
    "online_sgd_d8000": "Online SGD at d = 8000 against its order-parameter ODEs",
    "startup": "The main job's seconds, cold and warm: imports, tracing, compiling, arithmetic",
    "two_layer_vs_gd": "Two-layer flow on Gaussian inputs against gradient descent",
    "two_layer_vs_gd_large": "Two-layer flow at n = 128 and 256: events, steps and GD",
    "max_margin": "Max-margin directions: GD against the limit, and the regime map",
    "phase_transition": "The weak/strong-signal transition: closed form, Monte Carlo, bounds",
    "phase_transition_tails": "The transition under heavy-tailed (Student-t) noise",
    "phase_transition_label_noise": "The transition with flipped training labels",
    "multi_index": "The multi-index staircase: population flow against the Hermite stages",
    "multi_index_finite_sample": "The multi-index staircase on n = 50,000 samples",
}
# pages whose results come from a benchmark run with other options, in `<results>/<page>`
COMMANDS = {
    "phase_transition_tails": "phase_transition --noise student-t --dof 2.5 3 4 8",
    "phase_transition_label_noise": "phase_transition --label-noise 0 0.05 0.1 0.2",
    "multi_index_finite_sample": "multi_index --samples 50000",
    "online_sgd_d8000": "online_sgd --dims 8000 --configs 0 1 2",
    "relu_networks_n1000": "relu_networks --large",
    "relu_networks_n1000_steps": "relu_networks --large --methods steps",
    "two_layer_vs_gd_large": "two_layer_vs_gd --large",
    "beyond_orthogonal_n64": (
        "beyond_orthogonal --n 64 --cs 0 1e-6 0.1 --d-over-n 1 4 --no-solvers"
    ),
    "beyond_orthogonal_n256": (
        "beyond_orthogonal --n 256 --cs 0 0.1 --d-over-n --no-solvers --seeds 8"
    ),
    "beyond_orthogonal_n256_c1e-6": (
        "beyond_orthogonal --n 256 --cs 1e-6 --d-over-n --no-solvers --seeds 8"
    ),
    "beyond_orthogonal_n256_gaussian": (
        "beyond_orthogonal --n 256 --cs --d-over-n 1 4 --no-solvers --seeds 8"
    ),
    "correlated_vs_gd_n64": "correlated_vs_gd --n 64 --seeds 2",
    "correlated_vs_gd_n256": "correlated_vs_gd --n 256 --seeds 1 --setting 0.1 10",
    "correlated_vs_gd_n256_c1e-6": "correlated_vs_gd --n 256 --seeds 1 --setting 1e-6 10",
}
# pages drawn from several benchmarks' data: path under docs/ -> (renderer, the data it reads,
# None for each not run)
COMBINED = {
    "reproduction.md": (_reproduction_page.render_data, _reproduction_page.INPUTS),
    _beyond_by_n.PAGE: (_beyond_by_n.render_data, _beyond_by_n.INPUTS),
}
DROP = ("curves", "curve", "directions", "signs", "y")  # plot and instance data
ROOT = Path(__file__).resolve().parent.parent / "docs"


def _slim(value):
    if isinstance(value, dict):
        return {k: _slim(v) for k, v in value.items() if k not in DROP and not k.startswith("_")}
    if isinstance(value, list):
        return [_slim(v) for v in value]
    return value


def _is_rule(line: str) -> bool:
    return len(line) >= 10 and set(line.strip()) == {"-"}


def _columns(lines: list[str]) -> tuple[list[str], list[list[int]]]:
    """The lines padded to one width and the column spans of their fixed-width table: runs of
    positions where some line has text, split at positions blank on every line. A span with
    no header text joins the span before it (a value's '+- 1e-3'); a header word with no
    values under it, one space from the next, names the next column with it ('pred. t')."""
    width = max(len(line) for line in lines)
    padded = [line.ljust(width) for line in lines]
    blank = [all(line[i] == " " for line in padded) for i in range(width)] + [True]
    spans, start = [], None
    for i, empty in enumerate(blank):
        if not empty and start is None:
            start = i
        elif empty and start is not None:
            spans.append([start, i])
            start = None
    merged = []
    for span in spans:
        if merged and not padded[0][span[0] : span[1]].strip():
            merged[-1][1] = span[1]
        else:
            merged.append(span)
    joined = []
    for span in merged:
        one_space = bool(joined) and span[0] - joined[-1][1] == 1
        bare = one_space and not any(p[joined[-1][0] : joined[-1][1]].strip() for p in padded[1:])
        if bare:
            joined[-1][1] = span[1]
        else:
            joined.append(span)
    return padded, joined


def _cells(padded: list[str], spans: list[list[int]]) -> list[list[str]]:
    """The table's header and rows; a span whose header splits (at two or more spaces) into
    as many names as each of its values has tokens is split into those columns."""
    header, rows = [], [[] for _ in padded[1:]]
    for a, b in spans:
        names = re.split(r"\s{2,}", padded[0][a:b].strip())
        values = [p[a:b].split() for p in padded[1:]]
        if len(names) > 1 and all(len(v) == len(names) for v in values):
            header += names
            for row, v in zip(rows, values, strict=True):
                row += v
        else:
            header.append(" ".join(padded[0][a:b].split()))
            for row, p in zip(rows, padded[1:], strict=True):
                row.append(" ".join(p[a:b].split()))
    return [header, *rows]


def _markdown_table(rows: list[list[str]]) -> str:
    def line(cells):
        return "| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |"

    return "\n".join([line(rows[0]), "|" + "---|" * len(rows[0]), *map(line, rows[1:])])


def text_to_markdown(text: str) -> str:
    """A benchmark's fixed-width text as markdown: each table (a header line over a rule of
    dashes, then the rows, lines of as many fields) a real table, the lines around them
    kept as text."""
    lines, out, kept = text.splitlines(), [], []

    def keep():
        block = "\n".join(kept).strip("\n")
        if block:
            out.append("```text\n" + block + "\n```")
        kept.clear()

    i = 0
    while i < len(lines):
        if i + 1 < len(lines) and _is_rule(lines[i + 1]) and lines[i].strip():
            fields = len(re.split(r"\s{2,}", lines[i].strip()))
            width = len(lines[i + 1].rstrip())
            j = i + 2
            # a row: fields apart by two or more spaces, and no longer than the rule (a note
            # line under a table runs past it; a row whose last cells are empty ends short)
            while (
                j < len(lines)
                and lines[j].strip()
                and not _is_rule(lines[j])
                and len(re.split(r"\s{2,}", lines[j].strip())) >= max(2, fields // 2)
                and len(lines[j].rstrip()) <= width + 2
            ):
                j += 1
            padded, spans = _columns([lines[i], *lines[i + 2 : j]])
            heads = all(padded[0][a:b].strip() for a, b in spans)
            if j > i + 2 and len(spans) >= 2 and heads:
                keep()
                out.append(_markdown_table(_cells(padded, spans)))
                i = j
                continue
        kept.append(lines[i])
        i += 1
    keep()
    return "\n\n".join(out)


def render(name: str, data: dict) -> str:
    """The page of one benchmark: its title, where the data came from, and its table."""
    command = COMMANDS.get(name, name)
    table = importlib.import_module(f"benchmarks.{command.split()[0]}").table(from_jsonable(data))
    if not table.lstrip().startswith("|"):  # a fixed-width text table
        table = text_to_markdown(table)
    env = dict(data.get("environment", {}))
    # runs before the benchmarks recorded their commit carry the commit in which their data
    # last changed in the docs (backfilled from git)
    data_commit = env.pop("data_commit", None)
    where = ", ".join(f"{k} {v}" for k, v in env.items() if isinstance(v, str | int | float))
    if data_commit:
        where += (
            f"; the run did not record its commit, its data last changed in commit {data_commit}"
        )
    figures = "".join(f"![{f}]({name}/{f})\n\n" for f in data.get("figures", []))
    return (
        f"# {BENCHMARKS[name]}\n\n"
        f"Generated by `python -m benchmarks.docs` from `docs/data/{name}.json` (the results of "
        f"`python -m benchmarks.{command}`); do not edit by hand.\n\n"
        f"{table}\n\n{figures}" + (f"Measured with {where}.\n" if where else "")
    )


def _combined(page: str, root: Path) -> str:
    """A `COMBINED` page from the data under `root`."""
    render_data, inputs = COMBINED[page]
    return render_data(
        *(_reproduction_page.load(root / "data" / f"{name}.json") for name in inputs)
    )


def update(results: Path, root: Path = ROOT) -> list[str]:
    """Copy each benchmark's results in and write its table; returns the names updated."""
    done = []
    (root / "data").mkdir(parents=True, exist_ok=True)
    data_only = {n for _, inputs in COMBINED.values() for n in inputs if n not in BENCHMARKS}
    for name in [*BENCHMARKS, *sorted(data_only)]:
        src = results / name / "results.json"
        if not src.exists():
            continue
        data = _slim(json.loads(src.read_text()))
        if name in BENCHMARKS:  # a page of its own (the others feed `COMBINED` pages only)
            figures = sorted(p.name for p in src.parent.glob("*.png"))
            data["figures"] = figures  # the benchmark's own figures, drawn from these results
            (root / "results" / name).mkdir(parents=True, exist_ok=True)
            for f in figures:
                shutil.copyfile(src.parent / f, root / "results" / name / f)
            (root / "results" / f"{name}.md").write_text(render(name, data))
        (root / "data" / f"{name}.json").write_text(json.dumps(data, indent=1) + "\n")
        done.append(name)
    for page, (_, inputs) in COMBINED.items():
        if any(n in done for n in inputs):
            (root / page).write_text(_combined(page, root))
    return done


def rerender(root: Path = ROOT) -> list[str]:
    """Write every page again from its committed data (after a change to a benchmark's
    `table`); returns the pages written."""
    done = []
    for data in sorted((root / "data").glob("*.json")):
        if data.stem in BENCHMARKS:
            page = root / "results" / f"{data.stem}.md"
            page.write_text(render(data.stem, json.loads(data.read_text())))
            done.append(data.stem)
    for page in COMBINED:
        (root / page).write_text(_combined(page, root))
        done.append(page)
    return done


def stale(root: Path = ROOT) -> list[str]:
    """The documented tables that differ from what their data renders (or lack their data)."""
    bad = []
    for page in sorted((root / "results").glob("*.md")):
        if page.stem == "index" or f"results/{page.name}" in COMBINED:
            continue
        data = root / "data" / f"{page.stem}.json"
        if page.stem not in BENCHMARKS or not data.exists():
            bad.append(f"{page}: no data file {data}")
        elif render(page.stem, json.loads(data.read_text())) != page.read_text():
            bad.append(f"{page}: differs from what {data} renders")
    for name, (_, inputs) in COMBINED.items():
        page = root / name  # (a missing input renders differently from the page's)
        if page.exists() and _combined(name, root) != page.read_text():
            bad.append(f"{page}: differs from what the data of {', '.join(inputs)} renders")
    return bad


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.docs", description=__doc__)
    p.add_argument("--results", type=Path, default=Path("results"), help="benchmarks' --out root")
    p.add_argument("--check", action="store_true", help="only check the documented tables")
    p.add_argument(
        "--rerender",
        action="store_true",
        help="write every page again from its committed data (after a change to a table)",
    )
    args = p.parse_args(argv)
    if args.rerender:
        print(f"wrote {', '.join(rerender())}")
        return 0
    if args.check:
        bad = stale()
        for line in bad:
            print(line, file=sys.stderr)
        return 1 if bad else 0
    done = update(args.results)
    print(f"wrote docs/results/ for {', '.join(done) or 'nothing (no results found)'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
