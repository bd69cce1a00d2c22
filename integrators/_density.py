"""The Hessian's spectral density by stochastic Lanczos quadrature, with its outliers deflated.

The spectral measure of a symmetric H (P x P) is mu = (1/P) sum_i delta(lambda_i). For a
unit vector v, the measure mu_v = sum_i (q_i . v)^2 delta(lambda_i) has E mu_v = mu for v
uniform on the sphere (or Rademacher / sqrt(P)), and m steps of Lanczos from v give its Gauss
quadrature: the eigenvalues theta_j of the tridiagonal T_m, weighted by the squared first
components tau_j^2 of its eigenvectors, integrate every polynomial of degree <= 2m - 1
exactly against mu_v (Golub and Meurant, 2010; the stochastic form: Ubaru, Chen and Saad,
2017, as in PyHessian and matfree).

A network Hessian is a bulk near 0 and a few outliers of size ||H||. A probe's mass on the
bulk fluctuates by ~ sqrt(2 / P), and in Wasserstein-1 that error is spread over the whole gap
between bulk and outliers: ~ sqrt(2 / P) ||H|| / sqrt(probes), 1e-2 ||H|| at P = 5,000. So the
outliers are deflated first: the `deflate` smallest and largest eigenpairs (thick-restart
Lanczos, `hessian_spectrum`) enter the measure exactly, and each probe is drawn orthogonal to
them and normalized, so that its quadrature puts exactly the mass (P - 2 deflate) / P on the
rest, whose spread (the bulk's width) is all that is left to err over.
"""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

from theory import RESULTS, AbstractSolution
from theory.checks import check_key, check_positive_int

from ._krylov import _orthogonalize
from ._spectrum import _check_model_and_loss, _flat, _hvp_at, hessian_spectrum


class SpectralDensitySolution(AbstractSolution):
    """Result of `spectral_density`: the measure mu ~ sum_j weights_j delta(nodes_j).

    - `nodes` (N,), `weights` (N,): the deflated eigenvalues (weight 1 / P each) and every
      probe's Gauss nodes (weights tau^2 (P - 2 deflate) / (P probes)); they sum to 1.
    - `probe_nodes` (probes, m), `probe_weights` (probes, m): each probe's quadrature of the
      deflated operator (weights sum to 1 per probe), for error bars (`counts`).
    - `deflated` (2 deflate,): the eigenvalues taken out exactly; `dim`: P.
    - `result`: successful, or the deflation's (`unconverged_eigenvalues`, `nonfinite_point`).
    """

    result: RESULTS
    stats: dict
    nodes: Float[Array, " N"]
    weights: Float[Array, " N"]
    probe_nodes: Float[Array, "probes m"]
    probe_weights: Float[Array, "probes m"]
    deflated: Float[Array, " D"]
    dim: int = eqx.field(static=True)

    def counts(self, edges) -> tuple[np.ndarray, np.ndarray]:
        """(the estimated number of eigenvalues in each interval [edges_i, edges_i+1), its
        standard error over the probes): the deflated ones counted exactly. The error is
        that of independent probes; the probes of one frame are orthogonal, so their mean
        varies less and the error bar is conservative (0 where a frame spans the whole
        complement, which this bar does not know). The bar is the probes' spread only: the
        quadrature's resolution (each probe's Gauss rule puts its mass on `steps` nodes) is
        not in it, so an interval edge inside a dense part of the spectrum can be off by
        many bars (on a 2,040-parameter tanh net after training, 966.8 +- 6.0 below
        -1e-6 ||H|| where the dense spectrum has 922, 52 of its eigenvalues within
        1e-6 ||H|| of 0); edges in the spectrum's gaps, or `wasserstein1`, are what it
        answers well."""
        edges = np.asarray(edges, float)
        rest = self.dim - len(self.deflated)
        per_probe = np.stack(
            [
                np.histogram(n, bins=edges, weights=w)[0]
                for n, w in zip(
                    np.asarray(self.probe_nodes), np.asarray(self.probe_weights), strict=True
                )
            ]
        )
        exact = np.histogram(np.asarray(self.deflated), bins=edges)[0]
        probes = per_probe.shape[0]
        spread = per_probe.std(axis=0, ddof=1) if probes > 1 else np.full(len(edges) - 1, np.inf)
        return exact + rest * per_probe.mean(axis=0), rest * spread / np.sqrt(probes)


def wasserstein1(nodes, weights, values) -> float:
    """W1 between the discrete measure sum_j weights_j delta(nodes_j) and the empirical
    measure of `values` (each 1 / len), as the integral of |F - G| over the real line.

    **Arguments:** `nodes` (N,) and `weights` (N,): a discrete measure (a
    `SpectralDensitySolution`'s, say; the weights sum to 1); `values` (M,): the reference
    eigenvalues (a dense spectrum).

    **Returns:** W1 as a Python float (in the eigenvalues' units: divide by ||H|| for the
    relative figure).

    **Raises:** `ValueError` where `nodes` and `weights` differ in shape or any input is not
    finite."""
    nodes, weights = np.asarray(nodes, float), np.asarray(weights, float)
    values = np.sort(np.asarray(values, float))
    if nodes.ndim != 1 or weights.shape != nodes.shape:
        raise ValueError(
            f"`weights` must have the shape of `nodes` (N,), got {weights.shape} and {nodes.shape}"
        )
    if values.ndim != 1 or values.size == 0:
        raise ValueError(f"`values` must be a non-empty 1-D array, got shape {values.shape}")
    for name, x in (("nodes", nodes), ("weights", weights), ("values", values)):
        if not np.all(np.isfinite(x)):
            raise ValueError(f"`{name}` must be finite, got {np.sum(~np.isfinite(x))} non-finite")
    grid = np.sort(np.concatenate([nodes, values]))
    order = np.argsort(nodes)
    F = np.searchsorted(nodes[order], grid[:-1], side="right")
    F = np.concatenate([[0.0], np.cumsum(weights[order])])[F]
    G = np.searchsorted(values, grid[:-1], side="right") / len(values)
    return float(np.sum(np.abs(F - G) * np.diff(grid)))


def _lanczos_quadrature(matvec, v0, V, steps):
    """Gauss nodes and weights of the measure of unit v0 (orthogonal to the rows of V) under
    the operator, from `steps` Lanczos steps with full reorthogonalization (against the basis
    and V, one buffer: the deflated directions stay out)."""
    dim, D = v0.shape[0], V.shape[0]
    B = jnp.zeros((D + steps + 1, dim), v0.dtype).at[:D].set(V).at[D].set(v0)
    rows = jnp.arange(D + steps + 1)

    def step(j, carry):
        B, alpha, beta = carry
        q = B[D + j]
        w = matvec(q)
        a = q @ w
        w = _orthogonalize(B, rows <= D + j, w)
        b = jnp.linalg.norm(w)
        B = B.at[D + j + 1].set(jnp.where(b > 0, w / jnp.where(b > 0, b, 1.0), 0.0))
        return B, alpha.at[j].set(a), beta.at[j].set(b)

    zeros = jnp.zeros(steps, v0.dtype)
    _, alpha, beta = jax.lax.fori_loop(0, steps, step, (B, zeros, zeros))
    T = jnp.diag(alpha) + jnp.diag(beta[:-1], 1) + jnp.diag(beta[:-1], -1)
    theta, S = jnp.linalg.eigh(T)
    return theta, S[0] ** 2


EXACT_MAX = 64  # a complement of at most this many dimensions is probed whole by default


def _probes(key, V, probes, dim, dtype):
    """`probes` unit vectors orthogonal to the rows of V, in frames of up to dim - rows(V)
    mutually orthonormal ones (Rademacher blocks, orthonormalized: the law is invariant
    under signed permutations of the coordinates, so E v v^T is a multiple of the
    projector on the complement and every probe's measure is still unbiased). Orthogonal
    probes do not sample a direction twice: the weights' variance falls by the fraction
    of the complement a frame spans, and a full frame gives the measure exactly."""
    rest = dim - V.shape[0]
    mask = jnp.ones(V.shape[0], bool)
    project = jax.vmap(lambda g: _orthogonalize(V, mask, g))  # each row off the rows of V
    out = []
    for i, lo in enumerate(range(0, probes, rest)):
        size = min(rest, probes - lo)
        k = jax.random.fold_in(key, i)
        Q, R = jnp.linalg.qr(project(jax.random.rademacher(k, (size, dim), dtype)).T)
        # Rademacher rows can be dependent (two equal rows in a small dimension): then the
        # QR's extra columns leave the complement. Such a block is drawn Gaussian instead
        # (19 of 200 frames at P = 8 with 2 deflated were not orthonormal)
        if float(jnp.min(jnp.abs(jnp.diag(R)))) < 1e-6 * float(jnp.max(jnp.abs(jnp.diag(R)))):
            Q, R = jnp.linalg.qr(project(jax.random.normal(k, (size, dim), dtype)).T)
        out.append(project(Q.T))  # orthonormal rows, still orthogonal to V
    probes_ = jnp.concatenate(out)
    return probes_ / jnp.linalg.norm(probes_, axis=1, keepdims=True)


def spectral_density(
    model,
    loss,
    *,
    args=None,
    probes: int | None = None,
    steps: int | None = None,
    deflate: int | None = None,
    key=None,
) -> SpectralDensitySolution:
    """The spectral density of the loss Hessian by stochastic Lanczos quadrature, its
    `deflate` smallest and largest eigenvalues taken out exactly (module docstring).

    **Arguments:**

    - `model`: an Equinox module; its inexact arrays are theta. `loss`: `loss(model, args)
      -> scalar`, twice differentiable; `args`: passed to it.
    - `probes`: random start vectors, orthogonal to the deflated eigenvectors and to each
      other (orthonormalized Rademacher frames of the complement: `probes` at least
      P - 2 `deflate` and `steps` = P - 2 `deflate` give the density exactly, to rounding).
      Default 32, or the whole complement where it has at most 64 dimensions (exact at a
      cost of at most 64 x 64 products: at P = 51, 32 random probes left W1 / ||H|| = 1.1e-3
      to 3.5e-3).
    - `steps`: Lanczos steps per probe (the quadrature is exact to polynomial degree
      2 steps - 1; default min(100, P - 2 deflate)).
    - `deflate`: eigenpairs taken out at each end (default min(16, P / 8); 0: plain SLQ).
    - `key`: the probes' key (default PRNGKey(0)).

    Measured against the dense spectrum of tanh MLPs on 256 samples
    (`tests/test_density.py`): W1 / ||H|| = 3.8e-4 at P = 541 and 3.9e-4 at P = 2,161 with
    32 orthogonal probes, 120 steps and 16 deflated (independent probes: 7.8e-4 and 3.0e-4;
    plain SLQ, 16 probes, 80 steps: 1.6e-3 and 7.2e-4). Memory O(steps x P); cost
    probes x steps Hessian-vector products and the deflation's.

    **Returns:** a `SpectralDensitySolution` (`nodes`, `weights`, `probe_nodes`,
    `probe_weights`, `deflated`, `dim`, `result`, `stats`; `counts(edges)` gives eigenvalue
    counts in intervals with error bars). `result` is the deflation's where it failed
    (`unconverged_eigenvalues`, `nonfinite_point`).

    **Raises:** `ValueError` on non-positive `probes` or `steps`, a negative `deflate`,
    `steps` + 2 `deflate` above P, a bad `key`, a model without inexact arrays or a loss
    that is not a scalar.

    >>> class Q(eqx.Module):
    ...     p: jax.Array
    >>> lam = jnp.linspace(-1.0, 3.0, 200)
    >>> loss = lambda m, a: 0.5 * jnp.sum(lam * m.p**2)
    >>> d = spectral_density(Q(jnp.zeros(200)), loss, probes=4, steps=30, deflate=4)
    >>> bool(d.ok), round(float(jnp.sum(d.weights)), 12)
    (True, 1.0)
    >>> wasserstein1(d.nodes, d.weights, lam) < 0.05  # a flat spectrum: SLQ's worst case
    True
    """
    dim, dtype = _check_model_and_loss(model, loss, args)
    deflate = min(16, dim // 8) if deflate is None else deflate
    deflate = check_positive_int("deflate", deflate, minimum=0)
    rest = dim - 2 * deflate
    probes = (rest if 0 < rest <= EXACT_MAX else 32) if probes is None else probes
    probes = check_positive_int("probes", probes)
    steps = min(100, rest) if steps is None else steps
    steps = check_positive_int("steps", steps)
    if 2 * deflate + steps > dim:
        raise ValueError(
            f"`steps` + 2 `deflate` must be at most P = {dim}, got {steps} + 2 x {deflate}"
        )
    key = jax.random.PRNGKey(0) if key is None else check_key(key)
    if deflate > 0:
        ends = hessian_spectrum(model, loss, args=args, k=deflate)
        V, deflated, result = ends.vectors, ends.eigenvalues, ends.result
    else:
        V = jnp.zeros((0, dim), dtype)
        deflated, result = jnp.zeros((0,), dtype), RESULTS.successful
    flat, f, _ = _flat(model, loss, args)

    @jax.jit
    def one(v):
        return _lanczos_quadrature(_hvp_at(f, flat), v, V, steps)

    nodes, weights = jax.lax.map(one, _probes(key, V, probes, dim, dtype))
    rest = (dim - deflated.shape[0]) / dim
    all_nodes = jnp.concatenate([deflated, nodes.ravel()])
    all_weights = jnp.concatenate(
        [jnp.full(deflated.shape, 1.0 / dim, dtype), rest * weights.ravel() / probes]
    )
    finite = jnp.all(jnp.isfinite(all_nodes)) & jnp.all(jnp.isfinite(all_weights))
    result = RESULTS.where(finite, result, RESULTS.nonfinite_point)
    return SpectralDensitySolution(
        result=result,
        stats={"num_hvps": probes * steps, "probes": probes, "steps": steps},
        nodes=all_nodes,
        weights=all_weights,
        probe_nodes=nodes,
        probe_weights=weights,
        deflated=deflated,
        dim=dim,
    )
