"""What the aggregate stage reports: its ε entries, ε vs queries, results and headline.

Owns the ε reports under each accounting of a mechanism (:func:`epsilon_reports`, with
the grid-edge flags of :func:`flag_grid_edges`), the privacy curve (:func:`privacy_curve`),
the stage's results dict in a publishable and a private part (:func:`aggregate_results`,
:func:`private_part`, :func:`split_epsilon`, :func:`config_record`) and its readable lines
(:func:`aggregate_headline`).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from pate_jax import aggregation
from pate_jax import experiment
from pate_jax import ledger as ledger_lib
from pate_jax import mechanisms
from pate_jax import rng


def flag_grid_edges(report: dict[str, dict], mechanism: Any, orders: Any,
                    max_moment: int) -> list[str]:
  """Adds ``grid`` ([first, last] moment or order searched) and ``best_at_grid_edge`` to
  every entry of an :func:`pate_jax.mechanisms.epsilon_report` that names its best order;
  returns the names whose best sits at the end of its grid (ε would be smaller on a wider
  grid; the 2017 moments start at 1, so only their last moment counts as an edge)."""
  grid = np.asarray(mechanisms.make_accountant(mechanism, orders, "improved",
                                               max_moment).orders, np.float64)
  lo, hi = float(grid.min()), float(grid.max())
  edges = []
  for name, entry in report.items():
    best = entry.get("best_moment", entry.get("best_order"))
    if best is None:
      continue
    at_edge = bool(best == hi or ("best_order" in entry and best == lo))
    entry["grid"] = [lo, hi]
    entry["best_at_grid_edge"] = at_edge
    if at_edge:
      edges.append(name)
  return edges


def _tight(mechanism: Any, orders: Any, max_moment: int, tight_max_moment: int) -> bool:
  """Whether a tight report (moments 1..tight_max_moment) is made: moments accountant on
  its default grid only, and a longer grid than ``max_moment``'s."""
  return (not mechanism.accountant_kind.takes_orders and orders is None
          and tight_max_moment > max_moment)


def epsilon_reports(mechanism: Any, params: dict, votes: np.ndarray, answered: np.ndarray,
                    charged: np.ndarray, orders: Any, *, delta: float, max_moment: int,
                    tight_max_moment: int = 0) -> dict[str, Any]:
  """``epsilon`` (moments 1..``max_moment``: the 2017 code's convention, comparable with
  the paper), ``epsilon_tight`` (moments 1..``tight_max_moment``; moments accountant on
  its default grid only) and ``epsilon_at_grid_edge`` (names whose best moment/order is
  at the end of its grid, in either report)."""
  max_moment, tight = int(max_moment), int(tight_max_moment or 0)
  kwargs = {"delta": delta, "orders": orders}
  out: dict[str, Any] = {"epsilon": mechanisms.epsilon_report(
      mechanism, params, votes, answered, charged, max_moment=max_moment, **kwargs)}
  edges = flag_grid_edges(out["epsilon"], mechanism, orders, max_moment)
  if _tight(mechanism, orders, max_moment, tight):
    out["epsilon_tight"] = mechanisms.epsilon_report(
        mechanism, params, votes, answered, charged, max_moment=tight, **kwargs)
    edges += [f"epsilon_tight.{n}" for n in
              flag_grid_edges(out["epsilon_tight"], mechanism, orders, tight)]
    out["epsilon_convention"] = (
        f"epsilon: moments 1..{max_moment} (the 2017 code's convention, for "
        f"comparison with the paper); epsilon_tight: moments 1..{tight}")
  out["epsilon_at_grid_edge"] = edges
  return out


def privacy_curve(mechanism: Any, params: dict, votes: np.ndarray, answered: np.ndarray,
                  charged: np.ndarray, orders: Any, *, delta: float, max_moment: int,
                  tight_max_moment: int = 0, points: int = 50) -> dict[str, Any]:
  """ε after the first k charged queries (at most ``points`` values of k) under each
  accounting of :func:`epsilon_reports` (data-dependent on both moment grids,
  data-independent, the mechanism's baselines), against the queries answered so far.
  Empty when nothing was charged."""
  max_moment, tight = int(max_moment), int(tight_max_moment or 0)
  charged = np.asarray(charged, bool)
  votes, answered = np.asarray(votes)[charged], np.asarray(answered, bool)[charged]
  n = int(votes.shape[0])
  if not n:
    return {}
  ks = np.unique(np.linspace(1, n, min(points, n)).round().astype(int))
  curve: dict[str, Any] = {"delta": float(delta), "queries_charged": ks.tolist(),
                           "queries_answered": np.cumsum(answered)[ks - 1].tolist(),
                           "epsilon": {}}
  # Costed on padded rows, as epsilon_report and a ledger's cost check: their programs.
  padded, padded_answered = mechanisms.padded_queries(votes, answered)
  grids = [("", max_moment)]
  if _tight(mechanism, orders, max_moment, tight):
    grids.append((f", moments to {tight}", tight))
  for dd in (True, False):
    for suffix, moment in grids if dd else grids[:1]:
      empty = mechanisms.make_accountant(mechanism, orders, "improved", moment)
      cost = np.asarray(mechanism.cost(padded, padded_answered, params, empty.orders, dd))[:n]
      name = ("data-dependent" if dd else "data-independent") + (
          "" if mechanism.accountant_kind.takes_orders else f", moments to {moment}" + (
              "" if suffix else " (2017 code)"))
      # Every prefix at once: the accountant converts a [len(ks), K] cost row by row.
      totals = np.cumsum(np.asarray(cost, np.float64), axis=0)[ks - 1]
      prefixes = dataclasses.replace(empty, cost=totals)
      curve["epsilon"][name] = np.asarray(prefixes.epsilon(delta)[0], np.float64).tolist()
  if mechanism.baselines is not None:
    for a in curve["queries_answered"]:
      for name, eps in mechanism.baselines(int(a), params, delta).items():
        curve["epsilon"].setdefault(name.replace("_", " "), []).append(float(eps))
  return curve


def config_record(config: Any, mechanism: Any) -> dict[str, Any]:
  """The config as results.json records it: other mechanisms' noise parameters (GNMax's
  ``sigma``/``threshold`` for an LNMax run) are left out."""
  record = experiment.to_jsonable(config)
  others = {p for m in mechanisms.REGISTRY.values() for p in m.param_names}
  for name in others - set(mechanism.param_names):
    record.pop(name, None)
  return record


PRIVATE_NOTE = ("for the data owner only: functions of the private data (votes, teachers); "
                "never publish them, nor a figure or line drawn from them")
"""The note of every ``private`` part."""


def private_part(**values: Any) -> dict[str, Any]:
  """A results entry marked private: ``{"note": PRIVATE_NOTE, **values}``."""
  return {"note": PRIVATE_NOTE, **values}


def split_epsilon(report: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
  """``(data-independent entries, data-dependent entries)`` of an ε report."""
  public = {k: e for k, e in report.items() if "data_dependent" not in k}
  return public, {k: e for k, e in report.items() if "data_dependent" in k}


def aggregate_results(data: dict[str, Any], rows: Any, out: Any, state: dict[str, Any],
                      release: dict[str, Any] | None, budget: Any, config: Any, *,
                      num_asked_now: int) -> dict[str, Any]:
  """The aggregate stage's results: a publishable part and a ``private`` one.

  Publishable: the counts, the released labels' accuracy on the public pool's true
  labels, the data-independent ε of the labels, the budget's ε (labels and releases, the
  bound the budget is spent on), the released ε and its fixed parameters, the noise
  source. Private: the plurality accuracy, the data-dependent ε, the un-noised release,
  the budget's data-dependent ε, ε vs queries.

  Args:
    data: :func:`pate_jax.votes.load_votes`.
    rows: int ``[N]`` the rows of votes.npz asked (:func:`pate_jax.votes.query_rows`).
    out: the budget's :class:`pate_jax.ledger.BatchResult` for those rows.
    state: :meth:`pate_jax.budget.TeachersBudget.state`.
    release: :meth:`pate_jax.budget.TeachersBudget.release` (``None``: none drawn).
    budget: the :class:`pate_jax.budget.TeachersBudget`.
    config: the stage's config (δ, the moment grids, orders).
    num_asked_now: rows new to the budget in this call (not answered before, by this
      workdir's killed run or any other: ``out.repeated``).
  """
  labels, status = np.asarray(out.labels), np.asarray(out.status)
  n = int(labels.shape[0])
  rows = np.asarray(rows)
  votes, true_labels = np.asarray(data["votes"][rows]), np.asarray(data["labels"][rows])
  answered = status == ledger_lib.Status.ANSWERED
  charged = answered | (status == ledger_lib.Status.NOT_CONFIDENT)
  m, params = budget.mechanism, budget.params
  orders = budget.aggregator_kwargs["orders"]  # The orders the budget composes at.
  grids = {"delta": config.delta, "max_moment": int(config.max_moment),
           "tight_max_moment": int(config.get("tight_max_moment") or 0)}
  reports = epsilon_reports(m, params, votes, answered, charged, orders, **grids)
  sampler = sampler_part(budget, np.union1d(rows, state["rows"]).size, votes,
                         int(state["release_count"]))
  public_eps, private_eps = split_epsilon(reports["epsilon"])
  public_tight, private_tight = split_epsilon(reports.get("epsilon_tight") or {})
  edges = reports["epsilon_at_grid_edge"]
  record = state["record"]
  noise = budget.research_seed
  where = ("the teachers' directory (ledger.npz beside votes.npz)" if noise is None else
           "this work directory (research_ledger.npz: research noise)")
  results: dict[str, Any] = {
      "dataset": data["dataset"], "num_teachers": data["num_teachers"], "mechanism": m.name,
      "noise": params, "noise_source": rng.noise_record(noise), "num_queries": n,
      "query_selection": str(config.get("query_selection", "first")),
      "labelled_per_class": np.bincount(true_labels[answered],
                                        minlength=data["votes"].shape[1]).tolist(),
      "num_asked_now": int(num_asked_now), "num_answered": int(answered.sum()),
      "num_refused_budget": int((status == ledger_lib.Status.REFUSED_BUDGET).sum()),
      "num_not_confident": int((status == ledger_lib.Status.NOT_CONFIDENT).sum()),
      "delta": float(config.delta),
      "label_accuracy_answered": (float(np.mean(labels[answered] == true_labels[answered]))
                                  if answered.any() else None),
      "label_accuracy_overall": float(np.mean(labels == true_labels)),
      "epsilon": public_eps,
      "epsilon_at_grid_edge": [e for e in edges if "data_dependent" not in e],
      "epsilon_release": (release["public"] if release else _no_release(budget)),
      "ledger": {"epsilon": float(record["ledger_epsilon"]),
                 "best_order": float(record["ledger_best_order"]),
                 "epsilon_max": float(record["ledger_epsilon_max"]),
                 "accounting": "data-independent bound of the labels and the releases",
                 "num_charged": int(len(state["rows"])),
                 "num_answered": int(np.sum(state["status"] == ledger_lib.Status.ANSWERED)),
                 "releases": int(state["release_count"]), "kept_in": where,
                 "budgets_on_private_data": budget.budgets_on_data(),
                 **sampler},
  }
  if public_tight:
    results["epsilon_tight"] = public_tight
    results["epsilon_convention"] = reports["epsilon_convention"]
  private = private_part(
      plurality_accuracy=float(np.mean(np.asarray(aggregation.plurality(votes))
                                       == true_labels)),
      epsilon=private_eps,
      epsilon_at_grid_edge=[e for e in edges if "data_dependent" in e],
      epsilon_release=None if not release else release["private"],
      ledger={"epsilon_data_dependent": float(record["ledger_private_epsilon"]),
              "best_order": float(record["ledger_private_best_order"])})
  if private_tight:
    private["epsilon_tight"] = private_tight
  if charged.any():
    private["privacy_curve"] = privacy_curve(m, params, votes, answered, charged, orders,
                                             **grids)
  results["private"] = private
  return results


def sampler_part(budget: Any, num_asked: int, votes: Any, num_releases: int) -> dict[str, float]:
  """The budget's δ and what the float64 noise of its answers and of its
  ``num_releases`` releases of ε add to it (:func:`pate_jax.mechanisms.sampler_delta`,
  :func:`pate_jax.mechanisms.release_sampler_delta`): for ``num_asked``, at least the rows
  asked of it so far (each drawn at most once), at its ε_max where finite (a research
  budget's: the ε spent; a release is clipped to the budget's ε when drawn). All public:
  counts, settings and the data-independent ε."""
  kw = budget.aggregator_kwargs
  cap = float(kw["epsilon_max"])
  eps = cap if np.isfinite(cap) else float(budget.epsilon)
  votes = np.asarray(votes)
  answers = mechanisms.sampler_delta(budget.mechanism, budget.params, int(num_asked),
                                     votes.shape[-1], int(votes[0].sum()) if votes.size else 0,
                                     eps)
  releases = mechanisms.release_sampler_delta(num_releases, eps, eps)
  return {"delta": float(kw["delta"]), "sampler_delta": answers + releases,
          "sampler_delta_releases": releases}


def _no_release(budget: Any) -> str:
  """Why there is no released ε."""
  if budget.release_spec is None:
    return (f"{budget.mechanism.name}: no smooth-sensitivity release (LNMax has none; or "
            "data-independent accounting): publish the data-independent ε")
  return ("no release: nothing charged, or the budget has no room for a new release after "
          "new answers")


def aggregate_headline(r: dict[str, Any]) -> list[str]:
  """Readable lines of an aggregate results dict (also the main job's): publishable lines
  first; every line with a private value starts with ``private``."""
  acc_answered = r["label_accuracy_answered"]
  lines = []
  if r["noise_source"]["public"]:
    lines.append(f"NOTE: {r['noise_source']['note']}")
  lines.append(f"{r['mechanism']} {r['noise']}: {r['num_answered']} of {r['num_queries']} "
               "queries answered, label accuracy "
               + (f"{acc_answered:.1%}" if acc_answered is not None else "n/a"))
  led = r["ledger"]
  if r["num_queries"] and not r["num_answered"] and not led["num_charged"]:
    lines.append(f"  refused: every query (ε_max {_g(led['epsilon_max'])} leaves no room for "
                 "the first answer's data-independent cost)")
  # These labels were drawn by the samplers the budget charges: their δ carries the term.
  lines += _epsilon_lines(r["epsilon"], r.get("epsilon_tight"), "", led.get("sampler_delta"))
  if r.get("epsilon_tight"):
    lines.append(f"  ({r['epsilon_convention']})")
  release = r.get("epsilon_release")
  if isinstance(release, str):
    lines.append(f"  released ε: {release}")
  elif isinstance(release, dict):
    lines.append(f"  ε released with smooth sensitivity = {release['epsilon_released']:.3g} "
                 f"at δ = {delta_text(release['delta'], led.get('sampler_delta'))} "
                 f"(release {release['release']}; order {_g(release['order'])}, β "
                 f"{_g(release['beta'])}, σ_ss {_g(release['sigma_ss'])} fixed in the config; "
                 f"{release['conversion']} conversion)")
  # The ε lines above are this run's labels alone; the budget bounds all it released.
  sampler = ("" if led.get("sampler_delta") is None else
             f" at δ = {delta_text(led['delta'], led['sampler_delta'])} (the float64 noise "
             "samplers' error, answers and releases)")
  lines.append(f"  budget: ε {led['epsilon']:.3g} of ε_max {_g(led['epsilon_max'])} spent"
               f"{sampler}, the bound on everything this budget released "
               f"({led['num_charged']} queries charged, {led['releases']} release(s); "
               f"kept in {led['kept_in']})")
  note = budgets_note(led.get("budgets_on_private_data"))
  if note:
    lines.append(f"  {note}")
  p = r["private"]
  lines.append(f"{experiment.PRIVATE_MARK}plurality accuracy {p['plurality_accuracy']:.1%}")
  lines += _epsilon_lines(p["epsilon"], p.get("epsilon_tight"), experiment.PRIVATE_MARK,
                          led.get("sampler_delta"))
  return lines


def delta_text(delta: float, sampler_delta: float | None = None) -> str:
  """How a report writes the δ of an (ε, δ) pair: the budget's δ, plus what the float64
  noise samplers add to it (:func:`sampler_part`) where known (``"1e-05 + 2.0e-10"``)."""
  return f"{delta:g}" + ("" if sampler_delta is None else f" + {sampler_delta:.1e}")


def _epsilon_lines(report: dict[str, Any], tight_report: dict[str, Any] | None,
                   prefix: str, sampler_delta: float | None) -> list[str]:
  lines = []
  for name, e in report.items():
    best = e.get("best_moment", e.get("best_order"))
    tight = (tight_report or {}).get(name)
    where = "" if best is None else f" (best {'moment' if 'best_moment' in e else 'order'} {best:g}"
    if best is not None:
      where += ", AT THE GRID'S END)" if e.get("best_at_grid_edge") else ")"
    if tight is not None and tight["epsilon"] != e["epsilon"]:
      where += (f"; tight {tight['epsilon']:.3g} (moments to {tight['grid'][1]:g}, best "
                f"{tight['best_moment']:g})")
    lines.append(f"  {prefix}ε {name} = {e['epsilon']:.3g}{where} at δ = "
                 f"{delta_text(e['delta'], sampler_delta)}")
  return lines


def budgets_note(count: int | str | None) -> str | None:
  """The line every report prints where more than one budget is spent on the private data
  (``count`` from :meth:`pate_jax.budget.TeachersBudget.budgets_on_data`) or the count is
  unknown (a string that says why), else ``None``."""
  if isinstance(count, str):
    return f"NOTE: budgets on the private data: {count}"
  if count is None or count <= 1:
    return None
  return (f"NOTE: {count} budgets are spent on the private data these teachers were trained "
          "on (each opened with another_budget in its run's config): their ε add up")


def _g(x: Any) -> str:
  """``x`` in ``%.3g``; a string (JSON's ``"inf"``) as it is."""
  return x if isinstance(x, str) else f"{x:.3g}"
