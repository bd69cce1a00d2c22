"""A griffe extension for the API reference: the `>>>` examples in the engine's docstrings
(doctests, run by pytest) are rendered as Python console blocks, not as Markdown text."""

import griffe


def fence(text: str) -> str:
    """Wrap each run of `>>>` / `...` lines and their output in a ```pycon block."""
    out, block = [], []
    for line in text.split("\n") + [""]:
        stripped = line.strip()
        if block and stripped == "":
            indent = block[0][: len(block[0]) - len(block[0].lstrip())]
            out += [indent + "```pycon"] + block + [indent + "```"]
            block = []
        if stripped.startswith(">>>") or (block and stripped):
            block.append(line)
        else:
            out.append(line)
    return "\n".join(out[:-1])


class DoctestFences(griffe.Extension):
    def on_object(self, *, obj, **kwargs) -> None:
        if obj.docstring is not None:
            obj.docstring.value = fence(obj.docstring.value)
