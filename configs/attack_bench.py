"""Speed of the histogram-extraction attack (experiments/bench_attack.py).

  python experiments/bench_attack.py --config configs/attack_bench.py --workdir runs/attack_bench
  python experiments/bench_attack.py --config configs/attack_bench.py:cpu --workdir runs/attack_bench_cpu

Times, after compilation: (1) one histogram end to end (10^4 GNMax queries +
the paper's reconstruction), (2) the 30 Table-1 histograms × 4 σ in one call,
(3) one Q(H) evaluation; and measures the trapezoid's quadrature error against
the accurate method for several node counts. ``:cpu`` uses fewer repeats.
"""

import ml_collections


def get_config(arg: str | None = None) -> ml_collections.ConfigDict:
  c = ml_collections.ConfigDict()
  c.seed = 0
  c.num_queries = 10_000
  c.sigmas = (40.0, 60.0, 80.0, 100.0)
  c.single_histogram = "mnist/M2"
  c.single_sigma = 40.0
  c.repeats = 10                 # timed end-to-end runs of the single histogram
  c.sweep_repeats = 3            # timed runs of the 30 × 4σ sweep
  c.methods = ("paper", "projected", "optax", "mle")   # reconstructions timed on the sweep
  c.single_methods = ("paper", "mle")           # one fresh histogram end to end
  c.fresh_alphas = (0.05, 0.3, 1.0)
  c.gradient_sigmas = (5.0, 20.0, 40.0, 100.0, 400.0)
  c.gradient_step = 1e-3                        # finite-difference step, in units of σ
  c.quadrature_points = (17, 25, 33, 49, 97)    # trapezoid node counts (Gaussian)
  c.quadrature_points_laplace = (201, 401, 801, 1601)
  c.quadrature_sigmas = (0.01, 1.0, 10.0, 40.0, 100.0, 400.0)
  if arg == "cpu":
    c.repeats = 3
    c.sweep_repeats = 1
    c.methods = ("paper", "mle")
  elif arg not in (None, ""):
    raise ValueError(f"configs/attack_bench.py: unknown variant {arg!r}")
  return c
