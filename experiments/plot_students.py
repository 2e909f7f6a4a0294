"""Plots held-out accuracy and ε against queries for every student run found.

  python experiments/plot_students.py --config configs/plot_students.py \\
      --workdir runs/students --config.runs=runs/pate_g_100,runs/pate_g_1000,runs/supervised_100

Reads each run's ``results.json`` (experiments/train_student.py), writes
``students.png`` (accuracy vs queries, one line per student; ε vs queries for
the private ones) and ``students.json`` (the points) into ``--workdir``.
"""

from __future__ import annotations

import json
import pathlib

from pate_jax import experiment
from pate_jax.students import plots


def run(config, workdir: str) -> dict:
  runs = [r for r in str(config.runs).split(",") if r]
  if not runs:
    raise ValueError("config.runs: give a comma-separated list of student workdirs")
  records = [json.loads((pathlib.Path(r) / "results.json").read_text()) for r in runs]
  points = [plots.point(rec["results"], r) for rec, r in zip(records, runs)]
  out = pathlib.Path(workdir)
  out.mkdir(parents=True, exist_ok=True)
  plots.plot_students(points, out / "students.png")
  (out / "students.json").write_text(json.dumps(points, indent=1))
  return {"points": points}


def plan(config) -> dict:
  """``--dry_run``: the student runs to plot and whether each has its results.json."""
  runs = [r for r in str(config.runs).split(",") if r]
  out = {"runs": len(runs) or "MISSING: config.runs is empty"}
  for i, r in enumerate(runs):
    path = pathlib.Path(r) / "results.json"
    out[f"run{i}"] = str(path) if path.is_file() else f"MISSING: no {path}"
  return out


def report(results: dict) -> None:
  for p in results["points"]:
    eps = "n/a" if p["epsilon"] is None else f"{p['epsilon']:.2f}"
    print(f"{p['label']:>28}: {p['queries']:>5} queries  accuracy {p['accuracy']:.2%}  ε {eps}")


if __name__ == "__main__":
  experiment.run_main(run, report=report, plan=plan)
