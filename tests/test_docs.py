"""The documentation: every table of measured figures matches the data it was generated from,
every public name has an API entry, the README stays an entry point, and the site builds
strictly."""

import importlib
import importlib.util
import inspect
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks import docs

ROOT = Path(__file__).resolve().parent.parent


def test_documented_tables_match_their_data():
    assert docs.stale() == []
    pages = {p.stem for p in (ROOT / "docs" / "results").glob("*.md")} - {"index"}
    assert pages, "no generated result pages"
    combined = {Path(page).stem for page in docs.COMBINED}
    assert pages <= set(docs.BENCHMARKS) | combined


def test_a_hand_edited_table_is_caught(tmp_path):
    (tmp_path / "data").mkdir()
    (tmp_path / "results").mkdir()
    name = "saddles"
    data = (ROOT / "docs" / "data" / f"{name}.json").read_text()
    (tmp_path / "data" / f"{name}.json").write_text(data)
    page = (ROOT / "docs" / "results" / f"{name}.md").read_text()
    (tmp_path / "results" / f"{name}.md").write_text(page)
    assert docs.stale(tmp_path) == []
    (tmp_path / "results" / f"{name}.md").write_text(page.replace("|", "| ", 1))
    assert len(docs.stale(tmp_path)) == 1
    assert name in docs.rerender(tmp_path)  # written again from its data (`--rerender`)
    assert docs.stale(tmp_path) == []


@pytest.mark.parametrize("name", sorted(docs.COMBINED))
def test_a_hand_edited_combined_page_is_caught(tmp_path, name):
    # the pages drawn from several benchmarks' data (the paper's tables beside ours, the
    # beyond-orthogonal table across n)
    (tmp_path / "data").mkdir()
    (tmp_path / "results").mkdir()
    page = (ROOT / "docs" / name).read_text()
    (tmp_path / name).write_text(page)
    assert len(docs.stale(tmp_path)) == 1  # its data is missing
    for data in docs.COMBINED[name][1]:
        src = ROOT / "docs" / "data" / f"{data}.json"
        if src.exists():  # (one not run yet is "not run" on the page too)
            (tmp_path / "data" / src.name).write_text(src.read_text())
    assert docs.stale(tmp_path) == []
    (tmp_path / name).write_text(page.replace("| 16", "| 16 ", 1))
    assert len(docs.stale(tmp_path)) == 1


def test_every_public_name_is_on_an_api_page():
    # the topic pages name each object (`::: integrators.gradient_flow`); a module-wide page
    # (`::: theory.checks`) covers all of its names
    shown = set()
    for page in (ROOT / "docs" / "api").glob("*.md"):
        shown |= set(re.findall(r"^::: ([\w.]+)", page.read_text(), flags=re.M))
    for package in ("integrators", "dynamics", "theory", "theory.numerics", "theory.checks"):
        module = importlib.import_module(package)
        if package in shown:
            continue
        public = [n for n in module.__all__ if not inspect.ismodule(getattr(module, n))]
        missing = [n for n in public if f"{package}.{n}" not in shown]
        assert missing == [], f"{package}: not on any API page: {missing}"
    nav = (ROOT / "mkdocs.yml").read_text()
    for page in (ROOT / "docs" / "api").glob("*.md"):
        assert f"api/{page.name}" in nav


@pytest.mark.slow
def test_the_readme_example_prints_what_the_readme_shows():
    text = (ROOT / "README.md").read_text()
    code = re.search(r"## A first example\n\n```python\n(.*?)```", text, re.S).group(1)
    shown = re.search(r"It prints .*?```text\n(.*?)```", text, re.S).group(1)
    run = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=300
    )
    assert run.returncode == 0, run.stderr[-2000:]
    assert run.stdout == shown


def test_fixed_width_text_tables_become_markdown_tables():
    text = "\n".join([
        "     p  pred. t  median err     c  +-",
        "---------------------------------------",
        "    10    0.108    2.45e-02        a",
        "    30    6.800    9.22e-03  1e-6  b",
        "fitted slopes: median -1.00, max -0.82",
    ])  # fmt: skip
    md = docs.text_to_markdown(text)
    table, rest = md.split("\n\n")
    assert table.splitlines()[0] == "| p | pred. t | median err | c | +- |"
    assert table.splitlines()[2:] == [
        "| 10 | 0.108 | 2.45e-02 |  | a |",
        "| 30 | 6.800 | 9.22e-03 | 1e-6 | b |",
    ]
    assert rest == "```text\nfitted slopes: median -1.00, max -0.82\n```"


def test_readme_is_an_entry_point():
    text = (ROOT / "README.md").read_text()
    assert len(text.splitlines()) <= 150
    assert "pip install -e . && python -m benchmarks.jump_times" in text
    assert "pip install -e '.[test]' && pytest" in text
    listed = set(re.findall(r"^- `([a-z_]+)`", text, flags=re.M))
    listed |= set(re.findall(r"`([a-z_]+)`", text))
    benchmarks = {p.stem for p in (ROOT / "benchmarks").glob("*.py") if not p.stem.startswith("_")}
    assert benchmarks <= listed, benchmarks - listed


@pytest.mark.slow
@pytest.mark.skipif(importlib.util.find_spec("mkdocs") is None, reason="pip install -e '.[docs]'")
def test_site_builds_strictly(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-d", str(tmp_path / "site")],
        cwd=ROOT, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    # every object an API page names has its entry; a module-wide page, every public name
    for page in (ROOT / "docs" / "api").glob("*.md"):
        api = (tmp_path / "site" / "api" / page.stem / "index.html").read_text()
        for path in re.findall(r"^::: ([\w.]+)", page.read_text(), flags=re.M):
            try:
                mod = importlib.import_module(path)
            except ModuleNotFoundError:  # an object of a module
                assert f'id="{path}"' in api, path
                continue
            for name in getattr(mod, "__all__", [n for n in dir(mod) if not n.startswith("_")]):
                if not inspect.ismodule(getattr(mod, name)):
                    assert f'id="{path}.{name}"' in api, f"{path}.{name}"
    # the site works offline: math by the KaTeX it serves itself, no fonts or scripts from
    # outside (Material loads Google Fonts unless told not to)
    site = tmp_path / "site"
    assert (site / "assets" / "katex" / "katex.min.js").exists()
    for html in site.rglob("*.html"):
        text = html.read_text()
        assert "fonts.googleapis" not in text and "fonts.gstatic" not in text, html
        assert not re.search(r'<script[^>]+src="https?://', text), html
    online = (site / "guides" / "online-sgd" / "index.html").read_text()
    assert 'class="arithmatex"' in online and "katex-init.js" in online


def test_code_version_is_the_checkouts_commit(tmp_path, monkeypatch):
    from benchmarks import _common

    head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    version = _common.code_version()
    if head.returncode:  # not a checkout git can read
        assert version is None
    else:
        assert version.split("+")[0] == head.stdout.strip()
        assert version.endswith("+modified") or "+" not in version
    # outside a git checkout (an unpacked release) it is None, not an error
    here = tmp_path / "benchmarks" / "_common.py"
    here.parent.mkdir()
    here.write_text("")
    monkeypatch.setattr(_common, "__file__", str(here))
    assert _common.code_version() is None


def test_a_gallery_page_with_another_docstring_or_code_is_stale(tmp_path):
    from benchmarks import gallery

    pages = tmp_path / "gallery"
    shutil.copytree(ROOT / "docs" / "gallery", pages)
    assert gallery.stale(pages) == []
    page = pages / "staircase.md"
    text = page.read_text()
    page.write_text(text.replace("staircase", "stair-case", 1))  # the title
    assert gallery.stale(pages) == ["staircase.py"]
    page.write_text(text.replace("mean_field_flow(", "mean_field_flow (", 1))  # the code
    assert gallery.stale(pages) == ["staircase.py"]
