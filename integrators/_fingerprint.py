"""Content fingerprints of what a sweep depends on: values, and the code of `run` and `make`.

A sweep's results are reused only when nothing they depend on changed. That covers more than
the source text of `run` and `make`: the values their closures capture, the module globals
they read, the arguments of a `functools.partial`, their default arguments, and the helper
functions of the same module that they call (recursively). Values are hashed by content:
arrays by dtype, shape and bytes (never their elided `str()`), pytrees (Equinox modules)
leaf by leaf. Nothing depends on the name of the module that defines the functions, so a
sweep written in a script can be read back from a notebook. Functions of other modules (the
library, JAX) enter by name only: a sweep is not invalidated by an unrelated library edit.
"""

import functools
import hashlib
import inspect
import types

import jax
import numpy as np

_MAX_DEPTH = 8


def digest(value) -> str:
    """A SHA-256 hex digest of `value`'s content (see the module docstring).

    >>> digest(np.arange(3.0)) == digest(np.arange(3.0)), digest(1.0) == digest(1)
    (True, False)
    """
    h = hashlib.sha256()
    _feed(h, value, root_module=None, depth=0, seen=set())
    return h.hexdigest()


def code_digest(fn) -> str:
    """The digest of a function together with everything it captures (module docstring).

    >>> scale = 2.0
    >>> def run(key):
    ...     return {"x": scale * key}
    >>> before = code_digest(run)
    >>> scale = 3.0
    >>> code_digest(run) == before  # a global that `run` reads changed
    False
    """
    h = hashlib.sha256()
    inner = fn
    while isinstance(inner, functools.partial):
        inner = inner.func
    _feed(h, fn, root_module=getattr(inner, "__module__", None), depth=0, seen=set())
    return h.hexdigest()


def _update(h, tag: str, payload: bytes = b"") -> None:
    h.update(tag.encode() + b"\0" + payload + b"\1")


def _feed(h, x, root_module, depth, seen) -> None:
    if isinstance(x, bool | int | float | complex | str | bytes | type(None)):
        _update(h, type(x).__name__, repr(x).encode())
    elif isinstance(x, np.ndarray | np.generic | jax.Array):
        a = np.ascontiguousarray(np.asarray(x))
        _update(h, f"array:{a.dtype.str}:{a.shape}", a.tobytes())
    elif isinstance(x, list | tuple):
        _update(h, f"{type(x).__name__}:{len(x)}")
        for v in x:
            _feed(h, v, root_module, depth, seen)
    elif isinstance(x, dict):
        _update(h, f"dict:{len(x)}")
        for k in sorted(x, key=repr):
            _feed(h, k, root_module, depth, seen)
            _feed(h, x[k], root_module, depth, seen)
    elif isinstance(x, functools.partial):
        _update(h, "partial")
        _feed(h, x.func, root_module, depth, seen)
        _feed(h, x.args, root_module, depth, seen)
        _feed(h, dict(x.keywords), root_module, depth, seen)
    elif isinstance(x, types.FunctionType):
        _feed_function(h, x, root_module, depth, seen)
    elif isinstance(x, types.ModuleType):
        _update(h, "module", x.__name__.encode())
    elif isinstance(x, type) or callable(x) and not _is_pytree_node(x):
        _update(
            h, "named", f"{getattr(x, '__module__', '')}.{getattr(x, '__qualname__', '')}".encode()
        )
    else:
        leaves, treedef = jax.tree_util.tree_flatten(x)
        if len(leaves) == 1 and leaves[0] is x:  # not a pytree: a plain object
            text = repr(x)
            _update(h, "object:" + type(x).__qualname__, b"" if " at 0x" in text else text.encode())
            return
        _update(h, "pytree", str(treedef).encode())
        for leaf in leaves:
            _feed(h, leaf, root_module, depth, seen)


def _is_pytree_node(x) -> bool:
    leaves = jax.tree_util.tree_leaves(x)
    return not (len(leaves) == 1 and leaves[0] is x)


def _code_objects(code):
    yield code
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            yield from _code_objects(const)


def _feed_function(h, fn, root_module, depth, seen) -> None:
    local = root_module is not None and fn.__module__ == root_module
    if not local or depth > _MAX_DEPTH or id(fn) in seen:
        _update(h, "function", f"{fn.__module__}.{fn.__qualname__}".encode())
        return
    seen = seen | {id(fn)}
    try:
        source = inspect.getsource(fn)
    except (OSError, TypeError):
        source = ""
    _update(h, "source", source.encode())
    for code in _code_objects(fn.__code__):
        _update(h, "bytecode", code.co_code)
        for const in code.co_consts:
            if not isinstance(const, types.CodeType):
                _feed(h, const, root_module, depth + 1, seen)
    _feed(h, fn.__defaults__, root_module, depth + 1, seen)
    _feed(h, fn.__kwdefaults__, root_module, depth + 1, seen)
    for cell in fn.__closure__ or ():
        try:
            _feed(h, cell.cell_contents, root_module, depth + 1, seen)
        except ValueError:  # an empty cell
            _update(h, "empty-cell")
    names = sorted({n for code in _code_objects(fn.__code__) for n in code.co_names})
    for name in names:
        if name in fn.__globals__:
            _update(h, "global", name.encode())
            _feed(h, fn.__globals__[name], root_module, depth + 1, seen)
