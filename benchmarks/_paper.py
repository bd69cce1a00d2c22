"""The orthogonal-data paper's tables 1 and 2 as data (arXiv:2605.27097, see
`docs/references.md`): claims to test, not targets."""

# Table 1 of the paper: n, m, epochs, 1/2||theta_pred||^2 (mean, std), 1/2||theta_opt||^2
# (mean, std), ratio.
PAPER_TABLE1 = [
    (16, 43, 4.8e5, 6.24, 0.12, 3.58, 0.08, 1.74),
    (32, 45, 5.3e5, 9.15, 0.18, 5.12, 0.11, 1.78),
    (64, 48, 6.1e5, 13.20, 0.25, 7.34, 0.14, 1.80),
    (128, 50, 7.2e5, 18.92, 0.31, 10.45, 0.19, 1.81),
    (256, 53, 8.5e5, 27.10, 0.42, 14.90, 0.23, 1.82),
]
# Table 2: init, m, eta, 1/2||theta||^2 (mean, std), deviation from the optimum; the paper
# reports L < 1e-10 on every row.
PAPER_TABLE2 = [
    ("small", 10, 1.0, 11.45, 0.35, 1.236),
    ("small", 32, 1.0, 9.15, 0.18, 0.787),
    ("small", 100, 1.0, 7.62, 0.14, 0.488),
    ("small", 500, 1.0, 6.18, 0.09, 0.207),
    ("small", 1000, 1.0, 5.52, 0.06, 0.078),
    ("he", 32, 0.001, 24.80, 1.20, 3.844),
    ("he", 100, 0.001, 41.30, 2.10, 7.066),
    ("he", 1000, 0.001, 112.50, 5.40, 20.973),
]
