"""The main job: teachers → noisy labels and their privacy cost → the PATE-G student →
the histogram attack on the run's own votes → report.md.

  python experiments/run_pate.py --config configs/pate_mnist.py:cpu --workdir runs/pate_mnist_cpu

Overrides name the stage (``--config.teachers.num_teachers=100``,
``--config.aggregate.num_queries=1000``, ``--config.student.num_steps=450``);
``--config.noise_seed=N`` names a research noise seed (public noise). The pipeline, its
files and its report: :mod:`pate_jax.stages.main_job`.
"""

from pate_jax import experiment
from pate_jax.stages import main_job as stage

run, plan, report = stage.run, stage.plan, stage.report

if __name__ == "__main__":
  experiment.run_main(run, report=report, plan=plan, quiet_logs=True)
