"""Every script's results.json on a tiny config, before and after a refactor, compared.

Checks out ``--config.before`` (a commit) with ``git worktree``, runs the catalogue of
tiny runs (every script that writes a results.json, noise seeded) on it and on the
working tree, and compares the results files once timings, dates, versions, the git hash,
the host and the directories of paths are set aside. Writes to ``--workdir``:

  before/, after/  each run's workdir and log, one tree per side.
  results.json     per run: both exit codes and walls, equal or not, the differing keys
                   (numbers: the largest relative difference).

Prints one line per run, then the verdict.

Usage:
  python experiments/compare_runs.py --config configs/compare_runs.py:cpu \\
      --config.before=HEAD --workdir runs/compare_runs

The catalogue and the comparison: :mod:`pate_jax.stages.compare_runs`.
"""

from pate_jax import experiment
from pate_jax.stages import compare_runs as stage

run, plan, report = stage.run, stage.plan, stage.report

if __name__ == "__main__":
  experiment.run_main(run, report=report, plan=plan)
