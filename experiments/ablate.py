"""Vectorised ablation: mechanism × teacher count × noise scale × seed in one compiled call.

Reads ``<votes_dir>/votes.npz`` (its ``predictions``: each teacher's class per query), runs
the grid of :func:`pate_jax.ablation.ablation_grid` on the first ``num_queries`` public-pool
rows, then the same grid cell by cell through the public API (pate_jax.aggregation and the
mechanisms' accountants; ``loop_max_cells`` evenly spaced cells, extrapolated, when > 0),
checks that both give the same labels and ε, and writes to ``--workdir``:

  results.json  grid size, compile / vectorised / loop seconds, speed-up, the 1-minute load
                average, the loop-vs-grid differences, and per (mechanism, teachers, scale)
                the mean / min / max over seeds of accuracy, fraction answered and ε.
  ablation.png  accuracy, fraction answered and ε vs noise scale, per mechanism.

Usage:
  python experiments/ablate.py --config configs/ablation_mnist.py \\
      --config.votes_dir=runs/mnist_cpu/teachers --workdir runs/ablation

The stage and its loop baseline: :mod:`pate_jax.stages.ablation`.
"""

from pate_jax import experiment
from pate_jax.stages import ablation as stage

run, plan, report = stage.run, stage.plan, stage.report

if __name__ == "__main__":
  experiment.run_main(run, report=report, plan=plan)
