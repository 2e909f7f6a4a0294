"""Recomputes the papers' printed ε from their stated parameters (closed forms, no data).

  python experiments/published_accounting.py --config configs/published_accounting.py \
      --workdir runs/published_accounting

What is computed and from which paper: :mod:`pate_jax.stages.published_accounting`.
"""

from pate_jax import experiment
from pate_jax.stages import published_accounting as stage

run, plan, report = stage.run, stage.plan, stage.report

if __name__ == "__main__":
  experiment.run_main(run, report=report, plan=plan)
