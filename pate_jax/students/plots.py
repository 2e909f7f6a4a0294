"""Accuracy-vs-queries and ε-vs-queries plots of student runs (the plot_students stage,
pate_jax/stages/students_plot.py; experiments/plot_students.py)."""

from __future__ import annotations

import pathlib
from typing import Any

from pate_jax import io
from pate_jax.students._data import UNNOISED_LABELS

# The ε a point is plotted with: a publishable one -- the ε released with smooth
# sensitivity (GNMax family), else the data-independent bound (the 2017 moments
# accountant for LNMax, RDP with the improved conversion for the GNMax family). The
# data-dependent ε is private and never plotted.
_EPSILON_KEYS = ("moments_data_independent", "rdp_data_independent_improved")


def point(results: dict[str, Any], run: str, disclosure: str | None = None) -> dict[str, Any]:
  """One plotted point from a train_student ``results.json`` (``results``, and the file's
  ``disclosure``). It is private -- the data owner's only -- where the student learnt the
  teachers' un-noised labels, where the file is private as a whole, or where its labels'
  noise came from a research seed (files written before such runs were marked, and those
  written before the noise source was recorded: every run's noise was seeded then)."""
  eps = results.get("epsilon")
  release = results.get("epsilon_release")
  value = None
  if isinstance(release, dict):
    value = float(release["epsilon_released"])
  elif isinstance(eps, dict):
    for k in _EPSILON_KEYS:
      if k in eps:
        value = float(eps[k]["epsilon"])
        break
  label = results["student"]
  if results.get("active_rounds"):
    label = "active learning"
  elif results.get("labels") == "plurality":
    label += ", plurality labels (no noise: private)"
  elif results.get("labels") == "probabilities":
    label += f", T = {results['temperature']:g} probabilities (no noise: private)"
  # On the teachers' un-noised labels: no privacy guarantee; with a research seed's noise:
  # the labels bound the votes beyond any ε. Either way, the data owner's only.
  # A file that records neither its disclosure nor its labels' noise source was written
  # before they were recorded, when every run's noise came from a seed: research noise too.
  unrecorded = (disclosure is None and "noise_source" not in results
                and results.get("labels", "noisy") in ("noisy", "true_answered"))
  research = bool((results.get("noise_source") or {}).get("public")) or unrecorded
  private = (results.get("labels") in UNNOISED_LABELS or research
             or (disclosure is not None and not disclosure.startswith("publishable")))
  if research:
    label += ", research noise (private)"
  sampler = (results.get("ledger") or {}).get("sampler_delta")
  return {"label": label, "run": run, "queries": int(results["num_queries"]),
          "accuracy": float(results["eval_accuracy"]), "epsilon": value,
          "delta": None if results.get("delta") is None else float(results["delta"]),
          "sampler_delta": None if sampler is None else float(sampler),
          "epochs": results.get("epochs"), "private": private}


def delta_label(points: list[dict[str, Any]]) -> str:
  """The δ of the points' ε (:func:`point`), for an axis: the one δ they share (files
  written before it was recorded: 1e-5, the students' only δ then), else "per point",
  with the float64 samplers' term where a point's ledger records one."""
  deltas = {1e-5 if p.get("delta") is None else p["delta"]
            for p in points if p["epsilon"] is not None}
  text = f"δ = {deltas.pop():g}" if len(deltas) == 1 else "δ per point (students.json)"
  if any(p.get("sampler_delta") for p in points if p["epsilon"] is not None):
    text += " + the samplers' term"
  return text


def plot_students(points: list[dict[str, Any]], path: str | pathlib.Path) -> None:
  """Writes ``points`` (:func:`point`) to the PNG ``path``: held-out accuracy vs queries, one
  line per label; publishable ε vs queries for the labels whose every point has one."""
  from matplotlib.figure import Figure  # pylint: disable=g-import-not-at-top
  fig = Figure(figsize=(10, 3.8))
  ax_acc, ax_eps = fig.subplots(1, 2)
  for label in sorted({p["label"] for p in points}):
    pts = sorted((p for p in points if p["label"] == label), key=lambda p: p["queries"])
    q = [p["queries"] for p in pts]
    ax_acc.plot(q, [100 * p["accuracy"] for p in pts], "o-", label=label)
    if all(p["epsilon"] is not None for p in pts):
      ax_eps.plot(q, [p["epsilon"] for p in pts], "o-", label=label)
  ax_acc.set_xscale("log")
  ax_acc.set_xlabel("queries to the teachers")
  ax_acc.set_ylabel("held-out accuracy (%)")
  ax_acc.legend(fontsize=8)
  ax_eps.set_xscale("log")
  ax_eps.set_xlabel("queries to the teachers")
  ax_eps.set_ylabel(f"publishable ε (released, else data-independent; {delta_label(points)})",
                    fontsize=8)
  ax_eps.legend(fontsize=8)
  if any(p.get("private") for p in points):
    fig.suptitle("PRIVATE (data owner only): students on the teachers' un-noised labels "
                 "or on research-noise labels", fontsize=9)
  fig.tight_layout()
  io.save_figure(fig, path, dpi=120)
