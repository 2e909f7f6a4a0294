"""Fixed-query attacker (attack paper, Section 4, Figures 5-7).

  python experiments/attack.py --config configs/attack_fixed.py --workdir runs/attack_fixed
  python experiments/attack.py --config configs/attack_fixed.py:cpu --workdir runs/attack_fixed

The 30 Table-1 histograms (250 teachers), 10^4 GNMax queries each at σ ∈ {40, 60,
80, 100}; the paper's reconstruction (and the projected / optax variants);
normalized-L1 error per histogram and σ, the privacy cost of the 10^4 queries
(expected Confident-GNMax cost with the dataset's threshold, as in the paper's
code, and plain data-dependent GNMax cost), and the Pearson correlation of
error and cost (paper: r = -0.20). Beyond the paper: the
maximum-likelihood reconstruction (variant ``mle``), the Cramér–Rao bound per
histogram and σ with the queries it says are needed for errors 0.05 / 0.10, and
error against the number of queries at σ = 40 (``error_vs_queries.png``: paper,
MLE, bound). ``:cpu`` runs one seed, the paper's and the MLE, a short sweep.
"""

import ml_collections


def get_config(arg: str | None = None) -> ml_collections.ConfigDict:
  c = ml_collections.ConfigDict()
  c.setting = "fixed"
  c.seed = 0
  c.num_queries = 10_000
  c.sigmas = (40.0, 60.0, 80.0, 100.0)
  c.num_seeds = 5                   # independent Monte Carlo runs per (histogram, σ)
  # Confident-GNMax parameters of the canonical PATE (Papernot et al. 2018), used
  # for the privacy cost as in the attack paper's code.
  c.datasets = ml_collections.ConfigDict({
      "mnist": {"threshold": 200.0, "sigma_threshold": 150.0, "delta": 1e-5},
      "svhn": {"threshold": 300.0, "sigma_threshold": 200.0, "delta": 1e-6},
  })
  c.conversion = "improved"         # RDP -> (ε, δ) as in the attack paper's code
  c.reconstruction = ml_collections.ConfigDict({
      "method": "paper", "project": False, "stop_on_negative": False, "tol": 0.01,
      "max_iter": 1000, "normalize": False})
  c.mle_reconstruction = ml_collections.ConfigDict({"method": "mle", "max_iter": 100})
  # Variants: overrides of `reconstruction`; `headline` is the one in the figures'
  # first panel and the correlation.
  c.headline = "paper"
  c.variants = ml_collections.ConfigDict({
      "paper": {}, "paper_tol0": {"tol": 0.0}, "projected": {"project": True},
      "optax": {"method": "optax"},
      "reference_code": {"normalize": True, "tol": 0.0, "max_iter": 101,
                         "stop_on_negative": True},
      "mle": {"method": "mle"}})
  # Error vs number of queries (error_vs_queries.png); empty query_counts: none.
  c.sweep_sigma = 40.0
  c.query_counts = (100, 300, 1_000, 3_000, 10_000, 30_000)
  c.sweep_variants = ("paper", "mle")
  if arg == "cpu":
    c.num_seeds = 1
    c.variants = ml_collections.ConfigDict({"paper": {}, "mle": {"method": "mle"}})
    c.query_counts = (300, 3_000, 30_000)
  elif arg not in (None, ""):
    raise ValueError(f"configs/attack_fixed.py: unknown variant {arg!r}")
  return c
