"""How many training steps a teachers config needs: the held-out accuracy of its first
teachers after each of several step counts.

  python experiments/teacher_steps.py --config configs/teacher_steps.py:cpu --workdir runs/teacher_steps

The stage, and why its accuracies are private: :mod:`pate_jax.stages.teacher_steps`.
"""

from pate_jax import experiment
from pate_jax.stages import teacher_steps as stage

run, plan, report = stage.run, stage.plan, stage.report

if __name__ == "__main__":
  experiment.run_main(run, report=report, plan=plan, quiet_logs=True)
