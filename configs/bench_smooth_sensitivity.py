"""Smooth-sensitivity release of Confident-GNMax's data-dependent ε for 10^4 queries,
JAX vs a per-query loop (experiments/bench_smooth_sensitivity.py).

  python experiments/bench_smooth_sensitivity.py \\
      --config configs/bench_smooth_sensitivity.py --workdir runs/bench_smooth_sensitivity

Noise: Confident-GNMax T = 200, σ_T = 150, σ = 40, δ = 1e-5 (Papernot et al. 2018,
Table 2, MNIST). The release is at one Rényi order (tf-privacy's table script fixes
the order first); ``:small`` (500 queries, 20 loop queries, 2 repeats) checks the script
in seconds.
"""

import ml_collections


def get_config(arg: str | None = None) -> ml_collections.ConfigDict:
  c = ml_collections.ConfigDict()
  c.seed = 0                 # seed of the synthetic histograms
  c.num_queries = 10_000
  c.num_teachers = 250
  c.num_classes = 10
  c.loop_queries = 200       # queries timed in the Python loop (then extrapolated)
  c.repeats = 5              # timed repetitions of the compiled release
  c.order = 20.0             # Rényi order of the release
  c.threshold = 200.0        # Confident-GNMax threshold T
  c.sigma_threshold = 150.0  # threshold noise σ_T
  c.sigma = 40.0             # GNMax noise σ
  c.delta = 1e-5
  if arg == "small":
    c.num_queries = 500
    c.loop_queries = 20
    c.repeats = 2
  elif arg not in (None, ""):
    raise ValueError(f"configs/bench_smooth_sensitivity.py: unknown variant {arg!r}; use '' or "
                     "'small'")
  return c
