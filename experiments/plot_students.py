"""Plots held-out accuracy and ε against queries for every student run found.

  python experiments/plot_students.py --config configs/plot_students.py \\
      --workdir runs/students --config.runs=runs/pate_g_100,runs/pate_g_1000,runs/supervised_100

Reads each run's ``results.json`` (experiments/train_student.py), writes
``students.png`` (accuracy vs queries, one line per student; ε vs queries for
the private ones) and ``students.json`` (the points) into ``--workdir``. The stage:
:mod:`pate_jax.stages.students_plot`.
"""

from pate_jax import experiment
from pate_jax.stages import students_plot as stage

run, plan, report = stage.run, stage.plan, stage.report

if __name__ == "__main__":
  experiment.run_main(run, report=report, plan=plan)
