"""Consistent answers against the attack (attack paper, Section 5, "Mitigation").

  python experiments/attack.py --config configs/attack_defense.py --workdir runs/attack_defense
  python experiments/attack.py --config configs/attack_defense.py:cpu --workdir runs/attack_defense

The same attacker (10^4 repeats of each Table-1 query, σ ∈ {40, 60, 80, 100}) against
GNMax with fresh noise per query and against GNMax whose noise is keyed by the
query input (pate_jax.aggregation's query ids; every repeat gets the same
answer). Errors side by side, with what the top class alone reveals (the same
solver on a one-hot q̄ on the true top class, and the guess "all N votes on the
top class"); a replay against the consistent-mode ledger checks that the repeats
are charged once. Beyond the paper: the maximum-likelihood
reconstruction against both, and the Cramér–Rao bound: ``n`` fresh answers carry
``n·I(H)``, the defense's cached answers one draw's ``I(H)`` whatever ``n``.
"""

import ml_collections


def get_config(arg: str | None = None) -> ml_collections.ConfigDict:
  c = ml_collections.ConfigDict()
  c.setting = "defense"
  c.seed = 0
  c.num_queries = 10_000
  c.sigmas = (40.0, 60.0, 80.0, 100.0)
  c.num_seeds = 5
  c.ledger = True
  c.ledger_delta = 1e-5
  c.reconstruction = ml_collections.ConfigDict({
      "method": "paper", "project": False, "stop_on_negative": False, "tol": 0.01,
      "max_iter": 1000, "normalize": False})
  c.mle_reconstruction = ml_collections.ConfigDict({"method": "mle", "max_iter": 100})
  c.headline = "paper"
  c.variants = ml_collections.ConfigDict({"paper": {}, "projected": {"project": True},
                                          "mle": {"method": "mle"}})
  if arg == "cpu":
    c.num_seeds = 1
  elif arg not in (None, ""):
    raise ValueError(f"configs/attack_defense.py: unknown variant {arg!r}")
  return c
