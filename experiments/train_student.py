"""Trains a student on the public pool and noisy teacher labels (PATE's published model).

  python experiments/train_student.py --config configs/student_pate_g.py:cpu \\
      --workdir runs/pate_g_100 --config.votes_dir=runs/pate_mnist_cpu/teachers

The stage, what it writes and what may be published: :mod:`pate_jax.stages.student`.
"""

from pate_jax import experiment
from pate_jax.stages import student as stage

run, plan, report = stage.run, stage.plan, stage.report

if __name__ == "__main__":
  experiment.run_main(run, report=report, plan=plan, quiet_logs=True)
