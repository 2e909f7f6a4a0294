"""Held-out accuracy and ε against queries for student runs (``experiments/plot_students.py``).

``run(config, workdir)`` reads each run of ``config.runs`` (comma-separated student
workdirs; their ``results.json`` from :mod:`pate_jax.stages.student`) and writes into the
workdir ``students.png`` (accuracy vs queries, one line per student; ε vs queries for the
private ones; :func:`pate_jax.students.plots.plot_students`) and ``students.json`` (the
points, :func:`pate_jax.students.plots.point`). ``plan(config)`` is ``--dry_run``;
``report(results)`` prints one line per point.
"""

from __future__ import annotations

import json
import pathlib

from pate_jax import experiment, reporting
from pate_jax.students import plots

__all__ = ["run", "plan", "report"]


def _runs(config) -> list[str]:
  """The student workdirs of ``config.runs``."""
  return [r for r in str(config.runs).split(",") if r]


def _record(run_dir: str, i: int) -> dict:
  """The ``results.json`` record of ``config.runs``' ``i``-th run, or an error naming it:
  a missing file was an OSError of the path alone, a file of another script a KeyError."""
  path = pathlib.Path(run_dir) / "results.json"
  if not path.is_file():
    raise FileNotFoundError(f"config.runs[{i}]: no {path} (a student workdir: run "
                            "experiments/train_student.py into it first)")
  record = json.loads(path.read_text())
  if not isinstance(record, dict) or not isinstance(record.get("results"), dict):
    raise ValueError(f"config.runs[{i}]: {path} is not a results.json of "
                     "experiments/train_student.py (no results entry)")
  return record


def run(config, workdir: str) -> dict:
  """Plots the runs' points; returns ``{"points": [...]}``."""
  runs = _runs(config)
  if not runs:
    raise ValueError("config.runs: give a comma-separated list of student workdirs")
  records = [_record(r, i) for i, r in enumerate(runs)]
  points = [plots.point(rec["results"], r, rec.get("disclosure"))
            for rec, r in zip(records, runs)]
  out = pathlib.Path(workdir)
  out.mkdir(parents=True, exist_ok=True)
  plots.plot_students(points, out / "students.png")
  experiment.write_text(out / "students.json", json.dumps(points, indent=1),  # as the PNG
                        private=True)
  return {"points": points}


def plan(config) -> dict:
  """``--dry_run``: the student runs to plot and whether each has its results.json."""
  runs = _runs(config)
  out = {"runs": len(runs) or "MISSING: config.runs is empty"}
  for i, r in enumerate(runs):
    path = pathlib.Path(r) / "results.json"
    out[f"run{i}"] = str(path) if path.is_file() else f"MISSING: no {path}"
  return out


def report(results: dict) -> None:
  """One line per point: its label, queries, accuracy and ε."""
  for p in results["points"]:
    eps = "n/a" if p["epsilon"] is None else f"{p['epsilon']:.2f}"
    if p["epsilon"] is not None and p.get("delta") is not None:
      eps += f" at δ = {reporting.delta_text(p['delta'], p.get('sampler_delta'))}"
    mark = experiment.PRIVATE_MARK if p.get("private") else ""
    print(f"{mark}{p['label']:>28}: {p['queries']:>5} queries  accuracy {p['accuracy']:.2%}  "
          f"ε {eps}")
