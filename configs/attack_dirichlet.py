"""Beyond the paper: maximum likelihood and the Cramér–Rao bound on fresh histograms.

  python experiments/attack.py --config configs/attack_dirichlet.py --workdir runs/attack_dirichlet
  python experiments/attack.py --config configs/attack_dirichlet.py:cpu --workdir runs/attack_dirichlet

The benchmark set: histograms drawn like Table 1's but fresh, 250 votes
over 10 classes from Dirichlet(α·1), α ∈ {0.05, 0.3, 1} (``num_per_alpha`` each;
stream ``attack_sample``), 10^4 GNMax queries at σ = 40. Per histogram: the
paper's estimator, the maximum-likelihood estimate and the Cramér–Rao bound
(Gaussian approximation; flagged near the boundary); the queries the bound says
are needed for errors 0.05 / 0.10 next to those MNIST's canonical
Confident-GNMax budget allows; error against the number of queries
(``error_vs_queries.png``). ``:cpu``: fewer histograms and seeds, a shorter sweep.
"""

import ml_collections


def get_config(arg: str | None = None) -> ml_collections.ConfigDict:
  c = ml_collections.ConfigDict()
  c.setting = "dirichlet"
  c.seed = 0
  c.alphas = (0.05, 0.3, 1.0)
  c.num_per_alpha = 20
  c.num_teachers = 250
  c.num_classes = 10
  c.sigma = 40.0
  c.num_queries = 10_000
  c.num_seeds = 5
  c.conversion = "improved"
  # The canonical MNIST Confident-GNMax budget (attack_budget.py): queries allowed.
  c.budget = ml_collections.ConfigDict({"threshold": 200.0, "sigma_threshold": 150.0,
                                        "sigma": 40.0, "delta": 1e-5, "budget": 1.97})
  c.reconstruction = ml_collections.ConfigDict({
      "method": "paper", "project": False, "stop_on_negative": False, "tol": 0.01,
      "max_iter": 1000, "normalize": False})
  c.mle_reconstruction = ml_collections.ConfigDict({"method": "mle", "max_iter": 100})
  c.headline = "mle"
  c.variants = ml_collections.ConfigDict({"paper": {}, "mle": {"method": "mle"}})
  # Error vs number of queries (one figure): σ, the counts M, the variants drawn.
  c.sweep_sigma = 40.0
  c.query_counts = (100, 300, 1_000, 3_000, 10_000, 30_000)
  c.sweep_variants = ("paper", "mle")
  if arg == "cpu":
    c.num_per_alpha = 8
    c.num_seeds = 2
    c.query_counts = (300, 3_000, 30_000)
  elif arg not in (None, ""):
    raise ValueError(f"configs/attack_dirichlet.py: unknown variant {arg!r}")
  return c
