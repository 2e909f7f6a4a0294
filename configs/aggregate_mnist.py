"""Noisy aggregation of MNIST teacher votes: label the student's queries (2017 setting).

Usage:
  python experiments/aggregate.py --config configs/aggregate_mnist.py \\
      --config.votes_dir=runs/pate_mnist_cpu/teachers --workdir runs/agg_q100
  python experiments/aggregate.py --config configs/aggregate_mnist.py:cpu --workdir ... \\
      --config.num_queries=1000 --config.mechanism=gnmax

Reads ``<votes_dir or workdir>/votes.npz`` (written by the teachers experiment),
labels its first ``num_queries`` public-pool rows and writes ``labels.npz`` and
``results.json`` to ``--workdir``. Defaults follow Papernot et al. 2017, Section
4.2: LNMax with Laplace scale 20 (gamma = 0.05), delta = 1e-5, moments 1..8, and
100 / 500 / 1000 queries. The GNMax / Confident-GNMax values follow the MNIST
row of Papernot et al. 2018, Table 2 (T = 200, sigma_1 = 150, sigma_2 = 40;
640 queries at delta = 1e-5 there).
"""

from __future__ import annotations

import ml_collections


def get_config(arg: str | None = None) -> ml_collections.ConfigDict:
  config = ml_collections.ConfigDict()
  config.seed = 0
  config.votes_dir = ""            # Directory (or file) with votes.npz; "" = --workdir.
  config.num_queries = 100         # First N rows of the public pool (paper: 100/500/1000).
  config.mechanism = "lnmax"       # lnmax | gnmax | confident_gnmax
  config.gamma = 0.05              # LNMax inverse Laplace scale (per-query eps = 2 gamma).
  config.sigma = 40.0              # GNMax noise std.
  config.threshold = 200.0         # Confident-GNMax threshold T (in votes).
  config.sigma_threshold = 150.0   # Confident-GNMax threshold noise sigma_1.
  config.delta = 1e-5
  config.max_moment = 8            # 2017 moments accountant: l = 1..max_moment (the 2017
                                   # code's convention; ε comparable with the paper's 2.04).
  config.tight_max_moment = 128    # results.json's epsilon_tight: moments 1..this (its best
                                   # moment is inside the grid; ~33 for the MNIST CPU run).
  config.orders = ml_collections.config_dict.placeholder(tuple)  # RDP orders; None = default.
  config.privacy_plot = True       # privacy.png: ε vs queries answered, per accounting.
  config.epsilon_max = float("inf")  # Budget of the ledger (refuses queries beyond it).
  config.data_dependent = True     # Ledger accounting (results.json reports both).
  config.conversion = "improved"   # Ledger's RDP -> (eps, delta) conversion.
  config.consistent = False        # Consistent answers keyed by hashed query ids.
  config.chunk_size = 256          # Padded batch of the compiled ledger step.
  config.capacity = 1024           # Initial id record of consistent mode (grows as needed).

  if arg == "cpu":
    config.chunk_size = 128
  elif arg not in (None, ""):
    raise ValueError(f"unknown config variant {arg!r}; use '' or 'cpu'")
  return config
