"""Figure 2 of Papernot et al. 2017: LNMax label accuracy vs per-query ε
(experiments/plot_aggregation.py).

  python experiments/plot_aggregation.py --config configs/plot_aggregation.py \\
      --workdir runs/figure2 --config.runs=runs/mnist_n10,runs/mnist_n100,runs/mnist_n250
  python experiments/plot_aggregation.py --config configs/plot_aggregation.py:paper ...

``epsilon_convention``: ``dp`` plots the per-answer ε = 2γ of LNMax with Laplace
scale 1/γ; ``paper`` (the ``:paper`` variant) plots γ itself, as the 2017 paper's
axis does ("Laplacian noise of inversed scale ε").
"""

import ml_collections


def get_config(arg: str | None = None) -> ml_collections.ConfigDict:
  c = ml_collections.ConfigDict()
  c.runs = ""                  # comma-separated workdirs, each with a votes.npz
  c.num_points = 25            # points of the log-spaced ε grid
  c.eps_min = 0.01             # smallest per-query ε
  c.eps_max = 1.0              # largest per-query ε
  c.num_seeds = 5              # noise draws per ε
  c.rows = "all"               # votes.npz rows to label: all | pool | eval
  c.epsilon_convention = "dp"  # dp: γ = ε/2 (ε-DP per answer); paper: γ = ε (2017 axis)
  c.seed = 0                   # root seed
  if arg == "paper":
    c.epsilon_convention = "paper"
  elif arg not in (None, ""):
    raise ValueError(f"configs/plot_aggregation.py: unknown variant {arg!r}; use '' or 'paper'")
  return c
