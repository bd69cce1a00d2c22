"""The gallery: every example in `examples/` executed, its output and figure on the site.

    python -m benchmarks.gallery              # run every example, write docs/gallery/
    python -m benchmarks.gallery --only spectra
    python -m benchmarks.gallery --check      # fail if a page's code is not its example's

Each example runs as a user runs it (`python examples/<name>.py <figure folder>`, in a fresh
process from the repository root); its page (`docs/gallery/<name>.md`) shows the docstring,
the code, what it printed, its figure, and the seconds it took, the commit and the machine.
The pages are committed with the site, so a page whose code is not the example's any more
(an example edited without running the gallery) fails `--check` (a default test) and the
examples themselves run in the slow tests (`tests/test_examples.py`).
"""

import argparse
import ast
import platform
import shutil
import subprocess
import sys
import time
from pathlib import Path

from benchmarks._common import code_version

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"
PAGES = ROOT / "docs" / "gallery"
CODE_OPEN, CODE_CLOSE = "```python\n", "```\n"


def examples() -> list[Path]:
    """The runnable examples (not the helper modules, whose names start with `_`)."""
    return sorted(p for p in EXAMPLES.glob("*.py") if not p.name.startswith("_"))


def _parts(path: Path) -> tuple[str, str, str]:
    """(title, the docstring's body without its run line, the code after the docstring)."""
    source = path.read_text()
    tree = ast.parse(source)
    doc = ast.get_docstring(tree)
    if doc is None:
        raise ValueError(f"{path.name} must open with a docstring (its page's title and text)")
    lines = [line.rstrip() for line in doc.splitlines()]
    # the title: the docstring's first paragraph joined
    end = lines.index("") if "" in lines else len(lines)
    title = " ".join(line.strip() for line in lines[:end])
    body = [line for line in lines[end:] if not line.startswith("python examples/")]
    code_start = tree.body[0].end_lineno  # the docstring's last line
    code = "\n".join(source.splitlines()[code_start:]).strip("\n") + "\n"
    return title, "\n".join(body).strip(), code


def run(path: Path, out: Path) -> dict:
    """Run one example as a user would; its stdout, its seconds and its figures (which
    replace the page's only where it succeeded)."""
    figures = out / path.stem
    fresh = out / f".{path.stem}.running"
    shutil.rmtree(fresh, ignore_errors=True)
    start = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, str(path), str(fresh)],
        capture_output=True, text=True, cwd=ROOT, timeout=900,
    )  # fmt: skip
    seconds = time.perf_counter() - start
    if proc.returncode != 0:
        shutil.rmtree(fresh, ignore_errors=True)
        raise RuntimeError(f"{path.name} failed:\n{proc.stderr[-3000:]}")
    shutil.rmtree(figures, ignore_errors=True)
    if fresh.exists():
        fresh.rename(figures)
    shown = [line for line in proc.stdout.splitlines() if not line.startswith("figure: ")]
    names = sorted(p.name for p in figures.glob("*.png")) if figures.exists() else []
    return {"stdout": "\n".join(shown), "seconds": seconds, "figures": names}


def page(path: Path, result: dict, commit: str) -> str:
    _, _, code = _parts(path)
    machine = f"{platform.machine()}, {platform.system()}, Python {platform.python_version()}"
    lines = [_head(path).rstrip("\n"), ""]
    lines += [
        f"Run it: `python examples/{path.name}` (it saves its figure in the current folder, or "
        "in the folder given as its argument).",
        "",
        CODE_OPEN + code + CODE_CLOSE.rstrip("\n"),
        "",
        "What it printed:",
        "",
        "```text",
        result["stdout"],
        "```",
        "",
    ]
    lines += [f"![{name}]({path.stem}/{name})\n" for name in result["figures"]]
    lines += [
        f"Executed by `python -m benchmarks.gallery` in {result['seconds']:.1f} s "
        f"({machine}, CPU), commit {commit}.",
        "",
    ]
    return "\n".join(lines)


def index(paths: list[Path]) -> str:
    lines = [
        "# Gallery",
        "",
        "Every example in `examples/`, executed: its code, what it printed and its figure. "
        "One per paper, and one per capability beyond them. `python -m benchmarks.gallery` "
        "runs them again and rewrites these pages; `GALLERY=1 mkdocs build` does so as it "
        "builds the site.",
        "",
        "| example | what it shows |",
        "|---|---|",
    ]
    for path in paths:
        title, _, _ = _parts(path)
        lines.append(f"| [{path.stem}]({path.stem}.md) | {title} |")
    return "\n".join(lines) + "\n"


def _head(path: Path) -> str:
    """A page's text before its run line: the example's title and docstring."""
    title, body, _ = _parts(path)
    return f"# {title}\n\n" + (f"{body}\n\n" if body else "")


def stale(pages: Path = PAGES) -> list[str]:
    """Examples whose page is missing or shows another docstring or code than the example's."""
    out = []
    for path in examples():
        target = pages / f"{path.stem}.md"
        code = _parts(path)[2]
        text = target.read_text() + "\n" if target.exists() else ""
        if not text.startswith(_head(path)) or CODE_OPEN + code + CODE_CLOSE not in text:
            out.append(path.name)
    if not (pages / "index.md").exists() or (pages / "index.md").read_text() != index(examples()):
        out.append("index.md")
    return out


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", type=Path, default=PAGES)
    p.add_argument("--only", nargs="*", default=None, help="example names (no .py)")
    p.add_argument("--check", action="store_true")
    args = p.parse_args(argv)
    if args.check:
        bad = stale(args.out)
        if bad:
            sys.exit(f"gallery pages out of date: {bad} (run python -m benchmarks.gallery)")
        print("gallery: every page shows its example's code")
        return
    args.out.mkdir(parents=True, exist_ok=True)
    commit = code_version()
    for path in examples():
        if args.only is not None and path.stem not in args.only:
            continue
        result = run(path, args.out)
        (args.out / f"{path.stem}.md").write_text(page(path, result, commit))
        print(f"gallery: {path.name}: {result['seconds']:.1f} s, {result['figures']}")
    (args.out / "index.md").write_text(index(examples()))


if __name__ == "__main__":
    main()
