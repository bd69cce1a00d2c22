"""`SaddleJumpsSolution`: what `saddle_jumps` returns, with its horizon and its crossing
times.

Paper: *Mildly Overparameterized ReLU Networks on Orthogonal Data: Incremental Learning and
Implicit Bias* (NeurIPS 2026, arXiv:2605.27097)."""

import jax.numpy as jnp
from jaxtyping import Array, Bool, Float, Int

from ._solution import RESULTS, AbstractSolution
from .checks import (
    check_positive,
    check_time_scale,
)


class SaddleJumpsSolution(AbstractSolution):
    """The jump process predicted by `saddle_jumps`: Algorithm 1's alpha -> 0 limit, with
    simultaneous jumps resolved, and optionally its finite-alpha prediction.

    Every per-jump field is padded to K = min(m, n) jumps: `times` with `+inf`, `neurons` with
    `-1`, `groups` with `-1`, `fitted` with `False`, `amplitudes` with `0` and `plateaus` with
    `nan`.

    - `times` (K,): rescaled jump times t_1 < t_2 < ... (the alpha -> 0 limit).
    - `neurons` (K,): the first neuron (lowest index) of each jump's group.
    - `groups` (K, m): every neuron that fires at jump k, ascending, padded with `-1`. With
      +-1 labels several neurons reach ell = 0 at the same instant (ties within 1e-9 of the
      jump time); they jump together and share the samples of overlapping supports.
    - `fitted` (K, n): the samples the jump fits (the union of the group's unfitted supports).
    - `amplitudes` (K,): the second-layer weight of `neurons[k]` after the jump, and
      `final_amplitudes` (m,): every neuron's (0 for neurons that never fire). A lone neuron
      has a = s ||y_S||^(1/2); a group's split of shared samples comes from its fast phase
      (`theory._fast_phase`), which depends on the neurons' O(1) prefactors.
    - `plateaus` (K,): training loss 1/(2n) sum_{i unfitted} y_i^2 after each jump.
    - `initial_plateau`: the loss before the first jump, mean(y^2) / 2.
    - `cost`: 1/2 ||theta||^2 = sum_j a_j^2 of the limit interpolator (= sum_k ||y_{S_k}||
      without shared samples).
    - `uncovered` (n,): samples in no neuron's support; they are never fitted.
    - `num_jumps`: number of real (unpadded) jumps.
    - `rates` (K, m): d ell_j/dt = ||D_j^(k-1)|| of every neuron on the interval
      (t_{k-1}, t_k) before jump k (t_0 = 0); 0 for fired neurons and on padded rows.
    - `tie_gaps` (K,): how far (in rescaled time) the next neuron outside the group is from
      jumping at t_k (`inf` where none could). Below ~ n / (log(1/alpha) ||y_S||) the two
      jumps overlap at that alpha: a near tie, whose sample sharing only the finite-alpha
      prediction captures.
    - `time_scale`: tau = log(1/alpha) of the finite-alpha prediction (`inf`: the limit).
    - `times_finite_alpha` (K,, padded with `+inf`), `cost_finite_alpha`: the jump times
      (midpoint crossings of the predicted loss curve, as `crossing_times` measures a
      simulation) and the final cost at that alpha; equal to `times` and `cost` in the limit.
      `curve_ts`, `curve_loss` (P,): the predicted loss curve, (2K + 3) windows of 1024
      points each (windows that did not run repeat their time), `None` in the limit.
    - `result`, `stats`: the fast-phase solves' outcome and steps (`theory.Solution`).

    Two samples, two neurons of opposite signs: each fits its own sample.

    >>> from theory import saddle_jumps
    >>> pred = saddle_jumps(jnp.array([1.0, -2.0]), jnp.array([1.0, -1.0]), jnp.ones((2, 2)))
    >>> pred.times.tolist(), pred.neurons.tolist(), round(float(pred.cost), 12)
    ([1.0, 2.0], [1, 0], 3.0)
    """

    result: RESULTS
    stats: dict
    times: Float[Array, " K"]
    neurons: Int[Array, " K"]
    groups: Int[Array, "K m"]
    fitted: Bool[Array, "K n"]
    amplitudes: Float[Array, " K"]
    final_amplitudes: Float[Array, " m"]
    plateaus: Float[Array, " K"]
    initial_plateau: Float[Array, ""]
    cost: Float[Array, ""]
    uncovered: Bool[Array, " n"]
    num_jumps: Int[Array, ""]
    rates: Float[Array, "K m"]
    tie_gaps: Float[Array, " K"]
    time_scale: Float[Array, ""]
    times_finite_alpha: Float[Array, " K"]
    cost_finite_alpha: Float[Array, ""]
    curve_ts: Float[Array, " P"] | None = None
    curve_loss: Float[Array, " P"] | None = None

    @property
    def last_time(self) -> Float[Array, ""]:
        """The last jump time t_K (0 when no neuron can jump).

        >>> from theory import saddle_jumps
        >>> float(saddle_jumps(jnp.array([2.0]), jnp.array([1.0]), jnp.array([[0.3]])).last_time)
        0.5
        """
        return jnp.max(jnp.where(jnp.isfinite(self.times), self.times, 0.0), axis=-1)

    def horizon(self, factor: float) -> Float[Array, ""]:
        """`factor` x t_K (x 1 when there is no jump): a time by which a simulation has gone
        through every jump.

        >>> from theory import saddle_jumps
        >>> pred = saddle_jumps(jnp.array([2.0]), jnp.array([1.0]), jnp.array([[0.3]]))
        >>> float(pred.horizon(1.3))
        0.65
        """
        last = self.last_time
        return factor * jnp.where(last > 0, last, 1.0)

    @property
    def final_loss(self) -> Float[Array, ""]:
        """The loss after the last jump, 1/(2n) sum of y_i^2 over the uncovered samples: the
        floor no training from this initialization can go below.

        >>> from theory import saddle_jumps
        >>> pred = saddle_jumps(jnp.array([2.0, 1.0]), jnp.array([1.0]), jnp.array([[0.3, -0.4]]))
        >>> float(pred.final_loss)  # sample 1 is uncovered: 1/(2n) y_1^2
        0.25
        """
        return jnp.where(
            self.num_jumps > 0, self.plateaus[self.num_jumps - 1], self.initial_plateau
        )

    def gd_epochs(self, *, time_scale, learning_rate) -> Float[Array, ""]:
        """Gradient-descent steps to the last jump: GD with step eta reaches rescaled time
        k eta / tau after k steps, so t_K is reached after tau t_K / eta steps.

        >>> from theory import saddle_jumps
        >>> pred = saddle_jumps(jnp.array([2.0]), jnp.array([1.0]), jnp.array([[0.3]]))
        >>> float(pred.gd_epochs(time_scale=69.0, learning_rate=0.5))
        69.0
        """
        learning_rate = check_positive("learning_rate", learning_rate)
        return check_time_scale(time_scale) * self.last_time / learning_rate
