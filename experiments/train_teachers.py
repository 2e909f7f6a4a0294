"""Trains a PATE teacher ensemble and writes its vote histograms (votes.npz).

  python experiments/train_teachers.py --config configs/mnist_250.py:cpu --workdir runs/mnist_n250

The stage, what it writes and how a rerun resumes: :mod:`pate_jax.stages.teachers`.
"""

from pate_jax import experiment
from pate_jax.stages import teachers as stage

run, plan, report = stage.run, stage.plan, stage.report

if __name__ == "__main__":
  experiment.run_main(run, report=report, plan=plan, quiet_logs=True)
