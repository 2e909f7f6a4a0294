"""Noisy aggregation of MNIST teacher votes: label the student's queries (2017 setting).

Usage:
  python experiments/aggregate.py --config configs/aggregate_mnist.py \\
      --config.votes_dir=runs/pate_mnist_cpu/teachers --workdir runs/agg_q100
  python experiments/aggregate.py --config configs/aggregate_mnist.py:cpu --workdir ... \\
      --config.num_queries=1000 --config.mechanism=gnmax

Reads ``<votes_dir or workdir>/votes.npz`` (written by the teachers experiment),
labels ``num_queries`` public-pool rows (class-balanced by default) and writes ``labels.npz`` and
``results.json`` to ``--workdir``. Defaults follow Papernot et al. 2017, Section
4.2: LNMax with Laplace scale 20 (gamma = 0.05), delta = 1e-5, moments 1..8, and
100 / 500 / 1000 queries. The GNMax / Confident-GNMax values follow the MNIST
row of Papernot et al. 2018, Table 1 (T = 200, sigma_1 = 150, sigma_2 = 40;
640 queries at delta = 1e-5 there).
"""

from __future__ import annotations

import ml_collections


def get_config(arg: str | None = None) -> ml_collections.ConfigDict:
  config = ml_collections.ConfigDict()
  config.seed = 0
  config.votes_dir = ""            # Directory (or file) with votes.npz; "" = --workdir.
  config.num_queries = 100         # Rows of the public pool asked (paper: 100/500/1000).
  # Which rows: "balanced" (N/10 of each class, chosen with the public pool's labels, as the
  # 2017 paper's Section 4.2 selects the student's labelled inputs) or "first" (rows 0..N-1).
  config.query_selection = "balanced"
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
  # The teachers' budget: refusals on the data-independent bound (100 LNMax answers at
  # gamma 0.05 cost 5.30 there, moments to 8; the paper's 2.04 is data-dependent, private).
  # Finite: a budget with secret noise must be (inf only with a research noise_seed).
  config.epsilon_max = 6.0
  config.data_dependent = True     # Also track the private data-dependent ε (and release it).
  # Smooth-sensitivity release of the private ε (GNMax, Confident-GNMax): its parameters are
  # fixed here, before the data is seen (Papernot et al. 2018, App. B). order None: the
  # order where num_queries answers cost the least data-independent ε; beta None: 0.4/order.
  config.release = ml_collections.ConfigDict({
      "order": ml_collections.config_dict.placeholder(float),
      "beta": ml_collections.config_dict.placeholder(float),
      "sigma_ss": 10.0})
  # None: the noise is secret (os.urandom, never written). An int: a research seed: the
  # noise is public, the ledger is the work directory's, ε is a measurement, not a release.
  config.noise_seed = ml_collections.config_dict.placeholder(int)
  # The budget registry (pate_jax.budget.BudgetRegistry): a secret-noise budget registers on
  # the private data its teachers were trained on; teachers trained again on the same data
  # are refused a second budget unless another_budget is True (the budgets' ε add up).
  # budget_registry "": $PATE_JAX_BUDGET_REGISTRY, else ~/.local/share/pate_jax/budgets.
  config.another_budget = False
  config.budget_registry = ""
  config.conversion = "improved"   # Ledger's RDP -> (eps, delta) conversion.
  config.chunk_size = 256          # Padded batch of the compiled ledger step.
  # Where the accounting's small float64 programs run: "host" (the CPU: on an accelerator
  # they would each build GPU kernels and launch tiny ones) or "default" (JAX's default
  # device, e.g. for millions of queries).
  config.accounting_device = "host"

  if arg == "cpu":
    config.chunk_size = 128
  elif arg not in (None, ""):
    raise ValueError(f"unknown config variant {arg!r}; use '' or 'cpu'")
  return config
