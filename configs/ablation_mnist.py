"""Vectorised ablation over mechanism × teacher count × noise scale × seed
(experiments/ablate.py, pate_jax.ablation).

  python experiments/ablate.py --config configs/ablation_mnist.py \\
      --config.votes_dir=runs/mnist_cpu/teachers --workdir runs/ablation
  python experiments/ablate.py --config configs/ablation_mnist.py:smoke \\
      --config.votes_dir=runs/mnist_cpu/teachers --workdir runs/ablation_smoke

Noise scale s per mechanism: LNMax Laplace scale 1/γ = s (the 2017 MNIST γ = 0.05 is
s = 20), GNMax σ = s, Confident-GNMax σ₂ = s with threshold = threshold_fraction · n and
σ₁ = sigma_threshold_fraction · n for n teachers (0.8, 0.6: the 2018 MNIST T = 200,
σ₁ = 150 at n = 250). Teacher count n: the first n teachers of the trained ensemble.
"""

import ml_collections


def get_config(arg: str | None = None) -> ml_collections.ConfigDict:
  c = ml_collections.ConfigDict()
  c.seed = 0
  c.votes_dir = ""                 # train_teachers workdir whose votes.npz has predictions.
  c.num_queries = 1000             # First N rows of the public pool.
  c.mechanisms = ("lnmax", "gnmax", "confident_gnmax")
  c.teacher_counts = (10, 25, 50, 100, 250)
  c.noise_scales = (2.0, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 60.0, 100.0, 150.0)
  c.num_seeds = 5
  c.threshold_fraction = 0.8       # Confident-GNMax threshold / n.
  c.sigma_threshold_fraction = 0.6  # Confident-GNMax σ₁ / n.
  c.delta = 1e-5
  c.max_moment = 8                 # LNMax moments 1..8 (the 2017 convention, as aggregate.py).
  c.orders = ml_collections.config_dict.placeholder(tuple)  # RDP orders; None = default.
  c.repeats = 3                    # Timed runs of the compiled grid (the minimum is reported).
  c.loop_max_cells = 0             # Python-loop baseline: 0 = every cell; else this many
                                   # evenly spaced cells, its time extrapolated to the grid.
  if arg == "smoke":
    c.num_queries = 50
    c.teacher_counts = (5, 10)
    c.noise_scales = (5.0, 40.0)
    c.num_seeds = 2
    c.repeats = 1
  elif arg not in (None, ""):
    raise ValueError(f"unknown config variant {arg!r}; use '' or 'smoke'")
  return c
