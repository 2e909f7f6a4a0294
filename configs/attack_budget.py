"""Budget-limited attacker against canonical Confident-GNMax (attack paper, Figure 4).

  python experiments/attack.py --config configs/attack_budget.py --workdir runs/attack_budget
  python experiments/attack.py --config configs/attack_budget.py:cpu --workdir runs/attack_budget

The attacker repeats each Table-1 query until PATE's ε would exceed the budget
(MNIST: T = 200, σ_T = 150, σ = 40, δ = 1e-5, ε = 1.97; SVHN: T = 300, σ_T = 200,
σ = 40, δ = 1e-6, ε = 4.96; Papernot et al. 2018). Number of queries from the
expected per-query Confident-GNMax RDP (as in the paper's code), checked against
the realised-cost ledger (pate_jax.ledger.PrivateAggregator). Samples:
``confident`` -- only the answered queries are observed (the real mechanism);
``gnmax_all`` -- every allowed query answered by plain GNMax (what the paper's
code simulates). Reconstruction stops before an estimate turns negative (the
paper's rule for this setting). Paper: mean error 0.11 (MNIST), 0.05 (SVHN).
Beyond the paper: the maximum-likelihood reconstruction (variant
``mle``; on ``confident`` it reads the ⊥ outcomes too), the Cramér–Rao bound of
the queries allowed, and the queries it says are needed for errors 0.05 / 0.10.
``:cpu``: one seed, no ledger run, the paper's and the MLE.
"""

import ml_collections


def get_config(arg: str | None = None) -> ml_collections.ConfigDict:
  c = ml_collections.ConfigDict()
  c.setting = "budget"
  c.seed = 0
  c.num_seeds = 5
  c.datasets = ml_collections.ConfigDict({
      "mnist": {"threshold": 200.0, "sigma_threshold": 150.0, "sigma": 40.0, "delta": 1e-5,
                "budget": 1.97},
      "svhn": {"threshold": 300.0, "sigma_threshold": 200.0, "sigma": 40.0, "delta": 1e-6,
               "budget": 4.96},
  })
  c.conversion = "improved"         # the attack paper's code; "classic" also reported
  c.max_queries = 10_000_000        # search cap of the budget bisection
  c.samplers = ("confident", "gnmax_all")
  c.ledger = True                   # replay the attack against PrivateAggregator
  c.ledger_batch = 8192
  c.reconstruction = ml_collections.ConfigDict({
      "method": "paper", "project": False, "stop_on_negative": True, "tol": 0.01,
      "max_iter": 1000, "normalize": False})
  c.mle_reconstruction = ml_collections.ConfigDict({"method": "mle", "max_iter": 100})
  c.headline = "paper"
  c.variants = ml_collections.ConfigDict({
      "paper": {}, "paper_tol0": {"tol": 0.0},
      "projected": {"project": True, "stop_on_negative": False},
      "reference_code": {"normalize": True, "tol": 0.0, "max_iter": 101},
      "mle": {"method": "mle"}})
  if arg == "cpu":
    c.num_seeds = 1
    c.ledger = False
    c.variants = ml_collections.ConfigDict({"paper": {}, "mle": {"method": "mle"}})
  elif arg not in (None, ""):
    raise ValueError(f"configs/attack_budget.py: unknown variant {arg!r}")
  return c
