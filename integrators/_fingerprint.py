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
    elif isinstance(x, types.MethodType):  # a bound method: its function and its instance
        _update(h, "method")
        _feed(h, x.__func__, root_module, depth, seen)
        _feed(h, x.__self__, root_module, depth + 1, seen)
    elif isinstance(x, types.ModuleType):
        _update(h, "module", x.__name__.encode())
    elif isinstance(x, type):
        _update(h, "named", f"{x.__module__}.{x.__qualname__}".encode())
    elif callable(x) and callable(getattr(x, "__wrapped__", None)) and not _is_pytree_node(x):
        # `jax.jit`, `functools.wraps`: what it wraps (its closure, the globals it reads)
        _update(h, "wrapped:" + type(x).__qualname__)
        _feed(h, x.__wrapped__, root_module, depth, seen)
    elif callable(x) and not _is_pytree_node(x) and _attributes(x) is None:
        # a builtin, a ufunc, a callable of a library: by name
        _update(h, "named", f"{getattr(x, '__module__', '')}.{_qualname(x)}".encode())
    else:
        _feed_object(h, x, root_module, depth, seen)


def _qualname(x) -> str:
    return getattr(x, "__qualname__", None) or type(x).__qualname__


def _attributes(x) -> dict | None:
    """An object's own attributes (`__dict__` and `__slots__`), or None where it keeps its
    state elsewhere (a C extension's object)."""
    has_dict = isinstance(getattr(x, "__dict__", None), dict)
    out = dict(x.__dict__) if has_dict else {}
    slotted = False
    for cls in type(x).__mro__:
        slots = getattr(cls, "__slots__", ())
        for name in (slots,) if isinstance(slots, str) else slots:
            if name not in ("__dict__", "__weakref__"):
                slotted = True
                if hasattr(x, name):
                    out.setdefault(name, getattr(x, name))
    return out if has_dict or slotted else None


def _feed_object(h, x, root_module, depth, seen) -> None:
    """A pytree leaf by leaf (with its `__call__` where it is callable: an `eqx.Module` run),
    any other object by its attributes' values, not its repr (a config object's default repr
    names only its address). An object with neither (nor a repr of its own) is refused: it
    cannot be told from another, so results computed with it cannot be trusted later."""
    leaves, treedef = jax.tree_util.tree_flatten(x)
    if not (len(leaves) == 1 and leaves[0] is x):
        _update(h, "pytree", str(treedef).encode())
        for leaf in leaves:
            _feed(h, leaf, root_module, depth, seen)
        call = type(x).__call__ if callable(x) else None
        if isinstance(call, types.FunctionType):
            _feed(h, call, root_module, depth + 1, seen)
        return
    if id(x) in seen or depth > _MAX_DEPTH:
        _update(h, "object-again:" + type(x).__qualname__)
        return
    attributes = _attributes(x)
    text = repr(x)
    _update(h, "object:" + f"{type(x).__module__}.{type(x).__qualname__}")
    if attributes is not None:
        for name in sorted(attributes):
            _update(h, "attribute", name.encode())
            _feed(h, attributes[name], root_module, depth + 1, seen | {id(x)})
        call = type(x).__call__ if callable(x) else None
        if isinstance(call, types.FunctionType):
            _feed(h, call, root_module, depth + 1, seen | {id(x)})
    elif " at 0x" not in text or type(x) is object:  # (a bare object(): a sentinel)
        _update(h, "repr", b"" if type(x) is object else text.encode())
    else:
        raise UnfingerprintableError(
            f"a sweep cannot fingerprint {text}: an object of type {type(x).__qualname__} with "
            "no attributes and no repr of its own (its results could not be told from "
            "another's). Capture plain values, arrays, pytrees or objects with attributes."
        )


class UnfingerprintableError(ValueError):
    """A value that a sweep depends on cannot be fingerprinted by content."""


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
        # (a lambda's source is the whole statement around it: two equal lambdas in two
        # calls would differ by their calls' other arguments; its bytecode and constants
        # below are what it is)
        source = "" if fn.__name__ == "<lambda>" else inspect.getsource(fn)
    except (OSError, TypeError):
        source = ""
    _update(h, "source", source.encode())
    for code in _code_objects(fn.__code__):
        _update(h, "bytecode", code.co_code)
        # what the bytecode does not say: the signature, the names it binds and reads
        # (`lambda: 1.0` and `lambda k: 1.0` have the same bytecode)
        signature = (
            code.co_argcount, code.co_posonlyargcount, code.co_kwonlyargcount, code.co_flags,
            code.co_varnames, code.co_names, code.co_freevars, code.co_cellvars,
        )  # fmt: skip
        _update(h, "signature", repr(signature).encode())
        for const in code.co_consts:
            if not isinstance(const, types.CodeType):
                _feed(h, const, root_module, depth + 1, seen)
    _feed(h, fn.__defaults__, root_module, depth + 1, seen)
    _feed(h, fn.__kwdefaults__, root_module, depth + 1, seen)
    for cell in fn.__closure__ or ():
        try:
            contents = cell.cell_contents
        except ValueError:  # an empty cell
            _update(h, "empty-cell")
            continue
        _feed(h, contents, root_module, depth + 1, seen)
    names = sorted({n for code in _code_objects(fn.__code__) for n in code.co_names})
    for name in names:
        if name in fn.__globals__:
            _update(h, "global", name.encode())
            _feed(h, fn.__globals__[name], root_module, depth + 1, seen)
