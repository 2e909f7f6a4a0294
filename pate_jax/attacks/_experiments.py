"""The attack paper's experiments, one function per setting, from explicit arguments.

Each function composes the pieces of :mod:`pate_jax.attacks` (sampling,
reconstruction, scoring, privacy cost, ledger replay) for the Table-1
histograms and returns a JSON-ready ``dict`` of numpy arrays and numbers (the
``results.json`` of :mod:`pate_jax.stages.attack`, which reads the config):

* :func:`fixed_queries` -- ``M`` GNMax queries per histogram and σ; error and
  privacy cost, their correlation (Section 4.2, Figures 5-7; paper: r = -0.20).
* :func:`budget_limited` -- as many queries as Confident-GNMax's budget allows
  (Section 4.3, Figure 4; paper: mean error 0.11 MNIST, 0.05 SVHN).
* :func:`edge_sigmas` -- one histogram, σ from nearly 0 to 400 (Appendix F, Figure 9).
* :func:`consistent_answers` -- fresh noise vs consistent answers (Section 5).
* :func:`produced_histograms` -- the same on the histograms of a PATE run (the main job),
  chosen by :func:`lowest_consensus`.

Beyond the paper: a variant with ``"method": "mle"`` is the
maximum-likelihood reconstruction (with Confident-GNMax it reads the ``⊥``
outcomes too), and every setting reports the Cramér–Rao bound of
:func:`pate_jax.attacks.cramer_rao` next to the errors, with the queries it says
an attacker needs for the errors :data:`TARGETS`; the settings on fresh histograms
and query counts are in :mod:`pate_jax.attacks._bound_experiments`, the shared
result columns in :mod:`pate_jax.attacks._columns`.

Reconstruction variants are ``{name: options of reconstruct_details}``, the
headline variant first. Monte Carlo repetition ``r`` uses ``keys[r]``; the
errors of the ``R`` repetitions are kept in float64, so their means and standard
deviations accumulate in float64.
"""

from __future__ import annotations

from typing import Any, Callable, Iterable, Mapping

import jax
import numpy as np

from pate_jax.attacks import _evaluation as ev
from pate_jax.attacks import _histograms
from pate_jax.attacks import _likelihood as lk
from pate_jax.attacks import _output_distribution as od
from pate_jax.attacks import _privacy
from pate_jax.attacks import _replay
from pate_jax.attacks._columns import (TARGETS, Variants, _bound, _bound_summary, _is_mle,
                                       _labels, _target_columns)


def fixed_queries(keys: jax.Array, histograms: Any, names: list[str], *, sigmas: Any,
                  num_queries: int, variants: Variants, privacy: Mapping[str, Mapping],
                  conversion: str = "improved",
                  num_teachers: float = _histograms.NUM_TEACHERS) -> dict[str, Any]:
  """Fixed-query attacker: errors ``[R, S, B]``, ε ``[S, B]`` and their Pearson correlation.

  Args:
    keys: ``[R]`` Monte Carlo keys.
    histograms: ``[B, C]`` with Table-1 ``names`` (``"mnist/M3"``).
    sigmas: ``[S]`` GNMax noise scales; num_queries: ``M``.
    variants: reconstruction variants, headline first.
    privacy: ``{dataset: {"threshold", "sigma_threshold", "delta"}}`` of the
      Confident-GNMax whose expected cost is reported (plain GNMax is also reported).
    conversion: RDP → (ε, δ) conversion.

  Returns:
    results with ``histograms`` (per-histogram rows), ``summary`` (per variant),
    ``correlation`` (of the headline error with each cost) and ε ranges.
  """
  hists, sig, m = np.asarray(histograms), np.asarray(sigmas, np.float64), num_queries
  datasets, groups, dataset_groups = _labels(names)
  q_bar = ev.sample_frequencies(keys, hists[None], sig[:, None], m)
  evals = ev.evaluate_variants(q_bar, hists[None], sig[:, None], num_teachers, variants)
  err = {v: e.error.astype(np.float64) for v, e in evals.items()}                # [R, S, B]
  eps_conf, order_conf, eps_gnmax = (np.zeros((sig.size, len(hists))) for _ in range(3))
  for ds in np.unique(datasets):
    sel, p = datasets == ds, privacy[ds]
    eps_conf[:, sel], order_conf[:, sel] = _privacy.repeated_query_epsilon(
        hists[sel], sig, m, delta=p["delta"], threshold=p["threshold"],
        sigma_threshold=p["sigma_threshold"], conversion=conversion)
    eps_gnmax[:, sel] = _privacy.repeated_query_epsilon(hists[sel], sig, m, delta=p["delta"],
                                                        conversion=conversion)[0]
  main = next(iter(variants))
  mean_err = err[main].mean(0)                                                   # [S, B]
  bound = _bound(hists[None], sig[:, None], m)                                   # [S, B]

  def corr(eps):
    return {"per_histogram_and_sigma": ev.pearson(mean_err, eps),
            "per_histogram_sigma_averaged": ev.pearson(mean_err.mean(0), eps.mean(0)),
            **{f"{ds}_per_histogram_and_sigma": ev.pearson(mean_err[:, datasets == ds],
                                                           eps[:, datasets == ds])
               for ds in _histograms.DATASETS}}

  return {
      "num_queries": m, "sigmas": sig, "variants": list(variants), "headline_variant": main,
      "histograms": [{
          "name": name, "dataset": datasets[b], "group": groups[b], "votes": hists[b],
          "num_queries": m, "error_mean": {v: e[:, :, b].mean(0) for v, e in err.items()},
          "error_std": {v: e[:, :, b].std(0) for v, e in err.items()},
          "epsilon_confident_gnmax": eps_conf[:, b], "best_order_confident": order_conf[:, b],
          "epsilon_gnmax": eps_gnmax[:, b], "cramer_rao_error": bound["error"][:, b],
          "near_boundary": bound["near_boundary"][:, b],
          "cramer_rao_error_known_zeros": bound["error_known_zeros"][:, b],
          "queries_for_error": _target_columns(bound, (slice(None), b))}
                     for b, name in enumerate(names)],
      "summary": {v: {
          "mean_error": float(err[v].mean()), "mean_error_by_sigma": err[v].mean((0, 2)),
          "mean_error_by_dataset": ev.mean_by(err[v], datasets),
          "mean_error_by_dataset_group": ev.mean_by(err[v], dataset_groups),
          "stop_status": ev.status_counts(e.status),
          "max_steps": int(e.num_steps.max())} for v, e in evals.items()},
      "correlation": {"confident_gnmax": corr(eps_conf), "gnmax": corr(eps_gnmax)},
      "cramer_rao": {**_bound_summary(bound),
                     "mean_error_by_sigma": bound["error"].mean(1),
                     "mean_error_by_dataset": ev.mean_by(bound["error"], datasets)},
      "epsilon_range_confident_gnmax": [float(eps_conf.min()), float(eps_conf.max())],
      "epsilon_range_gnmax": [float(eps_gnmax.min()), float(eps_gnmax.max())],
  }


def budget_limited(keys: jax.Array, ledger_keys: jax.Array | None, histograms: Any,
                   names: list[str], *, params: Mapping[str, Any], variants: Variants,
                   samplers: Iterable[str] = ("confident", "gnmax_all"),
                   conversion: str = "improved", max_queries: int = 10**7,
                   ledger_batch: int = 8192, num_teachers: float = _histograms.NUM_TEACHERS,
                   progress: Callable[..., Iterable] | None = None) -> dict[str, Any]:
  """Budget-limited attacker on one dataset's histograms (Figure 4).

  Each histogram is queried :func:`pate_jax.attacks.budget_queries` times (the
  expected Confident-GNMax cost reaches ``params["budget"]``). Sampler
  ``"confident"`` observes only the answered queries (the real mechanism); any
  other sampler answers every query with plain GNMax (what the paper's code
  simulates). With ``ledger_keys``, histogram ``j`` is also replayed against a
  realised-cost ledger keyed ``ledger_keys[j]``
  (:func:`pate_jax.attacks.replay_until_refused`).

  Args:
    keys: ``[R]`` Monte Carlo keys.
    ledger_keys: ``[B]`` ledger keys, or None for no replay.
    histograms: ``[B, C]`` with Table-1 ``names``.
    params: ``{"threshold", "sigma_threshold", "sigma", "delta", "budget"}``.
    variants, conversion, num_teachers: as in :func:`fixed_queries`.
    max_queries: search cap of the budget bisection.
    ledger_batch: repeats per ledger call.
    progress: optional wrapper of the ledger loop (e.g. a progress bar).

  An ``"mle"`` variant on the ``"confident"`` sampler reconstructs from all the
  queries sent, the ``⊥`` ones included (:func:`pate_jax.attacks.mle_frequencies`);
  the Cramér–Rao bound is that of the queries sent (with ``⊥`` for ``"confident"``).

  Returns:
    ``{"summary": ..., "histograms": [rows]}``; errors keyed ``f"{sampler}/{variant}"``,
    bounds and the queries they say are needed for :data:`TARGETS` keyed by sampler.
  """
  h, p = np.asarray(histograms), params
  _, groups, _ = _labels(names)
  bq = _privacy.budget_queries(h, budget=p["budget"], sigma=p["sigma"],
                               threshold=p["threshold"], sigma_threshold=p["sigma_threshold"],
                               delta=p["delta"], conversion=conversion, max_queries=max_queries)
  err, status, answered, bound = {}, {}, None, {}
  for smp in samplers:
    conf = smp == "confident"
    counts, n_ans = ev.sample_counts(
        keys, h, p["sigma"], bq.allowed, threshold=p["threshold"] if conf else None,
        sigma_threshold=p["sigma_threshold"] if conf else None)
    answered = np.asarray(n_ans) if conf else answered
    q_bar = ev.answer_frequencies(counts, n_ans)
    thresholds = ({"threshold": p["threshold"], "sigma_threshold": p["sigma_threshold"]}
                  if conf else {})
    bound[smp] = _bound(h, p["sigma"], bq.allowed, **thresholds)
    for v, options in variants.items():
      if _is_mle(options) and conf:   # The MLE reads the ⊥ outcomes too.
        e = ev.evaluate_runs(lk.mle_frequencies(counts, n_ans, bq.allowed), h, p["sigma"],
                             num_teachers, **options, **thresholds)
      else:
        e = ev.evaluate_runs(q_bar, h, p["sigma"], num_teachers, **options)
      err[f"{smp}/{v}"], status[f"{smp}/{v}"] = e.error.astype(np.float64), e.status
  ledger = []
  rows = range(len(h)) if ledger_keys is not None else ()
  for j in (progress(rows) if progress is not None and rows else rows):
    rep = _replay.replay_until_refused(
        ledger_keys[j], h[j], epsilon_max=p["budget"], delta=p["delta"],
        threshold=p["threshold"], sigma_threshold=p["sigma_threshold"], sigma=p["sigma"],
        conversion=conversion, batch_size=ledger_batch)
    e = ev.evaluate(ev.answer_frequencies(rep.counts, rep.num_answered), h[j], p["sigma"],
                    num_teachers, **next(iter(variants.values())))
    ledger.append({**rep._asdict(), "error": float(e.error)})
    del ledger[-1]["counts"]
  summary = {
      "params": dict(p), "mean_error": {k: float(e.mean()) for k, e in err.items()},
      "mean_error_by_group": {k: ev.mean_by(e, groups) for k, e in err.items()},
      "stop_status": {k: ev.status_counts(s) for k, s in status.items()},
      "queries_allowed": bq.allowed, "queries_allowed_classic_conversion": bq.allowed_classic,
      "mean_queries_allowed": float(bq.allowed.mean()),
      "cramer_rao": {smp: _bound_summary(b) for smp, b in bound.items()}}
  if ledger:
    summary["ledger_mean_error"] = float(np.mean([r["error"] for r in ledger]))
  rows = [{
      "name": names[j], "dataset": names[j].split("/")[0], "group": groups[j], "votes": h[j],
      "queries_allowed": int(bq.allowed[j]), "queries_allowed_classic":
      int(bq.allowed_classic[j]), "epsilon_at_queries": float(bq.epsilon[j]),
      "best_order": float(bq.order[j]), "pr_answered": float(bq.pr_answered[j]),
      "mean_answered": None if answered is None else float(answered[:, j].mean()),
      "error_mean": {k: float(e[:, j].mean()) for k, e in err.items()},
      "error_std": {k: float(e[:, j].std()) for k, e in err.items()},
      "cramer_rao_error": {smp: float(b["error"][j]) for smp, b in bound.items()},
      "near_boundary": {smp: bool(b["near_boundary"][j]) for smp, b in bound.items()},
      "cramer_rao_error_known_zeros": {smp: float(b["error_known_zeros"][j])
                                       for smp, b in bound.items()},
      "queries_for_error": {smp: _target_columns(b, j) for smp, b in bound.items()},
      **({"ledger": ledger[j]} if ledger else {})} for j in range(len(h))]
  return {"summary": summary, "histograms": rows}


def edge_sigmas(keys: jax.Array, histogram: Any, *, sigmas: Any, num_queries: int,
                variants: Variants,
                num_teachers: float = _histograms.NUM_TEACHERS) -> dict[str, Any]:
  """One histogram ``[C]`` attacked at every σ of ``[S]`` (Appendix F, Figure 9).

  Reports the error (mean and std over the ``R`` keys) next to two baselines
  (:func:`pate_jax.attacks.baseline_errors`) and ``Q(H)_top``, the probability
  of the top class, which tends to 1 as σ → 0 (then only the top class leaks).
  """
  h, sig = np.asarray(histogram), np.asarray(sigmas, np.float64)
  q_bar = ev.sample_frequencies(keys, h, sig, num_queries)
  evals = ev.evaluate_variants(q_bar, h, sig, num_teachers, variants)
  err = {v: e.error.astype(np.float64) for v, e in evals.items()}                   # [R, S]
  uniform, unanimous = (float(x) for x in ev.baseline_errors(h, num_teachers))
  q_true = np.asarray(od.output_distribution(h, sig, "accurate"))
  return {"votes": h, "num_queries": num_queries, "sigmas": sig,
          "error_mean": {v: e.mean(0) for v, e in err.items()},
          "error_std": {v: e.std(0) for v, e in err.items()},
          "stop_status": {v: ev.status_counts(e.status) for v, e in evals.items()},
          "baseline_uniform_error": uniform, "baseline_unanimous_top_class_error": unanimous,
          "q_top_probability": q_true[:, np.argmax(h)],
          "argmin_sigma": {v: float(sig[np.argmin(e.mean(0))]) for v, e in err.items()}}


def consistent_answers(keys: jax.Array, histograms: Any, names: list[str], *, sigmas: Any,
                       num_queries: int, variants: Variants,
                       num_teachers: float = _histograms.NUM_TEACHERS,
                       dataset: str | None = None) -> dict[str, Any]:
  """The same attacker against fresh noise and against consistent answers (Section 5).

  With consistent answers every repeat gets the same answer, so ``q̄`` is one-hot;
  the errors are compared with what the top class alone reveals: the same solver
  on a one-hot ``q̄`` on the true top class, and the guess "all ``N`` votes on the
  top class" (which is what the MLE returns from a one-hot ``q̄``: it maximises
  ``Q_k``). The Cramér–Rao bound is reported for ``n = M`` fresh answers and for the
  defense, whose ``M`` cached answers are one draw: information ``I(H)``, the
  bound at ``n = 1``, whatever ``M``. ``names`` are Table-1 names (``"mnist/M3"``), or
  free-form when ``dataset`` names the dataset of every histogram.
  """
  hists, sig, m = np.asarray(histograms), np.asarray(sigmas, np.float64), num_queries
  datasets = (_labels(names)[0] if dataset is None
              else np.full(len(names), dataset, dtype=object).astype(str))
  err, top_hit = {}, None
  for mode, consistent in (("fresh_noise", False), ("consistent", True)):
    q_bar = ev.sample_frequencies(keys, hists[None], sig[:, None], m, consistent=consistent)
    if consistent:
      top_hit = np.argmax(np.asarray(q_bar), -1) == np.argmax(hists, -1)
    for v, e in ev.evaluate_variants(q_bar, hists[None], sig[:, None], num_teachers,
                                     variants).items():
      err[f"{mode}/{v}"] = e.error.astype(np.float64)                           # [R, S, B]
  one_hot = np.eye(hists.shape[1], dtype=np.float32)[np.argmax(hists, -1)]
  q_top = np.broadcast_to(one_hot, (sig.size,) + one_hot.shape)
  err_top = {v: ev.evaluate(q_top, hists[None], sig[:, None], num_teachers, **o).error
             for v, o in variants.items()}                                        # [S, B]
  uniform, unanimous = ev.baseline_errors(hists, num_teachers)
  # Fresh noise: n i.i.d. answers carry n·I(H). Consistent answers: the n repeats
  # are one draw, so the information stays I(H) whatever n -- the bound at n = 1.
  bound = {"fresh_noise": _bound(hists[None], sig[:, None], m),
           "consistent": _bound(hists[None], sig[:, None], 1)}
  summary = {k: {"mean_error": float(e.mean()), "mean_error_by_sigma": e.mean((0, 2)),
                 "mean_error_by_dataset": ev.mean_by(e, datasets)} for k, e in err.items()}
  for v, e in err_top.items():
    summary[f"top_class_only/{v}"] = {"mean_error": float(e.mean()),
                                      "mean_error_by_sigma": e.mean(1),
                                      "mean_error_by_dataset": ev.mean_by(e, datasets)}
  summary["guess_all_votes_on_top_class"] = {"mean_error": float(unanimous.mean()),
                                             "mean_error_by_dataset": ev.mean_by(unanimous,
                                                                                 datasets)}
  summary["guess_uniform"] = {"mean_error": float(uniform.mean())}
  for mode, b in bound.items():
    summary[f"cramer_rao/{mode}"] = {**_bound_summary(b), "mean_error_by_sigma":
                                     b["error"].mean(1)}
  summary["consistent_answer_is_true_top_fraction"] = float(top_hit.mean())
  rows = [{"name": name, "votes": hists[b],
           **{f"error_{k}": e[:, :, b].mean(0) for k, e in err.items()},
           **{f"error_top_class_only/{v}": e[:, b] for v, e in err_top.items()},
           "error_guess_all_votes_on_top_class": float(unanimous[b]),
           **{f"cramer_rao_error_{k}": x["error"][:, b] for k, x in bound.items()}}
          for b, name in enumerate(names)]
  return {"num_queries": m, "sigmas": sig, "variants": list(variants), "histograms": rows,
          "summary": summary}


def lowest_consensus(votes: Any, num: int) -> np.ndarray:
  """Indices of the ``num`` rows of ``votes [Q, C]`` with the fewest votes on their top
  class (ties by index): the histograms an attacker learns most from (attack paper,
  Section 2: low-consensus queries expose minorities)."""
  votes = np.asarray(votes)
  if not 0 < num <= votes.shape[0]:
    raise ValueError(f"num_histograms must be in [1, {votes.shape[0]}] (the queries "
                     f"labelled); got {num}")
  return np.argsort(votes.max(-1), kind="stable")[:num]


def produced_histograms(keys: jax.Array, ledger_key: jax.Array, votes: Any,
                        query_index: Any, *, sigma: float, num_queries: int,
                        variants: Variants, delta: float, dataset: str,
                        conversion: str = "improved") -> dict[str, Any]:
  """The attack on vote histograms a PATE run produced (the main job), with and without
  the consistent-answer defense.

  The attacker repeats each of the run's queries ``votes [B, C]`` (rows
  ``query_index`` of its public pool) ``num_queries`` times against GNMax with the
  run's ``sigma``: with fresh noise per repeat (:func:`consistent_answers`' first
  mode) the answer frequencies reveal the histogram, with consistent answers (the
  defense: noise keyed by the query) every repeat gets the same answer. Adds the ε
  that the ``M`` fresh repeats of each query cost (:func:`repeated_query_epsilon`: what
  a ledger would have to allow) and a replay against the ledger in both modes (the
  consistent one charges the repeats once).
  """
  hists = np.asarray(votes)
  index = np.asarray(query_index)
  names = [f"query {int(i)}" for i in index]
  num_teachers = float(hists.sum(-1).max())
  results = consistent_answers(keys, hists, names, sigmas=[float(sigma)],
                               num_queries=num_queries, variants=variants,
                               num_teachers=num_teachers, dataset=dataset)
  eps, order = _privacy.repeated_query_epsilon(hists, [float(sigma)], num_queries,
                                               delta=delta, conversion=conversion)
  for b, row in enumerate(results["histograms"]):
    row["query_index"] = int(index[b])
    row["epsilon_of_fresh_repeats"] = float(eps[0, b])
  results.update(
      dataset=dataset, sigma=float(sigma), delta=float(delta), num_teachers=num_teachers,
      epsilon_of_fresh_repeats={"per_histogram": eps[0], "order": order[0],
                                "conversion": conversion},
      ledger_check=[_replay.replay_consistency(ledger_key, hists[0], sigma=float(sigma),
                                               num_queries=num_queries, delta=delta,
                                               consistent=c) for c in (False, True)])
  return results
