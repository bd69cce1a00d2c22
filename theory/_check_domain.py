"""The engine's argument checks for its models' own quantities (alpha, the time scale, +-1
labels, the leaky slope, activations, label noise, solver options): `theory.checks`."""

import jax
import jax.numpy as jnp
import numpy as np

from .checks import (
    _real_numbers,
    _shown,
    _traced_check,
    _xp,
    check_positive,
    check_positive_int,
    check_shape,
    check_value,
    is_concrete,
)

# the activations themselves, and the even parts (sigma(z) + sigma(-z)) / 2 that the multi-index
# paper's symmetric initialization makes its network compute (|z| is its own even part)
EVEN_ACTIVATIONS = ("abs", "relu_even", "gelu_even", "swish_even")
ACTIVATIONS = ("abs", "relu", "gelu", "swish", "relu_even", "gelu_even", "swish_even")


def check_alpha(alpha, dtype):
    """`alpha` must lie in (0, 1), and `alpha**2` (the scale of the first gradients) must not
    underflow `dtype`: alpha = 1e-30 is fine in float64 and underflows float32.

    **Arguments:**

    - `alpha`: the initialization scale, one real number (Python, NumPy, a 0-d array, or
      traced) in (0, 1); not a bool, a string or complex.
    - `dtype`: the floating dtype of the computation: alpha**2 must reach its smallest normal
      number.

    **Returns:** `alpha` itself where it is concrete; where it is traced, `alpha` as an array
    carrying the check through `eqx.error_if` (see `check_value`): use the returned value.

    **Raises:** `ValueError` where `alpha` is a bool, a string or complex, or not 0-d (eager,
    also under `jit`), or where a concrete `alpha` is not in (0, 1) or alpha**2 underflows
    `dtype`; a traced `alpha` is checked at run time through `eqx.error_if`.

    >>> check_alpha(0.5, jnp.float32)
    0.5
    >>> check_alpha(1e-30, jnp.float32)
    Traceback (most recent call last):
    ValueError: `alpha`=1e-30 underflows float32: alpha**2 = 1e-60 is below its smallest normal number 1.17549e-38. Enable float64 with `jax.config.update('jax_enable_x64', True)` and pass `dtype=jnp.float64`.
    """  # noqa: E501
    if isinstance(alpha, str | bool | np.bool_) or np.iscomplexobj(alpha):
        raise ValueError(f"`alpha` must be a real number in (0, 1), got {alpha!r}")
    if jnp.ndim(alpha) != 0:
        raise ValueError(f"`alpha` must be one number in (0, 1), got shape {jnp.shape(alpha)}")
    if not is_concrete(alpha):
        tiny = float(jnp.finfo(dtype).tiny)
        a = jnp.asarray(alpha)
        ok = (a > 0) & (a < 1) & (a * a >= tiny)
        return _traced_check(a, ok, f"`alpha` must lie in (0, 1) with alpha**2 >= {tiny:g}")
    a = float(np.asarray(alpha))
    if not 0.0 < a < 1.0:
        raise ValueError(f"`alpha` must lie in (0, 1), got {a}")
    tiny = float(jnp.finfo(dtype).tiny)
    if a * a < tiny:
        raise ValueError(
            f"`alpha`={a:g} underflows {jnp.dtype(dtype).name}: alpha**2 = {a * a:g} is below "
            f"its smallest normal number {tiny:g}. Enable float64 with "
            "`jax.config.update('jax_enable_x64', True)` and pass `dtype=jnp.float64`."
        )
    return alpha


def check_time_scale(time_scale, dtype=None):
    """The time scale tau (= log(1/alpha) in the saddle-to-saddle clock) must be finite and
    > 0; returns it as an array of `dtype`.

    **Arguments:**

    - `time_scale`: tau, one real number (shape ()), traced or not: finite and > 0.
    - `dtype`: the dtype of the returned array (default None: `time_scale`'s own, JAX's
      default float for a Python float; a Python int stays an integer array).

    **Returns:** `time_scale` as a 0-d JAX array of `dtype`; where it is traced, carrying the
    check through `eqx.error_if` (see `check_value`).

    **Raises:** `ValueError` where `time_scale` is not 0-d, or is a bool, a string, None or
    complex (eager, also under `jit`), or where a concrete one is not finite or not > 0; a
    traced one is checked at run time through `eqx.error_if`.

    >>> float(check_time_scale(2.0))
    2.0
    >>> check_time_scale(-1.0)
    Traceback (most recent call last):
    ValueError: `time_scale` must be finite and > 0, got -1
    """
    # one clock per solve (vmap over seeds for several)
    return jnp.asarray(check_positive("time_scale", time_scale, scalar=True), dtype)


def check_orthonormal_rows(name: str, X, atol: float = 1e-6, hint: str = ""):
    """Check that the rows of `X` (n, d) are orthonormal: X X^T = I_n to `atol`; returns `X`.

    **Arguments:**

    - `name`: the argument's name, for the message.
    - `X`: an array (n, d) with n >= 1, traced or not (that it is 2-D is not checked).
    - `atol`: the tolerance on max |X X^T - I| (default 1e-6).
    - `hint`: text appended to the error message (default: none).

    **Returns:** `X` itself where it is concrete; where it is traced, `X` carrying the check
    through `eqx.error_if` (see `check_value`): use the returned value.

    **Raises:** `ValueError` where `X` has no rows (eager, also under `jit`), or where for a
    concrete `X` max |X X^T - I| exceeds `atol` or is NaN; a traced `X` is checked at run time
    through `eqx.error_if`.

    >>> X = check_orthonormal_rows("X", jnp.eye(2, 3))
    """
    n = jnp.shape(X)[0]
    if n == 0:
        raise ValueError(f"`{name}` must hold at least one row, got shape {jnp.shape(X)}")
    err = _orthonormality_error(X)
    given = f", got max |X X^T - I| = {_shown(err)}" if is_concrete(err) else ""
    message = f"the rows of `{name}` must be orthonormal (X X^T = I to {atol:g}){given}{hint}"
    return check_value(X, err <= atol, message)


@jax.jit  # one program per shape, not one per operation
def _orthonormality_error(X):
    gram = X @ X.T
    return jnp.max(jnp.abs(gram - jnp.eye(X.shape[0], dtype=gram.dtype)))


def check_representable(a, W) -> None:
    """Refuse parameters whose first gradients underflow their dtype.

    A neuron's gradient scales as |a_j| ||w_j||; in float32 a balanced init at alpha = 1e-30
    has gradients of 1e-60, which are exactly 0, so nothing would ever move.

    **Arguments:**

    - `a`: the second-layer weights a_j, shape (m,); its dtype is the one checked.
    - `W`: the first-layer weights, shape (m, d), row j = w_j.

    **Returns:** None.

    **Raises:** `ValueError` where at least one product |a_j| ||w_j|| is nonzero and every
    nonzero one is below the smallest normal number of `a`'s dtype. Eager only: where `a` or
    `W` is traced, nothing is checked.

    >>> check_representable(jnp.ones(2), jnp.ones((2, 3)))
    """
    if not (is_concrete(a) and is_concrete(W)):
        return
    size = np.abs(np.asarray(a, dtype=np.float64))
    w = np.linalg.norm(np.asarray(W, dtype=np.float64), axis=-1)
    product = size * w
    tiny = float(jnp.finfo(jnp.asarray(a).dtype).tiny)
    if np.all(product[product > 0] < tiny) and np.any(product > 0):
        raise ValueError(
            f"the parameters underflow {jnp.asarray(a).dtype}: every |a_j| ||w_j|| is below "
            f"{tiny:g}, so every gradient is 0. Enable float64 "
            "(`jax.config.update('jax_enable_x64', True)`)."
        )


def check_plus_minus_one(name: str, x):
    """`x` must take values in {-1, +1} (labels of a two-class problem, second-layer signs);
    returns `x`.

    **Arguments:**

    - `name`: the argument's name, for the message.
    - `x`: real numbers of any shape: an array (traced or not), a number, a nested list.

    **Returns:** `x` itself where it is concrete; where it is traced, `x` carrying the check
    through `eqx.error_if` (see `check_value`): use the returned value.

    **Raises:** `ValueError` where a concrete `x` has an entry other than -1 and +1 (NaN
    included); a traced `x` is checked at run time through `eqx.error_if`.

    >>> y = check_plus_minus_one("y", jnp.array([1.0, -1.0]))
    >>> check_plus_minus_one("y", jnp.array([1.0, 0.5]))
    Traceback (most recent call last):
    ValueError: `y` must take values in {-1, +1}, got 1 other value(s), e.g. 0.5
    """
    xp = _xp(x)
    bad = xp.abs(xp.asarray(x)) != 1
    ok = ~xp.any(bad)
    given = ""
    if is_concrete(bad) and not bool(ok):
        first = np.asarray(x).ravel()[np.argmax(np.asarray(bad).ravel())]
        given = f", got {int(np.sum(np.asarray(bad)))} other value(s), e.g. {first:g}"
    return check_value(x, ok, f"`{name}` must take values in {{-1, +1}}{given}")


def check_gamma(gamma):
    """The leaky-ReLU slope: a number in (0, 1) (`ValueError`; `eqx.error_if` when traced).

    **Arguments:**

    - `gamma`: the slope, one real number (Python, NumPy, a 0-d array, or traced) in (0, 1).

    **Returns:** `gamma` itself where it is concrete; where it is traced, `gamma` carrying the
    check through `eqx.error_if` (see `check_value`): use the returned value.

    **Raises:** `ValueError` where `gamma` is a bool, complex, a string, None or not numeric,
    or not 0-d (eager, also under `jit`), or where a concrete `gamma` is not in (0, 1) (NaN
    included); a traced `gamma` is checked at run time through `eqx.error_if`.

    >>> check_gamma(0.1)
    0.1
    >>> check_gamma(1.5)
    Traceback (most recent call last):
    ValueError: `gamma` must lie in (0, 1), got 1.5
    """
    if isinstance(gamma, bool | np.bool_):
        raise ValueError(f"`gamma` must be a real number, got {gamma!r}")
    _real_numbers("gamma", gamma)
    check_shape("gamma", gamma, ())
    xp = _xp(gamma)
    v = xp.asarray(gamma)
    return check_value(gamma, (v > 0) & (v < 1), f"`gamma` must lie in (0, 1), got {_shown(gamma)}")


def check_activation(activation: str, expected: str | None = None, even: bool = False) -> None:
    """One of `ACTIVATIONS` (of `EVEN_ACTIVATIONS` with `even=True`: the staircase
    predictions hold for even activations only); with `expected`, that one (a net must use
    its target's activation).

    **Arguments:**

    - `activation`: the activation's name, a string.
    - `expected`: the one name allowed (default None: any of the allowed names).
    - `even`: allow only `EVEN_ACTIVATIONS` (default False: any of `ACTIVATIONS`).

    **Returns:** None.

    **Raises:** `ValueError` where `activation` is not one of the allowed names, or is not
    `expected`. Names are static: the check is eager, also under `jit`.

    >>> check_activation("relu")
    >>> check_activation("relu", even=True)
    Traceback (most recent call last):
    ValueError: `activation` must be one of ('abs', 'relu_even', 'gelu_even', 'swish_even'), got 'relu'
    >>> check_activation("relu", expected="abs")
    Traceback (most recent call last):
    ValueError: the net's `activation` must be the target's 'abs', got 'relu'
    """  # noqa: E501
    allowed = EVEN_ACTIVATIONS if even else ACTIVATIONS
    if activation not in allowed:
        raise ValueError(f"`activation` must be one of {allowed}, got {activation!r}")
    if expected is not None and activation != expected:
        raise ValueError(
            f"the net's `activation` must be the target's {expected!r}, got {activation!r}"
        )


def check_label_noise(label_noise):
    """The probability of a flipped label: in [0, 1/2).

    **Arguments:**

    - `label_noise`: the probability, a real number (Python, NumPy, an array, or traced) in
      [0, 1/2); its shape is not checked (an array has every entry checked).

    **Returns:** `label_noise` itself where it is concrete; where it is traced, carrying the
    check through `eqx.error_if` (see `check_value`): use the returned value.

    **Raises:** `ValueError` where `label_noise` is a bool, complex, a string, None or not
    numeric (eager, also under `jit`), or where a concrete `label_noise` is not in [0, 1/2)
    (NaN included); a traced one is checked at run time through `eqx.error_if`.

    >>> check_label_noise(np.float32(0.7))
    Traceback (most recent call last):
    ValueError: `label_noise` must lie in [0, 1/2), got 0.7
    """
    if isinstance(label_noise, bool | np.bool_):
        raise ValueError(f"`label_noise` must be a real number, got {label_noise!r}")
    _real_numbers("label_noise", label_noise)
    xp = _xp(label_noise)
    v = xp.asarray(label_noise)
    ok = (v >= 0) & (v < 0.5)
    return check_value(
        label_noise, ok, f"`label_noise` must lie in [0, 1/2), got {_shown(label_noise)}"
    )


def check_solver_choice(solver, stepsize_controller=None, *, adaptive: bool = True) -> None:
    """`solver` (None, or a diffrax solver; adaptive where the flow controls its steps) and
    `stepsize_controller` (None, or a diffrax controller whose own `rtol`/`atol`, where it has
    them, follow `check_solver_options`' rule: a PIDController at rtol = -1 made every step
    look accurate, and the flow came back ok and wrong).

    **Arguments:**

    - `solver`: None, or a `diffrax.AbstractSolver`; with `adaptive`, a
      `diffrax.AbstractAdaptiveSolver` or a wrapper whose `solver` attribute is one
      (`HoldArgs`).
    - `stepsize_controller`: None (default), or a `diffrax.AbstractStepSizeController`; where
      it has them and they are concrete, its `rtol` must be one finite number > 0 and its
      `atol` one finite number >= 0.
    - `adaptive`: require an adaptive solver (default True).

    **Returns:** None.

    **Raises:** `ValueError` where `solver` is not None or a diffrax solver, is not adaptive
    (with `adaptive`), `stepsize_controller` is not None or a diffrax step-size controller, or
    its `rtol` or `atol` breaks the rule above. Eager only: a traced `rtol` or `atol` is not
    checked.

    >>> check_solver_choice("Tsit5")
    Traceback (most recent call last):
    ValueError: `solver` must be a diffrax solver (e.g. `diffrax.Tsit5()`), got 'Tsit5'
    """
    import diffrax

    kind = diffrax.AbstractAdaptiveSolver if adaptive else diffrax.AbstractSolver
    if solver is not None and not isinstance(solver, diffrax.AbstractSolver):
        raise ValueError(
            f"`solver` must be a diffrax solver (e.g. `diffrax.Tsit5()`), got {solver!r}"
        )
    if solver is not None and not isinstance(solver, kind):
        inner = getattr(solver, "solver", None)  # a wrapper (HoldArgs) of an adaptive one
        if not isinstance(inner, kind):
            raise ValueError(
                f"`solver` must be an adaptive diffrax solver (with an error estimate, e.g. "
                f"`diffrax.Tsit5()`), got {type(solver).__name__}"
            )
    if stepsize_controller is None:
        return
    if not isinstance(stepsize_controller, diffrax.AbstractStepSizeController):
        raise ValueError(
            "`stepsize_controller` must be a diffrax step-size controller (e.g. "
            f"`diffrax.PIDController(rtol=1e-8, atol=1e-8)`), got {stepsize_controller!r}"
        )
    for name, zero in (("rtol", False), ("atol", True)):
        value = getattr(stepsize_controller, name, None)
        if value is not None and is_concrete(value):
            check_positive(f"stepsize_controller.{name}", value, allow_zero=zero, scalar=True)


def check_solver_options(rtol, atol, max_steps) -> tuple:
    """Tolerances of an adaptive solve: finite rtol > 0 and atol >= 0 (a negative rtol makes
    every step look accurate, so a wrong answer would come back as a success), and a step
    budget max_steps >= 1.

    **Arguments:**

    - `rtol`: the relative tolerance, one finite number > 0.
    - `atol`: the absolute tolerance, one finite number >= 0.
    - `max_steps`: the step budget, a concrete integer >= 1 (see `check_positive_int`).

    **Returns:** `(rtol, atol, max_steps)`: the tolerances as given where concrete, through
    `eqx.error_if` where traced (use these, so that the check stays in the program), and
    `max_steps` as a Python int.

    **Raises:** `ValueError` where `rtol` or `atol` is not one real number (shape (); not a
    bool, a string, None or complex), where a concrete `rtol` is not finite and > 0 or a
    concrete `atol` not finite and >= 0, or where `max_steps` is not a concrete integer >= 1;
    a traced `rtol` or `atol` out of range raises at run time.

    >>> check_solver_options(-1e-7, 1e-7, 100)
    Traceback (most recent call last):
    ValueError: `rtol` must be finite and > 0, got -1e-07
    """
    rtol = check_positive("rtol", rtol, scalar=True)
    atol = check_positive("atol", atol, allow_zero=True, scalar=True)
    return rtol, atol, check_positive_int("max_steps", max_steps)
