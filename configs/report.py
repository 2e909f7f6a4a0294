"""The reproduction report (experiments/report.py): RESULTS.md from the runs' results.json.

  python experiments/report.py --config configs/report.py --config.runs_dir=results/runs --workdir .

``runs_dir`` holds one directory per run of the catalogue (``pate_jax/reproduction.py``),
each with its ``results.json``; a missing run renders as "not run yet: <command>".
``output`` and ``figures_dir`` are relative to ``--workdir``.
"""

import ml_collections


def get_config(arg: str | None = None) -> ml_collections.ConfigDict:
  del arg
  c = ml_collections.ConfigDict()
  c.runs_dir = "runs"                # where the runs' workdirs are (results/runs: the snapshot)
  c.output = "RESULTS.md"            # the report, relative to --workdir
  c.figures_dir = "results/figures"  # PNG copies linked from the report, relative to --workdir
  c.copy_figures = False             # copy the runs' PNGs into figures_dir before rendering
  return c
