"""The result columns shared by the attack experiments.

The Cramér–Rao bound's columns for a batch of histograms (:func:`_bound`: error,
near-boundary flag, the queries it says are needed for the errors :data:`TARGETS`,
with and without the zero classes known) and their summaries, per-group means, and
the Table-1 labels of histogram names. ``Variants`` is the type of the reconstruction
variants, ``{name: options of reconstruct_details}``, headline first.
"""

from __future__ import annotations

from typing import Any, Mapping

import numpy as np

from pate_jax.attacks import _histograms
from pate_jax.attacks import _likelihood as lk

Variants = Mapping[str, Mapping[str, Any]]

TARGETS = (0.05, 0.10)   # errors for which the bound's query counts are reported


def _is_mle(options: Mapping[str, Any]) -> bool:
  return options.get("method") == "mle"


def _bound(histograms, sigma, num_queries, **thresholds) -> dict[str, Any]:
  """Cramér–Rao columns (numpy) for histograms ``[..., C]``: error, flag, queries needed."""
  cr = lk.cramer_rao(histograms, sigma, num_queries, targets=TARGETS, **thresholds)
  return {"error": np.asarray(cr.error), "near_boundary": np.asarray(cr.near_boundary),
          "queries_for_error": np.asarray(cr.queries_for_error),
          "error_known_zeros": np.asarray(cr.error_known_zeros),
          "queries_for_error_known_zeros": np.asarray(cr.queries_for_error_known_zeros)}


def _group_means(x: np.ndarray, groups: np.ndarray) -> dict[str, np.ndarray]:
  """``{group: nanmean(x[..., groups == g], -1)}`` (NaN where a group is all NaN)."""
  out = {}
  for g in groups[np.sort(np.unique(groups, return_index=True)[1])]:
    sel = x[..., groups == g]
    n = np.sum(np.isfinite(sel), -1)
    out[str(g)] = np.where(n > 0, np.nansum(sel, -1) / np.maximum(n, 1), np.nan)
  return out


def _bound_summary(bound: Mapping[str, np.ndarray], axis=None) -> dict[str, Any]:
  err, flag = bound["error"], bound["near_boundary"]
  interior = np.where(flag, np.nan, err)
  return {"mean_error": np.mean(err, axis=axis),
          "mean_error_interior": (np.nanmean(interior, axis=axis) if np.any(~flag)
                                  else float("nan")),
          "near_boundary_fraction": np.mean(flag, axis=axis),
          "mean_error_known_zeros": np.mean(bound["error_known_zeros"], axis=axis)}


def _targets(queries: np.ndarray, suffix: str = "") -> dict[str, Any]:
  """``{"0.05": queries[..., 0], "0.1": queries[..., 1]}`` (keys + ``suffix``)."""
  return {f"{t:g}{suffix}": queries[..., i] for i, t in enumerate(TARGETS)}


def _target_columns(bound: Mapping[str, np.ndarray], index) -> dict[str, Any]:
  """Queries needed for :data:`TARGETS`, plain bound and with the zero classes known."""
  return {**_targets(bound["queries_for_error"][index]),
          **_targets(bound["queries_for_error_known_zeros"][index], "_known_zeros")}


def _labels(names):
  datasets, groups, _ = _histograms.table1_labels(names)
  return datasets, groups, np.char.add(np.char.add(datasets, "/"), groups)
