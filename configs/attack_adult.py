"""Consensus inference on UCI Adult (attack paper, Section 2 / Figure 1, Appendix E / Figure 8).

  python experiments/attack.py --config configs/attack_adult.py --workdir runs/attack_adult
  python experiments/attack.py --config configs/attack_adult.py:cpu --workdir runs/attack_adult

250 random-forest teachers (pate_jax.tabular) on disjoint partitions of Adult's
training split predict income without the education column; on the balanced
test set (all PhD holders + as many random others) an individual is called a PhD
holder iff the consensus of its vote histogram is below 75 %. Paper: precision
about 75 %. End to end (Appendix E): for 10 low- and 10 high-consensus members
the attacker only sees GNMax answers (σ = 40, δ = 1e-5, budget 1.9), reconstructs
each histogram and classifies it.

Teachers: ``rf_search`` follows Appendix D -- each teacher picks its forest by a
randomized search (``search_iterations`` draws, ``search_folds``-fold CV accuracy,
as the paper's code does) over max_depth 1-11, max_features, n_estimators
10-300 (log scale), criterion, min_samples_split, bootstrap. ``rf`` uses one
fixed forest (``n_estimators``, ``max_depth``). ``:cpu``: fixed forests of 25
trees of depth 3 (fast; depth matters, see the report).
"""

import ml_collections
from ml_collections import config_dict


def get_config(arg: str | None = None) -> ml_collections.ConfigDict:
  c = ml_collections.ConfigDict()
  c.setting = "adult"
  c.seed = 0
  c.data_dir = ""                 # "" -> $PATE_JAX_DATA_DIR
  c.num_teachers = 250
  c.teacher = "rf_search"         # "rf_search" (Appendix D) or "rf"
  c.search_iterations = 4
  c.search_folds = 3
  c.n_estimators = 100            # teacher = "rf"
  c.max_depth = config_dict.placeholder(int)   # teacher = "rf"; None: unlimited
  c.n_jobs = -1
  c.consensus_threshold = 0.75
  c.num_balanced_draws = 200      # redraws of the majority half of the balanced set
  c.minority_column = "education"
  c.minority_value = "Doctorate"
  # Appendix E: end-to-end attack through noisy GNMax answers.
  c.num_end_to_end = 10           # low- and as many high-consensus individuals
  c.sigma = 40.0
  c.delta = 1e-5
  c.budget = 1.9
  c.max_queries = 1_000_000       # cap per individual (the paper's code: 10^6)
  c.conversion = "improved"
  c.reconstruction = ml_collections.ConfigDict({
      "method": "paper", "project": False, "stop_on_negative": True, "tol": 0.01,
      "max_iter": 1000, "normalize": False})
  c.headline = "paper"
  c.variants = ml_collections.ConfigDict({"paper": {}})
  if arg == "cpu":
    c.teacher = "rf"
    c.n_estimators = 25
    c.max_depth = 3
  elif arg not in (None, ""):
    raise ValueError(f"configs/attack_adult.py: unknown variant {arg!r}")
  return c
