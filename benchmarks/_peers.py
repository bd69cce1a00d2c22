"""What researchers write themselves, for `benchmarks.throughput` to time the engine against:
per-seed GD loops in NumPy and PyTorch, and the plain-coordinate flow for `solve_ivp`."""

import numpy as np


def numpy_gd(X, y, a, W, epochs, eta):
    """Full-batch GD of the two-layer ReLU net, one seed, in NumPy; the final loss."""
    n = X.shape[0]
    a, W = a.copy(), W.copy()
    for _ in range(epochs):
        P = X @ W.T  # (n, m)
        H = np.maximum(P, 0.0)
        r = H @ a - y
        ga = H.T @ r / n
        gW = ((r[:, None] * (P > 0)) * a[None, :]).T @ X / n
        a -= eta * ga
        W -= eta * gW
    r = np.maximum(X @ W.T, 0.0) @ a - y
    return 0.5 * np.mean(r * r)


def torch_gd(X, y, a, W, epochs, eta):
    """The same loop with `torch.optim.SGD` in float64 on CPU; the final loss."""
    import torch

    X, y = torch.from_numpy(X.copy()), torch.from_numpy(y.copy())
    a = torch.from_numpy(a.copy()).requires_grad_()
    W = torch.from_numpy(W.copy()).requires_grad_()
    opt = torch.optim.SGD([a, W], lr=eta)
    for _ in range(epochs):
        opt.zero_grad()
        loss = 0.5 * torch.mean((torch.relu(X @ W.T) @ a - y) ** 2)
        loss.backward()
        opt.step()
    with torch.no_grad():
        return float(0.5 * torch.mean((torch.relu(X @ W.T) @ a - y) ** 2))


def plain_flow_field(tau, y, m, n):
    """The rescaled flow d(a, V)/dt = -tau grad L in plain (a_j, v_ji = <w_j, x_i>)
    coordinates, as a `solve_ivp` right-hand side of the flat state (a, V.ravel())."""

    def field(t, u):
        a, V = u[:m], u[m:].reshape(m, n)
        H = np.maximum(V, 0.0)
        r = H.T @ a - y
        da = -tau * (H @ r) / n
        dV = -tau * (a[:, None] * r[None, :] * (V > 0)) / n
        return np.concatenate([da, dV.ravel()])

    return field
