"""What the stages report: ε entries, privacy curves, results dicts, headlines and plots.

The aggregate stage (``experiments/aggregate.py``) reports the ε of the charged queries
under each accounting of its mechanism (:func:`epsilon_reports`: ``epsilon`` on moments
1..``max_moment`` = the 2017 code's convention, ``epsilon_tight`` on moments
1..``tight_max_moment``, every entry flagged when its best moment/order is at the end of
its grid, :func:`flag_grid_edges`), the publishable ε (:func:`publishable_epsilon`), ε vs
queries answered (:func:`privacy_curve`, :func:`plot_privacy`) and a readable summary
(:func:`aggregate_headline`). The teachers stage (``experiments/train_teachers.py``)
writes a histogram of the normalized vote gap (:func:`plot_gap`) and one summary line
(:func:`teachers_headline`). The main job (``experiments/run_pate.py``) writes its
``report.md`` with :func:`main_job_markdown` (the attack's record: :func:`attack_summary`).

Plain NumPy and Python on results already computed; nothing here is jitted.
"""

from __future__ import annotations

import dataclasses
import pathlib
from typing import Any

import numpy as np

from pate_jax import aggregation
from pate_jax import experiment
from pate_jax import ledger as ledger_lib
from pate_jax import mechanisms
from pate_jax import rng
from pate_jax import votes as votes_lib

# --------------------------------------------------------------------- aggregate stage


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
  return (mechanism.accountant == "moments" and orders is None
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
  grids = [("", max_moment)]
  if _tight(mechanism, orders, max_moment, tight):
    grids.append((f", moments to {tight}", tight))
  for dd in (True, False):
    for suffix, moment in grids if dd else grids[:1]:
      empty = mechanisms.make_accountant(mechanism, orders, "improved", moment)
      cost = mechanism.cost(votes, answered, params, empty.orders, dd)
      name = ("data-dependent" if dd else "data-independent") + (
          f", moments to {moment}" if mechanism.accountant == "moments" else "") + (
          "" if suffix or mechanism.accountant != "moments" else " (2017 code)")
      # Every prefix at once: the accountant converts a [len(ks), K] cost row by row.
      totals = np.cumsum(np.asarray(cost, np.float64), axis=0)[ks - 1]
      prefixes = dataclasses.replace(empty, cost=totals)
      curve["epsilon"][name] = np.asarray(prefixes.epsilon(delta)[0], np.float64).tolist()
  if mechanism.baselines is not None:
    for a in curve["queries_answered"]:
      for name, eps in mechanism.baselines(int(a), params, delta).items():
        curve["epsilon"].setdefault(name.replace("_", " "), []).append(float(eps))
  return curve


def plot_privacy(curve: dict[str, Any], title: str, path: str | pathlib.Path) -> pathlib.Path:
  """ε vs queries answered, one line per accounting (a small PNG); ``curve`` from
  :func:`privacy_curve`."""
  plt = _pyplot()
  fig, ax = plt.subplots(figsize=(5, 3.4))
  for name, eps in curve["epsilon"].items():
    ax.plot(curve["queries_answered"], eps, label=name, lw=1.5)
  ax.set_xlabel("queries answered")
  ax.set_ylabel(f"ε at δ = {curve['delta']:g}")
  ax.set_title(title, fontsize=9)
  ax.grid(alpha=0.3)
  ax.legend(fontsize=7, frameon=False)
  fig.tight_layout()
  fig.savefig(path, dpi=100)
  plt.close(fig)
  return pathlib.Path(path)


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


def aggregate_results(data: dict[str, Any], out: Any, state: dict[str, Any],
                      release: dict[str, Any] | None, budget: Any, config: Any, *,
                      num_asked_now: int) -> dict[str, Any]:
  """The aggregate stage's results: a publishable part and a ``private`` one.

  Publishable: the counts, the released labels' accuracy on the public pool's true
  labels, the data-independent ε of the labels, the budget's ε (labels and releases, the
  bound the budget is spent on), the released ε and its fixed parameters, the noise
  source. Private: the plurality accuracy, the data-dependent ε, the un-noised release,
  the budget's data-dependent ε, ε vs queries.

  Args:
    data: :func:`pate_jax.votes.load_votes` (its first ``N`` rows were asked).
    out: the budget's :class:`pate_jax.ledger.BatchResult` for those rows.
    state: :meth:`pate_jax.budget.TeachersBudget.state`.
    release: :meth:`pate_jax.budget.TeachersBudget.release` (``None``: none drawn).
    budget: the :class:`pate_jax.budget.TeachersBudget`.
    config: the stage's config (δ, the moment grids, orders).
    num_asked_now: rows not asked by an earlier run of this workdir.
  """
  labels, status = np.asarray(out.labels), np.asarray(out.status)
  n = int(labels.shape[0])
  votes, true_labels = np.asarray(data["votes"][:n]), np.asarray(data["labels"][:n])
  answered = status == ledger_lib.Status.ANSWERED
  charged = answered | (status == ledger_lib.Status.NOT_CONFIDENT)
  m, params = budget.mechanism, budget.params
  orders = (np.asarray(config.orders, np.float64)
            if config.orders is not None and m.accountant == "rdp" else None)
  grids = {"delta": config.delta, "max_moment": int(config.max_moment),
           "tight_max_moment": int(config.get("tight_max_moment") or 0)}
  reports = epsilon_reports(m, params, votes, answered, charged, orders, **grids)
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
      "num_asked_now": int(num_asked_now), "num_answered": int(answered.sum()),
      "num_refused_budget": int((status == ledger_lib.Status.REFUSED_BUDGET).sum()),
      "num_not_confident": int((status == ledger_lib.Status.NOT_CONFIDENT).sum()),
      "delta": float(config.delta),
      "label_accuracy_answered": (float(np.mean(labels[answered] == true_labels[answered]))
                                  if answered.any() else None),
      "label_accuracy_overall": float(np.mean(labels == true_labels)),
      "epsilon": public_eps,
      "epsilon_at_grid_edge": [e for e in edges if "data_dependent" not in e],
      "epsilon_release": (release["public"] if release else _no_release(budget, release)),
      "ledger": {"epsilon": float(record["ledger_epsilon"]),
                 "best_order": float(record["ledger_best_order"]),
                 "epsilon_max": float(record["ledger_epsilon_max"]),
                 "accounting": "data-independent bound of the labels and the releases",
                 "num_charged": int(len(state["rows"])),
                 "num_answered": int(np.sum(state["status"] == ledger_lib.Status.ANSWERED)),
                 "releases": int(state["release_count"]), "kept_in": where},
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


def _no_release(budget: Any, release: Any) -> str:
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
  lines += _epsilon_lines(r["epsilon"], r.get("epsilon_tight"), "")
  if r.get("epsilon_tight"):
    lines.append(f"  ({r['epsilon_convention']})")
  release = r.get("epsilon_release")
  if isinstance(release, str):
    lines.append(f"  released ε: {release}")
  elif isinstance(release, dict):
    lines.append(f"  ε released with smooth sensitivity = {release['epsilon_released']:.3g} "
                 f"(release {release['release']}; order {_g(release['order'])}, β "
                 f"{_g(release['beta'])}, σ_ss {_g(release['sigma_ss'])} fixed in the config; "
                 f"{release['conversion']} conversion)")
  led = r["ledger"]
  lines.append(f"  budget: ε {led['epsilon']:.3g} of ε_max {_g(led['epsilon_max'])} spent "
               f"({led['num_charged']} queries charged, {led['releases']} release(s); "
               f"kept in {led['kept_in']})")
  p = r["private"]
  lines.append(f"private (data owner only): plurality accuracy {p['plurality_accuracy']:.1%}")
  lines += _epsilon_lines(p["epsilon"], p.get("epsilon_tight"), "private (data owner only): ")
  return lines


def _epsilon_lines(report: dict[str, Any], tight_report: dict[str, Any] | None,
                   prefix: str) -> list[str]:
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
    lines.append(f"  {prefix}ε {name} = {e['epsilon']:.3g}{where} at δ = {e['delta']:g}")
  return lines


# ---------------------------------------------------------------------- teachers stage


def plot_gap(gap: np.ndarray, num_teachers: int, path: str | pathlib.Path) -> None:
  """Histogram of the normalized gap between the top two vote counts (``gap [Q]``)."""
  plt = _pyplot()
  fig, ax = plt.subplots(figsize=(5, 3.5))
  ax.hist(gap * 100, bins=50, color="tab:blue")
  ax.set_xlabel("normalized gap between top two vote counts (%)")
  ax.set_ylabel("test queries")
  ax.set_title(f"PRIVATE (data owner only): {num_teachers} teachers, mean gap {gap.mean():.1%}",
               fontsize=9)
  fig.tight_layout()
  fig.savefig(path, dpi=120)
  plt.close(fig)


def vote_summary(votes: np.ndarray, labels: np.ndarray, num_pool: int,
                 teacher_accuracy: np.ndarray) -> dict[str, Any]:
  """The teachers stage's accuracies on the test split (``votes [Q, C]``, ``labels [Q]``;
  its first ``num_pool`` rows are the student's public pool, the rest its evaluation
  set) and the mean normalized gap between the top two vote counts."""
  plurality = votes.argmax(axis=1)
  a = teacher_accuracy
  return {
      "teacher_test_accuracy": {"mean": a.mean(), "min": a.min(), "max": a.max()},
      "plurality_accuracy_eval": (plurality[num_pool:] == labels[num_pool:]).mean(),
      "plurality_accuracy_test": (plurality == labels).mean(),
      "num_eval": len(labels) - num_pool,
      "num_test": len(labels),
      "mean_normalized_gap": np.asarray(votes_lib.normalized_gap(votes)).mean(),
  }


def teachers_headline(r: dict[str, Any]) -> str:
  """One readable line of a teachers results dict (also the main job's): private values,
  for the data owner only (the caller prints it marked so)."""
  r = {**r, **r.get("private", {})}
  a = r["teacher_test_accuracy"]
  return (f"{r['num_teachers']} teachers × {r['examples_per_teacher']} examples "
          f"({r['dataset']}): test accuracy mean {a['mean']:.2%} ({a['min']:.2%}–{a['max']:.2%}),"
          f" plurality {r['plurality_accuracy_test']:.2%} (test) / "
          f"{r['plurality_accuracy_eval']:.2%} (eval); mean normalized gap "
          f"{r['mean_normalized_gap']:.3f}; wall {r['wall_seconds']:.0f} s"
          + (" (an earlier run's; votes.npz reused)" if r.get("reused_votes") else ""))


# ---------------------------------------------------------------------------- main job


def plot_history(history: list[dict[str, Any]], title: str, path: str | pathlib.Path) -> None:
  """The student's held-out accuracy against training steps (its ``history``)."""
  plt = _pyplot()
  fig, ax = plt.subplots(figsize=(5, 3.5))
  ax.plot([h["step"] for h in history], [100 * h["eval_accuracy"] for h in history], "o-")
  ax.set_xlabel("training step")
  ax.set_ylabel("held-out accuracy (%)")
  ax.set_title(title, fontsize=9)
  ax.grid(alpha=0.3)
  fig.tight_layout()
  fig.savefig(path, dpi=120)
  plt.close(fig)


def attack_summary(r: dict[str, Any]) -> dict[str, Any]:
  """The main job's record of :func:`pate_jax.attacks.produced_histograms`: per histogram,
  its votes, the mean reconstruction error of every variant against fresh noise and
  against consistent answers, and the ε of the attacker's fresh repeats."""
  variants = list(r["variants"])
  rows = [{"query_index": h["query_index"],
           "votes": [int(x) for x in np.asarray(h["votes"])],
           **{f"error_{mode}/{v}": float(np.mean(h[f"error_{mode}/{v}"]))
              for mode in ("fresh_noise", "consistent") for v in variants},
           "epsilon_of_fresh_repeats": h["epsilon_of_fresh_repeats"]} for h in r["histograms"]]
  s = r["summary"]
  return {"sigma": r["sigma"], "num_queries": r["num_queries"], "variants": variants,
          "histograms": rows,
          "mean_error": {k: float(s[k]["mean_error"]) for k in s if "/" in k
                         and not k.startswith("cramer_rao")},
          "guess_all_votes_on_top_class": float(s["guess_all_votes_on_top_class"]["mean_error"]),
          "guess_uniform": float(s["guess_uniform"]["mean_error"]),
          "consistent_answer_is_true_top_fraction": float(
              s["consistent_answer_is_true_top_fraction"]),
          "ledger_check": r["ledger_check"]}


def attack_headline(a: dict[str, Any]) -> list[str]:
  """Readable lines of :func:`attack_summary` (or of ``{"skipped": reason}``)."""
  if "skipped" in a:
    return [f"histogram attack skipped: {a['skipped']}"]
  head = a["variants"][0]
  e = a["mean_error"]
  lines = [f"histogram attack ({len(a['histograms'])} lowest-consensus labelled queries, "
           f"{a['num_queries']} repeats each, GNMax σ = {a['sigma']:g}): mean error "
           f"{e[f'fresh_noise/{head}']:.3f} with fresh noise, "
           f"{e[f'consistent/{head}']:.3f} with consistent answers ('{head}' reconstruction; "
           f"guessing all votes on the top class: {a['guess_all_votes_on_top_class']:.3f})"]
  for v in a["variants"][1:]:
    lines.append(f"  '{v}' reconstruction: {e[f'fresh_noise/{v}']:.3f} fresh, "
                 f"{e[f'consistent/{v}']:.3f} consistent")
  return lines


def _g(x: Any) -> str:
  """``x`` in ``%.3g``; a string (JSON's ``"inf"``) as it is."""
  return x if isinstance(x, str) else f"{x:.3g}"


def _pct(x: float | None) -> str:
  return "n/a" if x is None else f"{100 * x:.2f} %"


def _table(header: list[str], rows: list[list[Any]]) -> list[str]:
  return (["| " + " | ".join(header) + " |", "|" + " --- |" * len(header)]
          + ["| " + " | ".join(str(c) for c in row) + " |" for row in rows])


def _epsilon_rows(report: dict[str, Any]) -> list[list[str]]:
  rows = []
  for name, e in report.items():
    best = e.get("best_order", e.get("best_moment"))
    rows.append([name.replace("_", " "), f"{e['epsilon']:.3f}", "" if best is None
                 else f"{best:g}"])
  return rows


def main_job_markdown(s: dict[str, Any], figures: dict[str, str]) -> str:
  """The main job's ``report.md`` in two parts: *Publishable* (the labels, the student, the
  data-independent and released ε) and *Private: for the data owner only* (the teachers,
  the data-dependent ε, the attack on the run's own vote histograms, and the figures drawn
  from them). ``figures[name]``: paths relative to the workdir (a missing name leaves its
  figure out)."""
  p = s["private"]
  t, lab, st = p["teachers"], s["aggregate"], s["student"]
  fig = lambda name, alt: [f"![{alt}]({figures[name]})", ""] if name in figures else []
  acc = t["teacher_test_accuracy"]
  out = [f"# PATE main job: {t['dataset']}, {t['num_teachers']} teachers", ""]
  if s["data"]["fallback_data"]:
    out += ["**FALLBACK DATA (scikit-learn 8×8 digits): NOT an MNIST result.**", ""]
  source = s["noise_source"]
  noise = (f"**The noise of this run is public**: {source['note']}." if source["public"]
           else "The noise of this run is secret (drawn from the operating system, never "
           "written).")
  release = s.get("epsilon_release")
  if isinstance(release, dict):
    released = (f"ε released with smooth sensitivity: **{release['epsilon_released']:.3f}** "
                f"(release {release['release']} of this budget; order {_g(release['order'])}, "
                f"β {_g(release['beta'])}, σ_ss {_g(release['sigma_ss'])}, all fixed in the "
                f"config before the data was seen; {release['conversion']} conversion).")
  else:
    released = f"No released ε: {release}."
  led = s["ledger"]
  out += [f"Data: {s['data']['data_source']}. Wall time {s['wall_seconds']:.0f} s. Numbers from "
          "`results.json` here and in each stage's directory. " + noise, "",
          "## Publishable", "",
          "Everything in this part may be published: it depends on the private data only "
          "through the released labels and the released ε.", "",
          "### Noisy labels and their privacy cost", "",
          f"{lab['mechanism']} {lab['noise']}: {lab['num_answered']} of {lab['num_queries']} "
          f"queries answered, label accuracy {_pct(lab['label_accuracy_answered'])}. ε at "
          f"δ = {lab['delta']:g}:", "",
          *_table(["data-independent ε of the labels", "value", "best order"],
                  _epsilon_rows(lab["epsilon"])), "",
          released, "",
          f"The teachers' budget: ε {led['epsilon']:.3f} of ε_max {_g(led['epsilon_max'])} "
          f"spent ({led['num_charged']} queries charged and {led['releases']} release(s); the "
          f"data-independent bound of everything published), kept in {led['kept_in']}.", "",
          "### Student", "",
          f"{st['student']}: held-out accuracy {_pct(st['eval_accuracy'])} on {st['num_eval']} "
          f"images, from {st['num_labels']} noisy labels ({_pct(st['label_accuracy'])} correct),"
          f" {st['epochs']:.0f} epochs, {st['train_seconds']:.0f} s training.", "",
          *fig("student", "student accuracy"),
          "## Private: for the data owner only", "",
          "Nothing below may be published, nor any figure or number drawn from it: each is a "
          "function of the private data (the teachers, their votes).", "",
          "### Teachers", "",
          f"{t['num_teachers']} teachers on disjoint partitions of {t['examples_per_teacher']} "
          f"examples each: test accuracy mean {_pct(acc['mean'])} (min {_pct(acc['min'])}, max "
          f"{_pct(acc['max'])}); their plurality vote {_pct(t['plurality_accuracy_test'])} on "
          f"the test split; mean normalized gap between the top two vote counts "
          f"{_pct(t['mean_normalized_gap'])}.", "", *fig("gap", "private: vote gap"),
          "### Data-dependent ε", "",
          *_table(["data-dependent ε (private)", "value", "best order"],
                  _epsilon_rows(p["epsilon"])), "",
          *_release_private(p.get("epsilon_release")),
          *fig("privacy", "private: epsilon vs queries")]
  out += _attack_markdown(p.get("attack") or {"skipped": "not run"}, fig)
  return "\n".join(out).rstrip() + "\n"


def _release_private(r: dict[str, Any] | None) -> list[str]:
  if not r:
    return []
  return [f"The un-noised value behind the release: data-dependent ε "
          f"{r['epsilon_data_dependent']:.3f}, expected release {r['epsilon_expected_release']:.3f}"
          f" ± {r['noise_std']:.3f} (smooth sensitivity {r['smooth_sensitivity']:.3g}).", ""]


def _attack_markdown(a: dict[str, Any], fig: Any) -> list[str]:
  if "skipped" in a:
    return ["### Histogram attack", "", f"Skipped: {a['skipped']}.", ""]
  variants = a["variants"]
  rows = [[r["query_index"], " ".join(map(str, r["votes"])),
           *[f"{r[f'error_fresh_noise/{v}']:.3f}" for v in variants],
           *[f"{r[f'error_consistent/{v}']:.3f}" for v in variants],
           f"{r['epsilon_of_fresh_repeats']:.3g}"] for r in a["histograms"]]
  fresh, cons = a["ledger_check"]
  return ["### Histogram attack", "",
          f"The attacker repeats each of the {len(rows)} labelled queries with the fewest "
          f"votes on their top class {a['num_queries']} times against GNMax "
          f"(σ = {a['sigma']:g}) and reconstructs the private vote histogram from the answer "
          "frequencies (error: Σ|H − Ĥ| / 2N). With fresh noise per answer the frequencies "
          "reveal the histogram; with consistent answers (the defense: noise keyed by the "
          "query) every repeat gets the same answer and the attacker learns the top class "
          f"only (guessing all votes on it: error {a['guess_all_votes_on_top_class']:.3f}).",
          "",
          *_table(["query", "votes (private)", *[f"error fresh, {v}" for v in variants],
                   *[f"error consistent, {v}" for v in variants],
                   "ε of the fresh repeats"], rows), "",
          f"Ledger replay of {fresh['num_queries']} repeats of query "
          f"{a['histograms'][0]['query_index']}: fresh noise charges {fresh['num_charged']} "
          f"queries (ε {fresh['epsilon']:.3g}, {fresh['distinct_labels']} distinct labels); "
          f"consistent answers charge {cons['num_charged']} (ε {cons['epsilon']:.3g}, "
          f"{cons['distinct_labels']} distinct label).", "", *fig("attack", "private: attack")]


def _pyplot():
  import matplotlib  # pylint: disable=g-import-not-at-top
  matplotlib.use("Agg")
  import matplotlib.pyplot as plt  # pylint: disable=g-import-not-at-top
  return plt
