"""Argument checks shared by every package of the engine (public: `dynamics`, `integrators`
and `benchmarks` import them from here, and so may a researcher's own code).

Shape problems raise `ValueError` at trace time. Value problems raise `ValueError` when the
value is concrete (eager calls, Python and NumPy numbers) and go through `eqx.error_if` under
`jit`/`vmap`. Every message names the argument, what was expected and what was given.

>>> check_shape("y", jnp.zeros(3), (3,))
>>> check_shape("y", jnp.zeros((3, 1)), (3,))
Traceback (most recent call last):
ValueError: `y` must have shape (3,), got (3, 1)
"""

import jax
import jax.numpy as jnp
import numpy as np

from ._check_collect import _traced_check, collect_checks as collect_checks  # re-exported

__all__ = [
    "ACTIVATIONS",
    "EVEN_ACTIVATIONS",
    "is_concrete",
    "check_value",
    "check_shape",
    "check_alpha",
    "check_time_scale",
    "check_orthonormal_rows",
    "check_representable",
    "check_plus_minus_one",
    "check_gamma",
    "check_activation",
    "check_positive_int",
    "check_finite",
    "check_positive",
    "check_time_grid",
    "inexact",
    "check_label_noise",
    "check_solver_options",
    "check_solver_choice",
]


def is_concrete(x) -> bool:
    """True when `x` holds a value now (not a tracer inside `jit`/`vmap`).

    **Arguments:**

    - `x`: any object: a JAX array, a tracer, a Python or NumPy number. Only `x` itself is
      looked at: a tuple or other pytree that holds tracers counts as concrete.

    **Returns:** a Python bool, `True` unless `x` is a `jax.core.Tracer`.

    >>> is_concrete(1.0), is_concrete(jnp.ones(2))
    (True, True)
    """
    return not isinstance(x, jax.core.Tracer)


def check_model(name: str, model, cls) -> None:
    """`model` must be a `cls` (a network of the kind the function's equations are for: a
    `LeakyReLUNet` has `a` and `W` too, but is not a ReLU net).

    >>> check_model("model", 3.0, float)
    >>> check_model("model", 3.0, int)
    Traceback (most recent call last):
    ValueError: `model` must be a int, got float
    """
    if not isinstance(model, cls):
        raise ValueError(f"`{name}` must be a {cls.__name__}, got {type(model).__name__}")


def check_matrix(name: str, X):
    """`X` as an array (a nested list is converted) that must be 2-D: (samples, features).

    >>> check_matrix("X", [[1.0, 0.0]]).shape
    (1, 2)
    >>> check_matrix("X", jnp.ones(3))
    Traceback (most recent call last):
    ValueError: `X` must have shape (n, d), got shape (3,)
    """
    if not hasattr(X, "shape"):
        X = np.asarray(X) if not isinstance(X, jax.core.Tracer) else X
        X = jnp.asarray(X)
    if jnp.ndim(X) != 2:
        raise ValueError(f"`{name}` must have shape (n, d), got shape {tuple(jnp.shape(X))}")
    return X


def check_dtype(dtype):
    """A floating `dtype` that JAX holds as asked (None passes): float64 needs x64 enabled,
    else JAX would silently truncate to float32 (with only a warning).

    >>> check_dtype(None), check_dtype(jnp.float32).name
    (None, 'float32')
    >>> check_dtype(jnp.int32)
    Traceback (most recent call last):
    ValueError: `dtype` must be a floating dtype (float32 or float64), got int32
    """
    if dtype is None:
        return None
    try:
        d = np.dtype(dtype)
    except TypeError:
        raise ValueError(
            f"`dtype` must be a floating dtype (float32 or float64), got {dtype!r}"
        ) from None
    if not np.issubdtype(d, np.floating):
        raise ValueError(f"`dtype` must be a floating dtype (float32 or float64), got {d}")
    if d.itemsize > 4 and not jax.config.jax_enable_x64:
        raise ValueError(
            f"`dtype` {d} needs float64 enabled: `jax.config.update('jax_enable_x64', True)` "
            "(else JAX truncates it to float32)"
        )
    return d


def check_value(x, ok, message: str):
    """Raise `ValueError(message)` when `ok` is False; under `jit` use `eqx.error_if` (or
    record the check, inside `collect_checks`).

    **Arguments:**

    - `x`: the value that carries the check: an array or a number (anything, where `ok` is
      concrete).
    - `ok`: a boolean (or boolean array, reduced with `all`) computed from `x`; whether it is
      concrete decides between the eager and the traced check.
    - `message`: the error message: it names the argument, what was expected and what was
      given.

    **Returns:** `x` itself where `ok` is concrete. Where `ok` is traced: `jnp.asarray(x)`
    through `eqx.error_if` (with the user's `EQX_ON_ERROR`), or, inside `collect_checks` (at
    the level of its traced arguments), `x` itself, the check recorded there. Callers must
    use the returned value so that the runtime check stays in the traced program.

    **Raises:** `ValueError(message)` at once where `ok` is concrete (eager calls, and
    concrete values inside a trace) and not all True; where `ok` is traced, the error comes at
    run time through `eqx.error_if`.

    >>> check_value(2.0, 2.0 > 0, "`x` must be > 0, got 2.0")
    2.0
    """
    if is_concrete(ok):
        if not bool(np.all(np.asarray(ok))):
            raise ValueError(message)
        return x
    return _traced_check(x, ok, message)


def _xp(x):
    """NumPy for values known now (so checks raise at once, also inside a trace), else jnp."""
    return np if is_concrete(x) else jnp


def check_shape(name: str, x, shape: tuple) -> None:
    """Raise `ValueError` unless `x.shape` matches `shape` (`None` entries match anything).

    **Arguments:**

    - `name`: the argument's name, for the message.
    - `x`: an array, traced or not (or anything `jnp.shape` reads: a number, a nested list).
    - `shape`: the expected shape, a tuple of ints and `None`s (a `None` matches any length).

    **Returns:** None.

    **Raises:** `ValueError` where `x` is None or a string, or its number of dimensions or a
    length that `shape` fixes differs. Shapes are static: the check is eager, also under
    `jit`.

    >>> check_shape("W", jnp.zeros((4, 2)), (None, 2))
    """
    if x is None or isinstance(x, str):
        raise ValueError(f"`{name}` must be an array of real numbers, got {x!r}")
    actual = jnp.shape(x)
    mismatch = len(actual) != len(shape) or any(
        s is not None and s != a for s, a in zip(shape, actual, strict=True)
    )
    if mismatch:
        parts = ["*" if s is None else str(s) for s in shape]
        expected = "(" + ", ".join(parts) + ("," if len(parts) == 1 else "") + ")"
        raise ValueError(f"`{name}` must have shape {expected}, got {tuple(actual)}")


def _shown(x) -> str:
    """A value for an error message: the number when concrete and scalar, else a description."""
    if is_concrete(x) and np.ndim(x) == 0:
        return f"{float(np.asarray(x)):g}"
    return "an array" if is_concrete(x) else "a traced value"


def check_positive_int(name: str, value, minimum: int = 1) -> int:
    """A size: a Python or NumPy integer >= `minimum`; returns it as a Python int.

    **Arguments:**

    - `name`: the argument's name, for the message.
    - `value`: a Python int, a NumPy integer or a 0-d integer array, concrete (a size must be
      known when the program is traced); not a bool, not a float (not even 5.0).
    - `minimum`: the smallest value allowed (default 1).

    **Returns:** `value` as a Python int.

    **Raises:** `ValueError` where `value` is a bool, not of an integer type, not 0-d, below
    `minimum`, or traced (the check is always eager: a traced value is refused).

    >>> check_positive_int("n", np.int64(5))
    5
    >>> check_positive_int("n", 2.5)
    Traceback (most recent call last):
    ValueError: `n` must be an integer >= 1, got 2.5
    """
    if is_concrete(value) and not isinstance(value, bool) and np.ndim(value) == 0:
        a = np.asarray(value)
        if np.issubdtype(a.dtype, np.integer) and a >= minimum:  # 0-d integer arrays too
            return int(a)
    raise ValueError(f"`{name}` must be an integer >= {minimum}, got {value!r}")


def check_key(key, name: str = "key"):
    """A JAX PRNG key: a typed key (`jax.random.key(0)`) or a raw uint32 key
    (`jax.random.PRNGKey(0)`, shape (2,) for the default threefry). Returns it.

    >>> check_key(0)
    Traceback (most recent call last):
    ValueError: `key` must be a JAX PRNG key (jax.random.key(0) or jax.random.PRNGKey(0)), got int 0
    """
    expected = f"`{name}` must be a JAX PRNG key (jax.random.key(0) or jax.random.PRNGKey(0))"
    if isinstance(key, jax.Array | np.ndarray):
        dtype = key.dtype
        if jax.dtypes.issubdtype(dtype, jax.dtypes.prng_key):
            if key.shape == ():
                return key
            raise ValueError(f"{expected}, got an array of {key.shape} keys: pass one key")
        raw = jax.random.key_data(jax.random.key(0)).shape  # (2,) for threefry
        if dtype == np.uint32 and key.shape == raw:
            return key
        raise ValueError(f"{expected}, got an array of dtype {dtype} and shape {key.shape}")
    shown = repr(key) if isinstance(key, int | float | str | None) else "an object"
    raise ValueError(f"{expected}, got {type(key).__name__} {shown}")


def check_data(data, name: str = "data", d: int | None = None):
    """A loss's `args`: the pair (X, y) of inputs (n, d) with n >= 1 and labels (n,), real
    (nested lists are arrays too; a 1-D `X` is refused, not broadcast into a wrong loss);
    `d`, where given, the model's input dimension. Returns X, y as floating arrays.

    >>> check_data(jnp.eye(2))
    Traceback (most recent call last):
    ValueError: `data` must be the pair (X, y) of inputs and labels, got ArrayImpl
    >>> check_data((jnp.ones(3), jnp.ones(3)))
    Traceback (most recent call last):
    ValueError: `X` must have shape (*, *), got (3,)
    """
    if not (isinstance(data, tuple | list) and len(data) == 2):
        raise ValueError(
            f"`{name}` must be the pair (X, y) of inputs and labels, got {type(data).__name__}"
        )
    X, y = inexact(data[0], name="X"), inexact(data[1], name="y")
    check_shape("X", X, (None, d))
    if X.shape[0] == 0:
        raise ValueError("`X` must hold at least one sample, got none")
    check_shape("y", y, (X.shape[0],))
    return X, y


def check_regression(x_name: str, X, y_name: str, y):
    """Regression data: `X` (n, d) with n, d >= 1 and `y` (n,), real and finite; returns both
    in their common floating dtype.

    >>> X, y = check_regression("X", jnp.eye(2), "y", jnp.array([1, 2]))
    >>> y.dtype == X.dtype
    True
    """
    X = inexact(X, name=x_name)
    check_shape(x_name, X, (None, None))
    n, d = X.shape
    if n == 0 or d == 0:
        raise ValueError(f"`{x_name}` must have at least one row and one column, got {X.shape}")
    y = inexact(y, name=y_name)
    check_shape(y_name, y, (n,))
    dtype = jnp.result_type(X, y)
    return check_finite(x_name, X.astype(dtype)), check_finite(y_name, y.astype(dtype))


def check_flag(name: str, value) -> bool:
    """A switch: exactly True or False (not 0, 1 or a string); returns it.

    >>> check_flag("hold_live", 1)
    Traceback (most recent call last):
    ValueError: `hold_live` must be True or False, got 1
    """
    if not isinstance(value, bool | np.bool_):
        raise ValueError(f"`{name}` must be True or False, got {value!r}")
    return bool(value)


def inexact(x, dtype=None, name="the input"):
    """`x` as an array of a floating dtype: `dtype` when given, else its own when floating,
    else the default float (integers are converted explicitly, never kept as integers).

    **Arguments:**

    - `x`: real numbers of any shape: an array (traced or not), a Python or NumPy number, a
      nested list.
    - `dtype`: the dtype to convert to (default None: `x`'s own where it is floating, else
      JAX's default float). It is not checked: an integer dtype gives integers.
    - `name`: the argument's name, for the message (default "the input").

    **Returns:** `x` as a JAX array of that dtype, of `x`'s shape.

    **Raises:** `ValueError` where `x` is complex, boolean, a string, None or not an array of
    numbers (a ragged list, an object). Only the type is checked, never the values (eager,
    also under `jit`).

    >>> inexact(jnp.array([0, 1])).dtype.kind, inexact(np.float32(1.0)).dtype.name
    ('f', 'float32')
    >>> inexact(np.array([1j], np.complex64), np.float32)
    Traceback (most recent call last):
    ValueError: the input must be real, got a complex array of dtype complex64
    """
    x = _real_numbers(name, x)
    if dtype is None:
        dtype = x.dtype if jnp.issubdtype(x.dtype, jnp.inexact) else jnp.result_type(float)
    return x.astype(dtype)


def _real_numbers(name, x):
    """`x` as an array of real numbers: complex, boolean and non-numeric input is refused
    (the engine's equations are real; a complex array would run and give complex output)."""
    shown = name if name == "the input" else f"`{name}`"
    if isinstance(x, str):
        raise ValueError(f"{shown} must be real numbers, got the string {x!r}")
    if x is None:
        raise ValueError(f"{shown} must be real numbers, got None")
    if not isinstance(x, jax.core.Tracer):
        try:
            x = jnp.asarray(x)
        except (TypeError, ValueError) as error:  # ragged lists, objects, strings in a list
            raise ValueError(
                f"{shown} must be an array of real numbers, got {type(x).__name__} ({error})"
            ) from None
    if jnp.issubdtype(x.dtype, jnp.complexfloating):
        raise ValueError(f"{shown} must be real, got a complex array of dtype {x.dtype}")
    if x.dtype == bool:
        raise ValueError(f"{shown} must be real numbers, got booleans")
    return x


def check_finite(name: str, x):
    """Every entry of `x` must be finite (no NaN, no inf); returns `x`.

    **Arguments:**

    - `name`: the argument's name, for the message.
    - `x`: real numbers of any shape: an array (traced or not), a Python or NumPy number, a
      nested list; integers pass (nothing is converted).

    **Returns:** `x` itself where it is concrete; where it is traced, `x` carrying the check
    through `eqx.error_if` (see `check_value`): use the returned value.

    **Raises:** `ValueError` where `x` is complex, boolean, a string, None or not numeric
    (eager, also under `jit`), or where a concrete `x` has a NaN or inf entry; a traced `x` is
    checked at run time through `eqx.error_if`.

    >>> check_finite("y", jnp.array([1.0, jnp.nan]))
    Traceback (most recent call last):
    ValueError: `y` must be finite, got 1 non-finite value(s)
    """
    if not (isinstance(x, np.ndarray | np.generic) and x.dtype.kind in "fiu"):
        _real_numbers(name, x)  # complex, boolean or non-numeric input is refused by name
    xp = _xp(x)
    bad = ~xp.isfinite(xp.asarray(x))
    count = f"{int(np.sum(np.asarray(bad)))} non-finite value(s)" if is_concrete(bad) else "NaN/inf"
    return check_value(x, ~xp.any(bad), f"`{name}` must be finite, got {count}")


def check_positive(name: str, x, *, allow_zero: bool = False, scalar: bool = False):
    """A finite number (or array of them; one number with `scalar=True`) > 0 (>= 0 with
    `allow_zero`); Python and NumPy numbers, 0-d arrays and traced values alike.

    **Arguments:**

    - `name`: the argument's name, for the message.
    - `x`: a real number or an array of them (every entry checked), traced or not; not a
      bool, a string, None or complex.
    - `allow_zero`: accept 0 too, `>= 0` (default False: `> 0`).
    - `scalar`: require one number, shape () (default False: any shape).

    **Returns:** `x` itself where it is concrete; where it is traced, `x` carrying the check
    through `eqx.error_if` (see `check_value`): use the returned value.

    **Raises:** `ValueError` where `scalar` is set and `x` is not 0-d, or `x` is a bool, a
    string, None, complex or not numeric (eager, also under `jit`), or where a concrete `x`
    has an entry that is not finite or not > 0 (< 0 with `allow_zero`); a traced `x` is
    checked at run time through `eqx.error_if`.

    >>> check_positive("learning_rate", np.float32(-0.5))
    Traceback (most recent call last):
    ValueError: `learning_rate` must be finite and > 0, got -0.5
    """
    if scalar:
        check_shape(name, x, ())
    if isinstance(x, bool | np.bool_ | str) or x is None or np.iscomplexobj(x):
        raise ValueError(f"`{name}` must be a real number, got {x!r}")
    if not (isinstance(x, np.ndarray | np.generic) and x.dtype.kind in "fiu"):
        _real_numbers(name, x)  # a list of strings, an object: refused by name
    xp = _xp(x)
    v = xp.asarray(x)
    ok = xp.isfinite(v) & ((v >= 0) if allow_zero else (v > 0))
    bound = ">= 0" if allow_zero else "> 0"
    return check_value(x, ok, f"`{name}` must be finite and {bound}, got {_shown(x)}")


def check_time_grid(name: str, ts, dtype=None):
    """Save times: a 1-D, non-empty, finite, nondecreasing grid from t >= 0, of a floating
    dtype (integer grids are converted, never kept).

    **Arguments:**

    - `name`: the argument's name, for the message.
    - `ts`: the save times: real numbers (an array, traced or not, or a list), 1-D with at
      least one entry, finite, nondecreasing, from ts[0] >= 0.
    - `dtype`: the dtype to convert to (default None: `ts`'s own where it is floating, else
      JAX's default float). It is not checked: an integer dtype gives an integer grid.

    **Returns:** `ts` converted to that dtype; where it is traced, carrying the value check
    through `eqx.error_if` (see `check_value`): use the returned value.

    **Raises:** `ValueError` where `ts` is not real numbers (complex, boolean, a string, None,
    a ragged list), not 1-D or empty (eager, also under `jit`), or where a concrete `ts` is not
    finite, starts below 0 or decreases; a traced `ts` is checked at run time through
    `eqx.error_if`.

    >>> check_time_grid("ts", [0, 1, 2]).dtype.kind
    'f'
    >>> check_time_grid("ts", jnp.array([0.0, 2.0, 1.0]))
    Traceback (most recent call last):
    ValueError: `ts` must be finite, >= 0 and nondecreasing, got [0.0, 2.0, 1.0]
    """
    ts = inexact(ts, dtype, name)
    check_shape(name, ts, (None,))
    if ts.shape[0] == 0:
        raise ValueError(f"`{name}` must hold at least one time, got an empty grid")
    xp, v = _xp(ts), (np.asarray(ts) if is_concrete(ts) else ts)
    ok = xp.all(xp.isfinite(v)) & (v[0] >= 0) & xp.all(xp.diff(v) >= 0)
    shown = np.asarray(ts).tolist() if is_concrete(ts) and ts.shape[0] <= 8 else "another grid"
    return check_value(ts, ok, f"`{name}` must be finite, >= 0 and nondecreasing, got {shown}")


# the domain checks build on the generic ones above (imported last: no import cycle)
from ._check_domain import (  # noqa: E402
    ACTIVATIONS,
    EVEN_ACTIVATIONS,
    check_activation,
    check_alpha,
    check_gamma,
    check_label_noise,
    check_orthonormal_rows,
    check_plus_minus_one,
    check_representable,
    check_solver_choice,
    check_solver_options,
    check_time_scale,
)
