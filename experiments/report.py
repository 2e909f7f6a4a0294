"""Writes RESULTS.md: every table and figure of the three papers beside our measured values.

  python experiments/report.py --config configs/report.py --config.runs_dir=results/runs --workdir .

Reads ``<runs_dir>/<run>/results.json`` for each run of the catalogue in
``pate_jax/reproduction.py`` and writes the report to ``<workdir>/<output>``
(``--config.copy_figures=True`` copies the runs' PNGs first). A run not made yet shows as
"not run yet" with its command. The stage: :mod:`pate_jax.stages.report`.
"""

from pate_jax import experiment
from pate_jax.stages import report as stage

run, plan, report = stage.run, stage.plan, stage.report

if __name__ == "__main__":
  experiment.run_main(run, report=report, plan=plan)
