"""The reproduction report (``experiments/report.py``): RESULTS.md from the catalogue.

``run(config, workdir)`` reads ``<runs_dir>/<run>/results.json`` for each run of the
catalogue in :mod:`pate_jax.reproduction` (the committed snapshot is ``results/runs``; a
user's own runs land in ``runs/``), and writes the report to ``<workdir>/<output>`` with
links to the figures under ``<workdir>/<figures_dir>`` (``config.copy_figures`` copies the
runs' PNGs there first). A run not made yet shows as "not run yet" with its command.
``plan(config)`` is ``--dry_run``; ``report(results)`` prints the counts and the path.
"""

from __future__ import annotations

import pathlib
import shutil

from pate_jax import io, reporting, reproduction

__all__ = ["run", "plan", "report", "copy_figures"]


def copy_figures(runs_dir: pathlib.Path, figures_dir: pathlib.Path, *,
                 figures: tuple[reproduction.Figure, ...] = reproduction.FIGURES,
                 runs: tuple[reproduction.Run, ...] = reproduction.RUNS) -> list[pathlib.Path]:
  """Copies each catalogue figure that a run produced into ``figures_dir``: a private one
  (:meth:`pate_jax.reproduction.Figure.private_in`, or of a run without a ``results.json``
  to say otherwise) under a banner that says so, so that the image itself is marked
  wherever it is shown; the others byte for byte."""
  records = reproduction.load_runs(runs_dir, runs)
  copied = []
  for fig in figures:
    src = runs_dir / fig.run / fig.file
    if src.is_file():
      figures_dir.mkdir(parents=True, exist_ok=True)
      if fig.run not in records or fig.private_in(records[fig.run]):  # no record: unknown
        reporting.stamp_private(src, figures_dir / fig.name)
      else:
        shutil.copyfile(src, figures_dir / fig.name)
      copied.append(figures_dir / fig.name)
  return copied


def check_config(config, workdir: str | None = None) -> None:
  """``config.runs_dir``, ``output`` and ``figures_dir`` (strings; ``output`` a file's name,
  not empty nor a directory under ``workdir``) and ``copy_figures`` (a boolean), refused
  naming the field before anything is read or written (an empty output was an
  IsADirectoryError once the report was rendered)."""
  for name in ("runs_dir", "output", "figures_dir"):
    if not isinstance(config[name], str):
      raise ValueError(f"config.{name} must be a path (a string); got {config[name]!r}")
  if not config.output.strip() or config.output.endswith(("/", "\\")):
    raise ValueError(f"config.output must name the report's file; got {config.output!r}")
  if workdir is not None and (pathlib.Path(workdir) / config.output).is_dir():
    raise ValueError(f"config.output must name the report's file; "
                     f"{pathlib.Path(workdir) / config.output} is a directory")
  if not isinstance(config.copy_figures, bool):
    raise ValueError(f"config.copy_figures must be a boolean; got {config.copy_figures!r}")


def run(config, workdir: str) -> dict:
  """Writes the report; returns its path and the rows measured / not run yet / impossible."""
  check_config(config, workdir)
  out_dir = pathlib.Path(workdir)
  runs_dir = pathlib.Path(config.runs_dir)
  figures_dir = out_dir / config.figures_dir
  if not runs_dir.is_dir():
    print(f"note: {runs_dir} does not exist; every row will read 'not run yet'")
  if config.copy_figures:
    copy_figures(runs_dir, figures_dir)
  output = out_dir / config.output
  text = reproduction.render(runs_dir, output_dir=output.parent, figures_dir=figures_dir)
  output.parent.mkdir(parents=True, exist_ok=True)
  present = reproduction.load_runs(runs_dir)
  if reproduction.marks_private(runs_dir):  # the owner's: where it goes is theirs to choose
    with io.open_private(output, narrow_directory=False) as f:
      f.write(text.encode("utf-8"))
  else:
    output.write_text(text)
  rows = reproduction.ROWS
  return {"output": str(output.resolve()),
          "rows": len(rows),
          "measured": sum(r.run in present for r in rows if r.run),
          "not_run_yet": sorted({r.run for r in rows if r.run and r.run not in present}),
          "cannot_run": sum(r.run is None for r in rows)}


def plan(config) -> dict:
  """``--dry_run``: which of the catalogue's runs ``runs_dir`` holds and which are missing."""
  check_config(config)
  present = reproduction.load_runs(pathlib.Path(config.runs_dir))
  names = [r.name for r in reproduction.RUNS]
  return {"runs_dir": config.runs_dir, "rows": len(reproduction.ROWS), "runs": len(names),
          "runs_present": sum(n in present for n in names),
          "runs_missing": [n for n in names if n not in present] or "none"}


def report(results: dict) -> None:
  """The rows measured and not, the runs still to make, and the report's path."""
  print(f"{results['rows']} rows: {results['measured']} measured, {results['cannot_run']} "
        f"that cannot run here (the report says why)")
  if results["not_run_yet"]:
    print("runs not made yet (their commands are in the report): "
          + ", ".join(results["not_run_yet"]))
  print(f"report: {results['output']}")
