"""Edge values of the noise (attack paper, Appendix F, Figure 9).

  python experiments/attack.py --config configs/attack_edge.py --workdir runs/attack_edge
  python experiments/attack.py --config configs/attack_edge.py:cpu --workdir runs/attack_edge

The medium-consensus SVHN histogram M3 = [0, 0, 0, 6, 0, 243, 0, 0, 0, 1], 10^4
GNMax queries, σ from nearly 0 to 400; error of the paper's reconstruction next
to two baselines: the uniform guess N/C and the reconstruction from the top
class alone (a one-hot q̄, all an attacker learns as σ → 0).
"""

import ml_collections


def get_config(arg: str | None = None) -> ml_collections.ConfigDict:
  c = ml_collections.ConfigDict()
  c.setting = "edge"
  c.seed = 0
  c.histogram = "svhn/M3"
  c.num_queries = 10_000
  c.sigmas = (0.01, 0.1, 1.0, 5.0, 10.0, 20.0, 40.0, 60.0, 80.0, 100.0, 150.0, 200.0, 300.0,
              400.0)
  c.num_seeds = 10
  c.reconstruction = ml_collections.ConfigDict({
      "method": "paper", "project": False, "stop_on_negative": False, "tol": 0.01,
      "max_iter": 1000, "normalize": False})
  c.headline = "paper"
  c.variants = ml_collections.ConfigDict({
      "paper": {}, "paper_tol0": {"tol": 0.0, "stop_on_negative": True},
      "projected": {"project": True}})
  if arg == "cpu":
    c.num_seeds = 2
    c.variants = ml_collections.ConfigDict({"paper": {}})
  elif arg not in (None, ""):
    raise ValueError(f"configs/attack_edge.py: unknown variant {arg!r}")
  return c
