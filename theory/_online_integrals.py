"""The Gaussian averages of online SGD's order-parameter ODEs (`theory._online`).

For jointly Gaussian pre-activations u with zero mean and covariance C (the order parameters
Q, R, T of the units involved), and an activation g:

    I2(a, b)       = E[g(u_a) g(u_b)]
    I3(a, b, c)    = E[g'(u_a) u_b g(u_c)]
    I4(a, b, c, d) = E[g'(u_a) g'(u_b) g(u_c) g(u_d)]
    J2(a, b)       = E[g'(u_a) g'(u_b)]           (the label-noise term)

Indices may repeat (I4(i, i, j, l) enters dQ_ii/dt): the integrals are taken over the distinct
units only (`patterns`), so no covariance is singular because a unit appears twice.

- **erf** (g(u) = erf(u), the engine's convention; Saad and Solla's g(x) = erf(x / sqrt 2) is
  this one at C / 2): Saad and Solla (1995), Phys. Rev. E 52, 4225, and Goldt et al. (2019),
  NeurIPS, eqs. (A.3)-(A.6), written for G(x) = erf(x / sqrt 2) at C' = 2 C
  (g(u) = G(sqrt 2 u), g'(u) = sqrt 2 G'(sqrt 2 u)):
  I2 = 2/pi arcsin(C'_ab / sqrt((1 + C'_aa)(1 + C'_bb))),
  I3 = 2/pi (C'_bc (1 + C'_aa) - C'_ab C'_ac) / ((1 + C'_aa) sqrt(L3)),
  L3 = (1 + C'_aa)(1 + C'_cc) - C'_ac^2,
  I4 = 2 x 4/pi^2 L4^(-1/2) arcsin(L0 / sqrt(L1 L2)) (the terms L0, L1, L2 in `_erf_i4`),
  J2 = 2 x 2/pi ((1 + C'_aa)(1 + C'_bb) - C'_ab^2)^(-1/2).
- **linear**: I2 = C_ab, I3 = C_bc, I4 = C_cd, J2 = 1.
- **relu** (derived here): g(u) = u theta(u), g'(u) = theta(u), so every integral is a truncated
  moment E[prod_{s in S} theta(u_s) u_c u_d] over a set S of distinct units. Stein's lemma
  E[u_c h(u)] = sum_j C_cj E[d_j h(u)] lowers the degree, each delta(u_s) it produces
  conditioning on u_s = 0 (density 1 / sqrt(2 pi C_ss), covariance C - C_s C_s^T / C_ss):

      M2(S, c, d) = C_cd P(S) + sum_{s in S, s != d} C_cs E[delta(u_s) u_d prod_{S\\s} theta]
      M1(S, d)    = sum_{s in S} C_ds E[delta(u_s) prod_{S\\s} theta]

  down to the orthant probabilities P(S) = P(u_s > 0 for s in S): 1/2, 1/4 + arcsin(r)/(2 pi),
  1/8 + (arcsin r_12 + arcsin r_13 + arcsin r_23)/(4 pi) (Sheppard), and for four units
  Plackett's (1954) reduction dP/dr_ij = phi_2(0, 0; r_ij) P(kl | ij), integrated from the
  identity along R(t) = I + t (R - I) by the tanh-sinh rule (205 nodes): a student unit
  that has learned its teacher unit has r_ij -> 1, and the integrand's 1 / sqrt(1 - t^2 r^2)
  is then nearly singular at t = 1 (64-point Gauss-Legendre after t = 1 - s^2 was 1e-5 off at
  1 - r = 1e-8, enough to stall the ODE solver's error control; the tanh-sinh rule resolves
  it). Checked against scipy's multivariate normal CDF and Monte Carlo (`tests/test_online.py`).
- **any other activation** (a callable): a tensor Gauss-Hermite rule over the distinct units
  (`nodes` points per dimension, at most 4 dimensions). Its error grows with the variances: for
  erf's I4 at unit-scale variances 24 nodes give 1e-4, at a variance of 5.5 they give 2e-2
  (40 nodes: 2e-3). The closed forms have no such limit.
"""

import itertools

import jax
import jax.numpy as jnp
import numpy as np

EXACT = ("erf", "relu", "linear")


def patterns(tuples: np.ndarray):
    """Group index tuples (rows) by the pattern of their repeats: {pattern: (rows, units)},
    with `units` the distinct units of each row (first-occurrence order) and `pattern` the
    position of each entry among them, e.g. (3, 3, 0, 5) -> pattern (0, 0, 1, 2), units
    (3, 0, 5)."""
    groups: dict = {}
    for row, t in enumerate(tuples):
        units, pattern = [], []
        for u in t:
            if u not in units:
                units.append(int(u))
            pattern.append(units.index(u))
        rows, us = groups.setdefault(tuple(pattern), ([], []))
        rows.append(row)
        us.append(units)
    return {p: (np.array(r), np.array(u)) for p, (r, u) in groups.items()}


def _asin(x):
    return jnp.arcsin(jnp.clip(x, -1.0, 1.0))


# -- erf ---------------------------------------------------------------------------------------


def _erf_i2(C, a, b):
    C = 2.0 * C
    return 2.0 / jnp.pi * _asin(C[a, b] / jnp.sqrt((1.0 + C[a, a]) * (1.0 + C[b, b])))


def _erf_i3(C, a, b, c):
    C = 2.0 * C
    l3 = (1.0 + C[a, a]) * (1.0 + C[c, c]) - C[a, c] ** 2
    return (
        2.0
        / jnp.pi
        * (C[b, c] * (1.0 + C[a, a]) - C[a, b] * C[a, c])
        / ((1.0 + C[a, a]) * jnp.sqrt(l3))
    )


def _erf_i4(C, a, b, c, d):
    C = 2.0 * C
    l4 = (1.0 + C[a, a]) * (1.0 + C[b, b]) - C[a, b] ** 2
    l0 = (
        l4 * C[c, d]
        - C[b, c] * C[b, d] * (1.0 + C[a, a])
        - C[a, c] * C[a, d] * (1.0 + C[b, b])
        + C[a, b] * C[a, c] * C[b, d]
        + C[a, b] * C[a, d] * C[b, c]
    )

    def lam(e):
        return (
            l4 * (1.0 + C[e, e])
            - C[b, e] ** 2 * (1.0 + C[a, a])
            - C[a, e] ** 2 * (1.0 + C[b, b])
            + 2.0 * C[a, b] * C[a, e] * C[b, e]
        )

    return 2.0 * 4.0 / jnp.pi**2 / jnp.sqrt(l4) * _asin(l0 / jnp.sqrt(lam(c) * lam(d)))


def _erf_j2(C, a, b):
    C = 2.0 * C
    return 2.0 * 2.0 / jnp.pi / jnp.sqrt((1.0 + C[a, a]) * (1.0 + C[b, b]) - C[a, b] ** 2)


# -- relu: truncated moments by Stein's lemma --------------------------------------------------


# a conditional variance is >= 0; rounding can take it below when two units are collinear
# (a student unit on its teacher unit to 1e-8): there the integrals keep rounding-level
# accuracy only, and never turn NaN
_TINY = 1e-300


def _condition(C, s):
    """The covariance given u_s = 0, and that event's density 1 / sqrt(2 pi C_ss)."""
    var = jnp.maximum(C[s, s], _TINY)
    return C - jnp.outer(C[:, s], C[s, :]) / var, 1.0 / jnp.sqrt(2.0 * jnp.pi * var)


def _corr(C, i, j):
    return C[i, j] / jnp.sqrt(jnp.maximum(C[i, i] * C[j, j], _TINY))


def _tanh_sinh(h: float = 1.0 / 32, top: float = 3.2):
    """Nodes 1 - t (kept apart from t, so that 1 - t near 1e-17 is not rounded to 0) and
    weights of the tanh-sinh rule on t in [0, 1]: exact to rounding for integrands analytic
    inside, and robust where they are nearly singular at an end."""
    v = np.arange(-top, top + h / 2, h)
    x = 0.5 * np.pi * np.sinh(v)
    one_minus_t = np.exp(-2 * x) / (1 + np.exp(-2 * x))  # = 1 - 1 / (1 + e^{-2x})
    w = h * 0.5 * np.pi * np.cosh(v) / (2 * np.cosh(x) ** 2)
    return one_minus_t, w


def _plackett4(C, S):
    """P(u > 0 on four units) by Plackett's reduction (module docstring)."""
    d = jnp.sqrt(jnp.maximum(jnp.array([C[s, s] for s in S]), _TINY))  # a zero unit: no NaN
    R = jnp.stack([jnp.stack([C[i, j] for j in S]) for i in S]) / jnp.outer(d, d)
    one_minus_t, w = _tanh_sinh()

    def rate(u):  # u = 1 - t
        t = 1.0 - u
        A = jnp.eye(4) + t * (R - jnp.eye(4))
        total = 0.0
        for i, j in itertools.combinations(range(4), 2):
            ij = jnp.array([i, j])
            kl = jnp.array([m for m in range(4) if m not in (i, j)])
            # the covariance of the other two given u_i = u_j = 0
            rest = A[kl][:, kl] - A[kl][:, ij] @ jnp.linalg.solve(A[ij][:, ij], A[ij][:, kl])
            r = rest[0, 1] / jnp.sqrt(jnp.maximum(rest[0, 0] * rest[1, 1], _TINY))
            r = jnp.where(jnp.isfinite(r), r, 0.0)  # a 2 x 2 block singular to rounding
            # 1 - t^2 r_ij^2 = (1 - t r)(1 + t r), 1 - t r = u r + (1 - r) without cancellation
            rho = R[i, j]
            near = u * jnp.abs(rho) + jnp.maximum(1.0 - jnp.abs(rho), 0.0)
            gap = jnp.maximum(near * (1.0 + t * jnp.abs(rho)), _TINY)
            density = 1.0 / (2.0 * jnp.pi * jnp.sqrt(gap))
            total = total + rho * density * (0.25 + _asin(r) / (2.0 * jnp.pi))
        return total

    u = jnp.asarray(one_minus_t, R.dtype)
    return 1.0 / 16.0 + jnp.sum(jnp.asarray(w, R.dtype) * jax.vmap(rate)(u))


def _orthant(C, S):
    """P(u_s > 0 for s in S), S a tuple of distinct indices (at most 4)."""
    if len(S) == 0:
        return 1.0
    if len(S) == 1:
        return 0.5
    if len(S) == 2:
        return 0.25 + _asin(_corr(C, *S)) / (2.0 * jnp.pi)
    if len(S) == 3:
        pairs = itertools.combinations(S, 2)
        return 0.125 + sum(_asin(_corr(C, i, j)) for i, j in pairs) / (4.0 * jnp.pi)
    return _plackett4(C, S)


def _moment1(C, S, d):
    """E[u_d prod_{s in S} theta(u_s)]."""
    total = 0.0
    for s in S:
        Cs, density = _condition(C, s)
        total = total + C[d, s] * density * _orthant(Cs, tuple(x for x in S if x != s))
    return total


def _moment2(C, S, c, d):
    """E[u_c u_d prod_{s in S} theta(u_s)]."""
    total = C[c, d] * _orthant(C, S)
    for s in S:
        if s == d:
            continue  # u_d delta(u_d) = 0
        Cs, density = _condition(C, s)
        total = total + C[c, s] * density * _moment1(Cs, tuple(x for x in S if x != s), d)
    return total


def _distinct(*indices):
    return tuple(dict.fromkeys(indices))


def _relu_i2(C, a, b):
    return _moment2(C, _distinct(a, b), a, b)


def _relu_i3(C, a, b, c):
    return _moment2(C, _distinct(a, c), b, c)


def _relu_i4(C, a, b, c, d):
    return _moment2(C, _distinct(a, b, c, d), c, d)


def _relu_j2(C, a, b):
    return _orthant(C, _distinct(a, b))


# -- linear ------------------------------------------------------------------------------------

_LINEAR = {
    "i2": lambda C, a, b: C[a, b],
    "i3": lambda C, a, b, c: C[b, c],
    "i4": lambda C, a, b, c, d: C[c, d],
    "j2": lambda C, a, b: jnp.ones((), C.dtype),
}
_CLOSED = {
    "erf": {"i2": _erf_i2, "i3": _erf_i3, "i4": _erf_i4, "j2": _erf_j2},
    "relu": {"i2": _relu_i2, "i3": _relu_i3, "i4": _relu_i4, "j2": _relu_j2},
    "linear": _LINEAR,
}


# -- any activation: tensor Gauss-Hermite ------------------------------------------------------


def _gauss_hermite(g, C, kind, pattern, nodes):
    """The integral `kind` over the distinct units' covariance C by a tensor rule."""
    n = C.shape[0]
    z, w = np.polynomial.hermite_e.hermegauss(nodes)
    w = w / w.sum()
    grid = np.stack(np.meshgrid(*([z] * n), indexing="ij"), -1).reshape(-1, n)
    weights = np.prod(np.stack(np.meshgrid(*([w] * n), indexing="ij"), -1).reshape(-1, n), -1)
    vals, vecs = jnp.linalg.eigh(C)  # a square root that survives a singular C
    root = vecs * jnp.sqrt(jnp.maximum(vals, 0.0))
    u = jnp.asarray(grid, C.dtype) @ root.T
    f, fp = g(u), jax.vmap(jax.vmap(jax.grad(g)))(u)
    p = pattern
    if kind == "i2":
        h = f[:, p[0]] * f[:, p[1]]
    elif kind == "i3":
        h = fp[:, p[0]] * u[:, p[1]] * f[:, p[2]]
    elif kind == "i4":
        h = fp[:, p[0]] * fp[:, p[1]] * f[:, p[2]] * f[:, p[3]]
    else:
        h = fp[:, p[0]] * fp[:, p[1]]
    return jnp.sum(jnp.asarray(weights, C.dtype) * h)


def gaussian_integrals(kind: str, activation, Omega, tuples: np.ndarray, nodes: int = 12):
    """The integral `kind` ("i2", "i3", "i4" or "j2") at every row of `tuples` (unit indices
    into the covariance `Omega`), as a flat array in row order.

    >>> Omega = jnp.array([[1.0, 0.3], [0.3, 2.0]])
    >>> float(gaussian_integrals("i2", "linear", Omega, np.array([[0, 1]]))[0])
    0.3
    """
    out = jnp.zeros(len(tuples), Omega.dtype)
    for pattern, (rows, units) in patterns(tuples).items():
        sub = Omega[units[:, :, None], units[:, None, :]]  # (rows, distinct, distinct)
        if isinstance(activation, str):
            fn = _CLOSED[activation][kind]

            def one(C, fn=fn, p=pattern):
                return fn(C, *p)
        else:

            def one(C, p=pattern):
                return _gauss_hermite(activation, C, kind, p, nodes)

        out = out.at[rows].set(jax.vmap(one)(sub))
    return out
