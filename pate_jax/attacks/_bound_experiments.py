"""Beyond the attack paper: the reconstruction against the Cramér–Rao bound.

Like :mod:`pate_jax.attacks._experiments`, each function composes the pieces of
:mod:`pate_jax.attacks` from explicit arguments and returns a JSON-ready ``dict``;
every variant's error (a ``"method": "mle"`` variant is the maximum-likelihood
reconstruction) is reported next to the bound of :func:`pate_jax.attacks.cramer_rao`
and the queries it says an attacker needs for the errors :data:`TARGETS`:

* :func:`fresh_histograms` -- fresh Dirichlet histograms (the ``dirichlet`` setting's set).
* :func:`query_sweep` -- error against the number of queries, with the bound.

Monte Carlo repetition ``r`` uses ``keys[r]``; the errors are kept in float64.
"""

from __future__ import annotations

from typing import Any, Mapping

import jax
import numpy as np

from pate_jax.attacks import _evaluation as ev
from pate_jax.attacks import _histograms
from pate_jax.attacks import _privacy
from pate_jax.attacks._columns import (TARGETS, Variants, _bound, _bound_summary,
                                       _group_means, _target_columns)


def query_sweep(keys: jax.Array, histograms: Any, groups: Any, *, sigma: float,
                query_counts: Any, variants: Variants,
                num_teachers: float = _histograms.NUM_TEACHERS) -> dict[str, Any]:
  """Error against the number of GNMax queries ``M``, each variant and the bound.

  All ``(M, histogram)`` pairs are sampled in one call (``num_queries[:, None]``)
  and reconstructed in one call per run.

  Args:
    keys: ``[R]`` Monte Carlo keys.
    histograms: ``[B, C]``; groups: ``[B]`` labels (e.g. consensus group, ``α``).
    sigma: GNMax σ; query_counts: ``[K]`` values of ``M``.

  Returns:
    ``error_mean[variant]`` ``[K]`` and ``error_mean_by_group[variant][group]`` ``[K]``
    (means over runs and histograms), the bound's ``cramer_rao_error`` ``[K]``
    (all histograms, and ``_interior``: those not near the boundary), per group.
  """
  h, m = np.asarray(histograms), np.asarray(query_counts, np.int64)
  groups = np.asarray(groups)
  q_bar = ev.sample_frequencies(keys, h[None], sigma, m[:, None])              # [R, K, B, C]
  err = {v: e.error.astype(np.float64).mean(0)                                  # [K, B]
         for v, e in ev.evaluate_variants(q_bar, h[None], sigma, num_teachers,
                                          variants).items()}
  bound = _bound(h[None], sigma, m[:, None].astype(np.float64))               # [K, B]
  by_group = lambda x: _group_means(x, groups)
  interior = np.where(bound["near_boundary"], np.nan, bound["error"])
  return {"sigma": float(sigma), "num_queries": m, "variants": list(variants),
          "error_mean": {v: e.mean(1) for v, e in err.items()},
          "error_mean_by_group": {v: by_group(e) for v, e in err.items()},
          "cramer_rao_error": bound["error"].mean(1),
          "cramer_rao_error_by_group": by_group(bound["error"]),
          "cramer_rao_error_interior_by_group": by_group(interior),
          "cramer_rao_error_known_zeros_by_group": by_group(bound["error_known_zeros"]),
          "near_boundary_fraction": bound["near_boundary"].mean(1)}


def fresh_histograms(keys: jax.Array, histograms: Any, names: list[str], *, sigma: float,
                     num_queries: int, variants: Variants,
                     budget: Mapping[str, Any] | None = None, conversion: str = "improved",
                     num_teachers: float = _histograms.NUM_TEACHERS) -> dict[str, Any]:
  """Fresh histograms (e.g. :func:`pate_jax.attacks.dirichlet_histograms`), ``M`` GNMax
  queries each: every variant's error next to the Cramér–Rao bound.

  Args:
    keys: ``[R]`` Monte Carlo keys.
    histograms: ``[B, C]``; names: ``"group/index"`` (the group is the part before "/").
    sigma, num_queries: GNMax σ and ``M``.
    variants: reconstruction variants, headline first.
    budget: optional Confident-GNMax parameters ``{"threshold", "sigma_threshold",
      "sigma", "delta", "budget"}``: the queries it allows each histogram, next to
      the queries the bound says are needed (with ``⊥``, queries sent).

  Returns:
    ``{"summary": {variant: {...}, "cramer_rao": {...}}, "histograms": [rows]}``.
  """
  h, m = np.asarray(histograms), int(num_queries)
  groups = np.array([n.split("/")[0] for n in names])
  q_bar = ev.sample_frequencies(keys, h, sigma, m)                               # [R, B, C]
  evals = ev.evaluate_variants(q_bar, h, sigma, num_teachers, variants)
  err = {v: e.error.astype(np.float64) for v, e in evals.items()}                 # [R, B]
  bound = _bound(h, sigma, m)
  allowed = needed_conf = None
  if budget is not None:
    b = budget
    allowed = _privacy.budget_queries(
        h, budget=b["budget"], sigma=b["sigma"], threshold=b["threshold"],
        sigma_threshold=b["sigma_threshold"], delta=b["delta"], conversion=conversion).allowed
    needed_conf = _bound(h, b["sigma"], 1, threshold=b["threshold"],
                         sigma_threshold=b["sigma_threshold"])
  summary = {v: {"mean_error": float(e.mean()), "mean_error_by_group": ev.mean_by(e, groups),
                 "stop_status": ev.status_counts(evals[v].status),
                 "max_steps": int(evals[v].num_steps.max())} for v, e in err.items()}
  summary["cramer_rao"] = {**_bound_summary(bound),
                           "mean_error_by_group": ev.mean_by(bound["error"], groups),
                           "near_boundary_fraction_by_group": ev.mean_by(
                               bound["near_boundary"].astype(np.float64), groups)}
  summary["cramer_rao"]["mean_error_known_zeros_by_group"] = ev.mean_by(
      bound["error_known_zeros"], groups)
  for key in ("queries_for_error", "queries_for_error_known_zeros"):
    for i, t in enumerate(TARGETS):
      need = bound[key][:, i]
      summary["cramer_rao"][f"median_{key}_{t:g}_by_group"] = {
          str(g): float(np.median(need[groups == g])) for g in np.unique(groups)}
  if allowed is not None:
    summary["budget"] = {
        "params": dict(budget), "median_queries_allowed": float(np.median(allowed)),
        "median_queries_allowed_by_group": {str(g): float(np.median(allowed[groups == g]))
                                            for g in np.unique(groups)},
        **{f"fraction_affordable_{key}": {
            f"{t:g}": float(np.mean(needed_conf[key][:, i] <= allowed))
            for i, t in enumerate(TARGETS)}
           for key in ("queries_for_error", "queries_for_error_known_zeros")}}
  rows = [{"name": name, "group": groups[j], "votes": h[j],
           "error_mean": {v: float(e[:, j].mean()) for v, e in err.items()},
           "error_std": {v: float(e[:, j].std()) for v, e in err.items()},
           "cramer_rao_error": float(bound["error"][j]),
           "near_boundary": bool(bound["near_boundary"][j]),
           "cramer_rao_error_known_zeros": float(bound["error_known_zeros"][j]),
           "queries_for_error": _target_columns(bound, j),
           **({"queries_allowed": int(allowed[j]),
               "queries_for_error_confident": _target_columns(needed_conf, j)}
              if allowed is not None else {})} for j, name in enumerate(names)]
  return {"num_queries": m, "sigma": float(sigma), "variants": list(variants),
          "headline_variant": next(iter(variants)), "summary": summary, "histograms": rows}
