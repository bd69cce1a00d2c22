"""The saddles themselves: the loss Hessian at every plateau against Algorithm 1.

On an orthonormal instance at alpha = 1e-30, the flow is stopped in the middle of each
plateau (halfway between Algorithm 1's jumps). There, a neuron j that is still small
(||theta_j|| = alpha^(-ell_j), far below 1) sees the Hessian block
[[0, -s_j r_A^T / n], [-s_j r_A / n, 0]] in (a_j, v_j) on its active samples A, so its
unstable eigenvalue is -||r_A|| / n. Once its sign-mismatched components have reached the
kink, A is Algorithm 1's support and r the plateau's residual: -lambda_j = ||D_j^(k)||,
Algorithm 1's rate. Zeroing the small neurons and polishing the rest with `critical_point`
gives the saddle itself, whose loss is Algorithm 1's plateau.

Everything is evaluated in the data basis with X = I exactly: at alpha = 1e-30, W X^T of a small
neuron carries 1e-16 ||w_j|| of float64 rounding, far above its frozen components (~ alpha),
and would flip their signs in the Hessian's activation pattern.

python examples/saddle_hessians.py
"""

import jax
import jax.numpy as jnp
import numpy as np

jax.config.update("jax_enable_x64", True)

from _figure import figure, save  # noqa: E402

from dynamics import (  # noqa: E402
    TwoLayerReLU,
    balanced_init,
    orthogonal_data,
    signs_and_directions,
    square_loss,
)
from integrators import critical_point, hessian_spectrum, orthogonal_flow  # noqa: E402
from theory import coverage_width, saddle_jumps  # noqa: E402

n, seeds, tau = 12, 4, 30 * np.log(10.0)
m = coverage_width(n)
X = jnp.eye(n)


def loss(model, y):
    return square_loss(model, (X, y))


matched = total = 0
rate_err, plateau_err, grad_norms = [], [], []
predicted, measured = [], []  # every small neuron's rate: Algorithm 1, the Hessian
for seed in range(seeds):
    kx, kw = jax.random.split(jax.random.PRNGKey(seed))
    Q, y = orthogonal_data(n, key=kx, dtype=jnp.float64)
    init = balanced_init(m, n, 1e-30, key=kw, dtype=jnp.float64)
    model = TwoLayerReLU(init.a, init.W @ Q.T)  # the data basis: X = I exactly
    signs, directions = signs_and_directions(model, X)
    pred = saddle_jumps(y, signs, directions)
    times = np.asarray(pred.times[: int(pred.num_jumps)])
    mids = np.r_[0.5 * times[0], 0.5 * (times[:-1] + times[1:])]
    sol = orthogonal_flow(X, y, model, jnp.asarray(np.r_[0.0, mids]), time_scale=tau,
                          save_trajectory=True, rtol=1e-10, atol=1e-10)  # fmt: skip
    for k in range(mids.size):
        plateau = float(pred.initial_plateau if k == 0 else pred.plateaus[k - 1])
        if abs(float(sol.loss[k + 1]) / plateau - 1) > 1e-3:
            continue  # the midpoint falls inside a jump (near-simultaneous jumps)
        here = jax.tree_util.tree_map(lambda x, i=k + 1: x[i], sol.trajectory)
        a, V = np.asarray(here.a), np.asarray(here.W)
        small = np.sqrt(a**2 + np.sum(V**2, axis=1)) < 1e-6
        r = np.asarray(here.predict(X) - y)
        block = np.linalg.norm(np.where(V > 0, r[None, :], 0.0), axis=1) / n
        eig = np.asarray(hessian_spectrum(here, loss, args=y).eigenvalues)
        most = -eig.min()
        rate_err.append(abs(most / block[small].max() - 1))
        rates = np.asarray(pred.rates[k])
        live = small & (rates > 0)
        total += int(live.sum())
        matched += int(np.sum(np.abs(block[live] / rates[live] - 1) < 1e-6))
        predicted += rates[live].tolist()
        measured += block[live].tolist()
        saddle = TwoLayerReLU(jnp.where(small, 0.0, here.a), jnp.where(small[:, None], 0.0, here.W))
        cp = critical_point(saddle, loss, args=y)
        plateau_err.append(abs(float(cp.loss) / plateau - 1))
        grad_norms.append(float(cp.grad_norm))

print(f"n = {n}, m = {m}, alpha = 1e-30, {seeds} seeds, {len(rate_err)} plateaus")
print(f"most unstable eigenvalue vs the small neurons' max ||r_A||/n: median rel. error "
      f"{np.median(rate_err):.1e}")  # fmt: skip
print(f"small neurons whose -lambda equals Algorithm 1's rate ||D_j^(k)|| to 1e-6: "
      f"{matched} of {total}")  # fmt: skip
print(f"polished saddle's loss vs Algorithm 1's plateau: median rel. error "
      f"{np.median(plateau_err):.1e}, max {np.max(plateau_err):.1e}; max |grad| "
      f"{np.max(grad_norms):.1e}")  # fmt: skip

fig, ax = figure(4.5, 4.0)
ax.loglog(predicted, measured, "o", ms=4, label="small neurons at the plateaus")
ends = [min(predicted), max(predicted)]
ax.plot(ends, ends, "k--", lw=1, label="equal")
ax.set_xlabel("Algorithm 1's rate ||D_j||")
ax.set_ylabel("the Hessian block's ||r_A|| / n")
ax.legend()
save(fig, "saddle_hessians.png")
