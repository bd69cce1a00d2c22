"""MkDocs hooks.

- Each solution's fields as one table (name, type and shape), where an API page says
  `<!-- fields: module.Class -->`. mkdocstrings would render every field as its own heading
  over an empty box; the class's docstring says what the fields mean, the table what they
  are.
- `GALLERY=1 mkdocs build` executes every example first (`python -m benchmarks.gallery`,
  about 5 minutes on 2 cores) and builds the gallery from that run; a plain build shows the
  committed run, which the default tests hold to the examples' code.
"""

import dataclasses
import importlib
import os
import re
import sys
import typing
from pathlib import Path

MARKER = re.compile(r"<!-- fields: ([\w.]+) -->")


def _type(t) -> str:
    """`Float[Array, "T d"]` as `float (T, d)`; unions joined by `|`; classes by name."""
    args = typing.get_args(t)
    if args and type(t).__name__ in ("UnionType", "_UnionGenericAlias"):
        return " \\| ".join(_type(a) for a in args)
    dims = getattr(t, "dim_str", None)
    if dims is not None:
        kind = getattr(t, "dtype", None)
        kind = getattr(kind, "__name__", "array").lower()
        shape = ", ".join(dims.split())
        return f"{kind} ({shape})" if shape else f"{kind} scalar"
    if t is type(None):
        return "None"
    if str(getattr(t, "__name__", "")).rsplit(".", 1)[-1] == "Array":  # a bare jax.Array
        return "array"
    if typing.get_origin(t) is not None:  # list[dict], dict[str, numpy.ndarray]
        return re.sub(r"\b\w+\.", "", str(t)).replace("typing.", "")
    return getattr(t, "__name__", None) or str(t)


def fields_table(path: str) -> str:
    module, name = path.rsplit(".", 1)
    cls = getattr(importlib.import_module(module), name)
    if dataclasses.is_dataclass(cls):
        rows = [(f.name, _type(f.type)) for f in dataclasses.fields(cls)]
    else:  # a NamedTuple
        rows = list(typing.get_type_hints(cls).items())
        rows = [(k, _type(v)) for k, v in rows]
    lines = ["**Fields:**", "", "| field | type (shape) |", "|---|---|"]
    lines += [f"| `{k}` | {v} |" for k, v in rows]
    return "\n".join(lines)


def on_config(config):
    # the engine's packages from this checkout, installed or not (as mkdocstrings' `paths`)
    root = str(Path(config["config_file_path"]).resolve().parent)
    if root not in sys.path:
        sys.path.insert(0, root)
    return config


_GALLERY_RAN = []  # once per process: `mkdocs serve` rebuilds on the pages it writes


def on_pre_build(config):
    if os.environ.get("GALLERY") == "1" and not _GALLERY_RAN:
        from benchmarks import gallery

        _GALLERY_RAN.append(True)
        gallery.main([])


def on_page_markdown(markdown, page, config, files):
    return MARKER.sub(lambda m: fields_table(m.group(1)), markdown)
