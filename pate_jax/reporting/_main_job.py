"""What the main job reports: its ``report.md`` and the record of its histogram attack.

Owns :func:`main_job_markdown` (a publishable part and a private one, for the data owner
only), :func:`attack_summary` and :func:`attack_headline`.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from pate_jax.reporting._aggregate import _g, delta_text


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
  data-independent and released ε; with research noise it is *Publishable with secret
  noise* and says that nothing in the report may be published) and *Private: for the data
  owner only* (the teachers, the data-dependent ε, the attack on the run's own vote
  histograms, and the figures drawn from them). ``figures[name]``: paths relative to the workdir (a missing name leaves its
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
  lab_sampler = (lab.get("ledger") or {}).get("sampler_delta")
  release = s.get("epsilon_release")
  if isinstance(release, dict):
    released = (f"ε released with smooth sensitivity: **{release['epsilon_released']:.3f}** "
                f"at δ = {delta_text(release['delta'], lab_sampler)} (release "
                f"{release['release']} of this budget; order {_g(release['order'])}, "
                f"β {_g(release['beta'])}, σ_ss {_g(release['sigma_ss'])}, all fixed in the "
                f"config before the data was seen; {release['conversion']} conversion).")
  else:
    released = f"No released ε: {release}."
  led = s["ledger"]
  out += [f"Data: {s['data']['data_source']}. Wall time to the student's end "
          f"{s['wall_seconds']:.0f} s (the attack's, private, aside). Numbers from "
          "`results.json` here and in each stage's directory. " + noise, "",
          *(["## Publishable with secret noise", "",
              "**Nothing in this report may be published**: this run's noise came from a "
              "research seed, so its labels and everything drawn from them reveal the votes "
              "beyond any ε. With secret noise (no `noise_seed`), this part could be: it "
              "would depend on the private data only through the released labels and the "
              "released ε.", ""] if source["public"] else
            ["## Publishable", "",
             "Everything in this part may be published: it depends on the private data "
             "only through the released labels and the released ε.", ""]),
          "### Noisy labels and their privacy cost", "",
          f"{lab['mechanism']} {lab['noise']}: {lab['num_answered']} of {lab['num_queries']} "
          f"queries answered, label accuracy {_pct(lab['label_accuracy_answered'])}. ε at "
          f"δ = {delta_text(lab['delta'], lab_sampler)}"
          + ("" if lab_sampler is None else
             " (the budget's δ and what its float64 noise samplers add)") + ":", "",
          *_table(["data-independent ε of the labels", "value", "best order"],
                  _epsilon_rows(lab["epsilon"])), "",
          released, "",
          f"The teachers' budget: ε {led['epsilon']:.3f} of ε_max {_g(led['epsilon_max'])} "
          + ("" if lab_sampler is None else
             f"at δ = {delta_text(lab['delta'], lab_sampler)} ") +
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
  if p.get("seconds"):  # the attack's solvers stop on convergence on the private votes
    out += ["Seconds (private: the attack's depend on the votes): " + "; ".join(
        f"{k.replace('_', ' ')} {v:.1f}" for k, v in p["seconds"].items()) + ".", ""]
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
