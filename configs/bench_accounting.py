"""Data-dependent PATE accounting of 10^6 queries, JAX vs a per-query loop
(experiments/bench_accounting.py).

  python experiments/bench_accounting.py --config configs/bench_accounting.py \\
      --workdir runs/bench_accounting
  python experiments/bench_accounting.py --config configs/bench_accounting.py \\
      --workdir runs/bench_accounting --config.loop_queries=2000 --config.devices=2

Noise settings: LNMax γ = 0.05 (Papernot et al. 2017, MNIST); Confident-GNMax
T = 200, σ_T = 150, σ = 40 (Papernot et al. 2018, Table 1, MNIST). ``:small``
(10^4 queries, 1,000 loop queries, 2 repeats) checks the script in seconds.
"""

import ml_collections


def get_config(arg: str | None = None) -> ml_collections.ConfigDict:
  c = ml_collections.ConfigDict()
  c.seed = 0                 # seed of the synthetic histograms
  c.num_queries = 10**6
  c.num_teachers = 250
  c.num_classes = 10
  c.loop_queries = 20_000    # queries timed in the Python loop (then extrapolated)
  c.repeats = 5              # timed repetitions of the compiled JAX call
  # CPU devices to shard the query axis over (jax_num_cpu_devices; XLA runs one device's
  # program on one thread, so 2 uses both cores of a 2-core machine).
  c.devices = 1
  c.gamma = 0.05             # LNMax inverse Laplace scale
  c.sigma = 40.0             # GNMax noise σ
  c.threshold = 200.0        # Confident-GNMax threshold T
  c.sigma_threshold = 150.0  # threshold noise σ_T
  c.delta = 1e-5
  if arg == "small":
    c.num_queries = 10_000
    c.loop_queries = 1_000
    c.repeats = 2
  elif arg not in (None, ""):
    raise ValueError(f"configs/bench_accounting.py: unknown variant {arg!r}; use '' or 'small'")
  return c
