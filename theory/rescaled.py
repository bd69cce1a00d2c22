"""The rescaled two-layer field, written once for every two-layer flow.

The net h(x_i) = sum_j a_j relu(z_ji), z_ji = <w_j, x_i>, L = 1/(2n) sum_i (h(x_i) - y_i)^2,
under d theta/dt = -tau grad L. In the data basis (pre-activations z instead of w; the part
of w_j outside the row space of X never moves) with the Gram matrix G = X X^T (the identity
on orthonormal inputs) and r = h - y,

    da_j/dt = -tau/n <relu(z_j), r>,     dz_j/dt = -tau/n a_j (s_j * r) G,

with s_ji the activation's slope (1[z_ji > 0], or a Filippov weight on the kink).

**One state conversion.** Every flow stores neuron j as a log size lam_j and an O(1)
direction: a_j = e^lam_j p_j, z_j = e^lam_j psi_j (`log_polar`). Then h = sum_j e^(2 lam_j)
p_j relu(psi_j) and, with g_a = <relu(psi_j), r>/n and g_z = p_j (s_j * r) G / n (the
gradient divided by e^lam_j),

    dp_j/dt = -tau g_a - p_j dlam_j/dt,     dpsi_j/dt = -tau g_z - psi_j dlam_j/dt

on the components that move, for any choice of dlam_j/dt (the gauge; `field`):

- `"norm"` keeps ||(p_j, psi_j)|| = 1 over the moving components:
  dlam_j/dt = -tau (p_j g_a + <psi_j, g_z>) / ||(p_j, psi_j)||^2. Any initialization
  (`integrators.orthogonal_flow`, `integrators.two_layer_flow`).
- `"balanced"` keeps p_j = s_j = +-1: dlam_j/dt = -tau s_j g_a, exact where |a_j| = ||w_j||
  (a balanced initialization, which the flow conserves); then lam_j = log |a_j| is the
  exponent tau ell_j of `integrators.vanishing_flow` (which stores ell_j = lam_j / tau and
  integrates in t = s / tau) and the L_j of the fast phases (`theory._fast_phase`, fast time
  s = tau t, i.e. tau = 1).

**The cap.** A trial stage far past a jump (an oversized step) can put 2 lam in the
thousands; e^(2 lam) then overflows to inf and inf * 0 in the direction field (0 where psi_j
is a unit vector on one sample) gives NaN error estimates that the controller rejects for
ever. `size2` caps 2 lam at `MAX_LOG_SIZE2` = 600: every trial stage stays finite (a product
of two capped factors, e^1200, would not, and none is formed), so such a step is rejected
with a huge finite error and shrunk (and `theory.numerics.HoldArgs` rejects any step whose stages
still overflowed). Accepted states never come near the cap (there h = O(|y|), so
e^(2 lam) = O(|y| / |p relu(psi)|)). The fast phases (`theory._fast_phase`) cap lower,
at e^40 above the largest label, for the reason given there: their state is lam itself in
fast time, where a long overshooting step of capped stages can be accepted.

Paper: *Mildly Overparameterized ReLU Networks on Orthogonal Data: Incremental Learning and
Implicit Bias* (NeurIPS 2026, arXiv:2605.27097).
"""

import jax
import jax.numpy as jnp

MAX_LOG_SIZE2 = 600.0


def size2(log_size, cap=MAX_LOG_SIZE2):
    """e^(2 lam), with 2 lam capped at `cap` (module docstring)."""
    return jnp.exp(jnp.minimum(2.0 * log_size, cap))


def residual(log_size, amp, act, y, cap=MAX_LOG_SIZE2):
    """r = h - y with h = sum_j e^(2 lam_j) amp_j act_j, act_j = relu(psi_j) (or the held
    active part of psi_j). A neuron at lam_j = -inf contributes exactly 0."""
    return (size2(log_size, cap) * amp) @ act - y


def gradients(amp, act, slope, r, gram=None):
    """(g_a, g_z): the loss gradient of each neuron in a and z, divided by e^lam_j."""
    n = r.shape[0]
    weighted = slope * r[None, :]
    if callable(gram):  # the product with G, as a function (a factored G)
        weighted = gram(weighted)
    elif gram is not None:
        weighted = weighted @ gram
    return act @ r / n, amp[:, None] * weighted / n


def field(log_size, amp, psi, y, tau, *, act, slope, moving, gram=None, gauge="norm", r=None):
    """d(lam, p, psi)/dt of the rescaled flow (module docstring).

    `act` (m, n): the part of psi that acts (relu(psi), or psi on the held active set);
    `slope` (m, n): s_ji; `moving` (m, n): the components of psi that move (the others get an
    exactly zero derivative: the frozen components of orthonormal data, the sliding entries
    of `two_layer_flow`, held at 0); `gram`: G, `None` for the identity, or a function
    v -> v @ G (a factored G); `r`: the residual, computed from the others when `None`.
    With `gauge="balanced"`, `amp` must be the signs."""
    if r is None:
        r = residual(log_size, amp, act, y)
    g_a, g_z = gradients(amp, act, slope, r, gram)
    if gauge == "norm":
        psi_m = jnp.where(moving, psi, 0.0)
        norm2 = amp * amp + jnp.sum(psi_m * psi_m, axis=1)
        dlog = -tau * (amp * g_a + jnp.sum(psi_m * g_z, axis=1)) / jnp.where(norm2 > 0, norm2, 1.0)
        damp = -tau * g_a - amp * dlog
    elif gauge == "balanced":
        dlog = -tau * amp * g_a
        damp = jnp.zeros_like(amp)
    else:
        raise ValueError(f"`gauge` must be 'norm' or 'balanced', got {gauge!r}")
    dpsi = jnp.where(moving, -tau * g_z - psi * dlog[:, None], 0.0)
    return dlog, damp, dpsi


def balanced_field(log_size, signs, psi, y, moving, r=None):
    """(dlam/ds, dpsi/ds) of the balanced gauge on orthonormal data in fast time s = tau t:
    `field` with G = I, slope 1 on the moving components, act = relu(psi), tau = 1. Shared by
    `integrators.vanishing_flow` (which converts to its clock) and the fast phases."""
    dlog, _, dpsi = field(
        log_size, signs, psi, y, 1.0, act=jax.nn.relu(psi), slope=1.0, moving=moving,
        gauge="balanced", r=r,
    )  # fmt: skip
    return dlog, dpsi


def safe_log_norm(x):
    """log ||x|| row-wise without underflow for rows as small as 1e-300."""
    scale = jnp.max(jnp.abs(x), axis=1)
    scale = jnp.where(scale > 0, scale, 1.0)
    return jnp.log(scale) + jnp.log(jnp.linalg.norm(x / scale[:, None], axis=1))


def log_polar(theta, norm_part):
    """(lam, theta / e^lam) per row, lam = log ||norm_part|| (the part of the row the gauge
    keeps at norm 1), computed in logs so that rows of size 1e-300 keep O(1) directions. A
    row whose `norm_part` is 0 (a dead neuron: it never moves) gets lam = 0."""
    dead = ~jnp.any(norm_part != 0, axis=1)
    lam = jnp.where(dead, 0.0, safe_log_norm(jnp.where(dead[:, None], 1.0, norm_part)))
    direction = jnp.exp(jnp.log(jnp.abs(theta)) - lam[:, None]) * jnp.sign(theta)
    return lam, direction
