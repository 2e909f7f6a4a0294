"""Figure 3 of Papernot et al. (2017): normalized top-two vote gap vs number of teachers.

  for n in 10 100 250; do
    python experiments/train_teachers.py --config configs/mnist_250.py:cpu \\
        --config.num_teachers=$n --workdir runs/mnist_n$n
  done
  python experiments/plot_gap.py --config configs/plot_gap.py --workdir runs/figure3 \\
      --config.runs=runs/mnist_n10,runs/mnist_n100,runs/mnist_n250

Reads each run's votes.npz, averages (top count − second count) / n over the
test queries, and writes ``figure3.png`` and ``results.json`` into ``--workdir``.
The stage: :mod:`pate_jax.stages.figures`.
"""

from pate_jax import experiment
from pate_jax.stages import figures as stage

run, plan, report = stage.run_gap, stage.plan_gap, stage.report_gap

if __name__ == "__main__":
  experiment.run_main(run, report=report, plan=plan)
