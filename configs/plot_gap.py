"""Figure 3 of Papernot et al. 2017: top-two vote gap vs number of teachers
(experiments/plot_gap.py).

  python experiments/plot_gap.py --config configs/plot_gap.py --workdir runs/figure3 \\
      --config.runs=runs/mnist_n10,runs/mnist_n100,runs/mnist_n250
"""

import ml_collections


def get_config(arg: str | None = None) -> ml_collections.ConfigDict:
  del arg
  c = ml_collections.ConfigDict()
  c.runs = ""  # comma-separated train_teachers workdirs (each with votes.npz)
  return c
