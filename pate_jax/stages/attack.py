"""The attack stage: the histogram-extraction attack paper's evaluation (Section 4, App. E/F).

``run(config, workdir)`` runs the experiment that ``config.setting`` selects (see each
``configs/attack_*.py`` docstring): ``fixed`` (Figures 5-7), ``budget`` (Figure 4),
``edge`` (Figure 9), ``defense`` (Section 5), ``adult`` (Section 2, Figure 1, Appendix E,
Figure 8) and, beyond the paper, ``dirichlet`` (fresh histograms: the maximum-likelihood
reconstruction and the Cramér–Rao bound) and ``near_duplicates`` (the defense
caches exact repeats only: near-duplicate queries to real teachers). Every run writes
``results.json`` (per-histogram queries, ε and error) and PNG figures into the workdir, and
prints its
headline numbers as it goes. The experiments themselves are functions of explicit
arguments in :mod:`pate_jax.attacks`; this module reads the config and calls them.

Randomness: one root key ``key(config.seed)``; the named streams of
:mod:`pate_jax.rng` (``attack_answers``, ``attack_ledger``, ``attack_sample``,
``teachers``), and Monte Carlo repetition ``r`` is ``fold_in(attack_answers, r)``.
"""

from __future__ import annotations

import functools
import pathlib
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from pate_jax import _checks
from pate_jax import attacks, experiment, io, rng
from pate_jax import budget as budget_lib

__all__ = ["run", "plan", "reconstruction_variants", "SETTINGS"]

_DATASETS = ("mnist", "svhn")


def reconstruction_variants(config: Any) -> dict[str, dict]:
  """``{variant: reconstruction options}``, ``config.headline`` first (ConfigDict keys sort).

  A variant overrides ``config.reconstruction``, or ``config.mle_reconstruction``
  when it sets ``method="mle"`` (the paper's options do not apply to the MLE).
  """
  names = list(config.variants.keys())
  head = config.get("headline", "paper")
  if head not in names:
    raise ValueError(f"config.headline {head!r} is not one of the variants {names}")

  def options(name):
    override = config.variants[name].to_dict()
    mle = override.get("method") == "mle"
    base = config.get("mle_reconstruction") if mle else config.reconstruction
    if base is None:
      raise ValueError(f"config.variants.{name} is an MLE variant but the config has no "
                       "mle_reconstruction")
    return {**base.to_dict(), **override}

  return {n: options(n) for n in [head] + [n for n in names if n != head]}


def check_sweeps(config: Any) -> None:
  """The noise and query grids a setting sweeps, where it has them, refused before any
  attack runs (naming the field): ``sigmas`` (non-empty, finite, > 0; the attacks named
  it ``sigma``, and an empty one failed in numpy's stack), ``sweep_sigma``,
  ``query_counts`` (integers >= 1: a 0 failed as ``num_queries`` once the σ grid had been
  attacked) and ``sweep_variants`` (among the variants: a KeyError after that grid). The
  near-duplicates setting's teachers (``config.teachers``: the teachers stage's checks,
  naming ``config.teachers.<field>``; its dry run accepted them, and a run refused them
  once its workdir was made)."""
  if config.get("setting") == "near_duplicates":
    from pate_jax.stages import teachers as teachers_stage  # pylint: disable=g-import-not-at-top
    teachers_stage.check_config(config.teachers, "config.teachers.")
  if "sigmas" in config:
    _checks.positive_vector(config.sigmas, "config.sigmas", "noise scales")
  if config.get("query_counts"):
    _checks.positive(config.sweep_sigma, "config.sweep_sigma")
    for m in config.query_counts:
      _checks.positive_int(m, "config.query_counts")
    variants = tuple(reconstruction_variants(config))
    for v in config.sweep_variants:
      _checks.choice(v, "config.sweep_variants", variants)


def _mc_keys(config, key) -> jax.Array:
  return attacks.seed_keys(rng.stream(key, "attack_answers"), config.num_seeds)


def _print_summary(results) -> None:
  for name, summary in experiment.to_jsonable(results["summary"]).items():
    print(name, summary)


def run_fixed(config, key, workdir) -> dict:
  hists, names = attacks.table1_histograms()
  results = attacks.fixed_queries(
      _mc_keys(config, key), hists, names, sigmas=config.sigmas,
      num_queries=config.num_queries, variants=reconstruction_variants(config),
      privacy=config.datasets.to_dict(), conversion=config.conversion)
  results["figures"] = attacks.plot_fixed_queries(workdir, results, config.num_seeds)
  if config.get("query_counts"):
    datasets, groups, _ = attacks.table1_labels(names)
    labels = [f"{d} {g}" for d, g in zip(datasets, groups)]
    results["query_sweep"] = _query_sweep(config, key, hists, labels, workdir,
                                          "Table 1 histograms")
    results["figures"].append(results["query_sweep"]["figure"])
  _print_summary(results)
  for k, c in results["correlation"].items():
    print(f"Pearson r(error, ε_{k}) = {c['per_histogram_and_sigma']['r']:.3f} (120 points), "
          f"{c['per_histogram_sigma_averaged']['r']:.3f} (30 σ-averaged)")
  return results


def _query_sweep(config, key, hists, groups, workdir, what) -> dict:
  variants = reconstruction_variants(config)
  sweep = attacks.query_sweep(
      jax.vmap(jax.random.fold_in, (0, None))(_mc_keys(config, key), 1_000_000), hists,
      groups, sigma=config.sweep_sigma, query_counts=config.query_counts,
      variants={v: variants[v] for v in config.sweep_variants})
  sweep["figure"] = attacks.plot_error_vs_queries(
      pathlib.Path(workdir) / "error_vs_queries.png", sweep,
      f"{what}: mean error vs queries, {config.num_seeds} runs")
  for v, e in sweep["error_mean"].items():
    print(f"[{v}] error by M: " + ", ".join(f"{m}: {x:.4f}" for m, x in
                                              zip(sweep["num_queries"], e)))
  print("Cramér–Rao by M: " + ", ".join(f"{m}: {x:.4f}" for m, x in
                                        zip(sweep["num_queries"], sweep["cramer_rao_error"])))
  return sweep


def run_dirichlet(config, key, workdir) -> dict:
  hists, names = attacks.dirichlet_histograms(
      rng.stream(key, "attack_sample"), config.alphas, config.num_per_alpha,
      num_teachers=config.num_teachers, num_classes=config.num_classes)
  results = attacks.fresh_histograms(
      _mc_keys(config, key), hists, names, sigma=config.sigma, num_queries=config.num_queries,
      variants=reconstruction_variants(config),
      budget=config.budget.to_dict() if config.budget else None,
      conversion=config.conversion, num_teachers=config.num_teachers)
  if config.get("query_counts"):
    results["query_sweep"] = _query_sweep(
        config, key, hists, [n.split("/")[0] for n in names], workdir,
        f"Dirichlet(α·1) histograms, {config.num_teachers} votes")
  results["figures"] = [results["query_sweep"]["figure"]] if "query_sweep" in results else []
  _print_summary(results)
  return results


def run_budget(config, key, workdir) -> dict:
  hists, names = attacks.table1_histograms()
  datasets, _, _ = attacks.table1_labels(names)
  variants = reconstruction_variants(config)
  results = {"datasets": {}, "histograms": [], "variants": list(variants),
             "headline_variant": next(iter(variants)), "samplers": list(config.samplers)}
  ledger_stream = rng.stream(key, "attack_ledger")
  for d, ds in enumerate(_DATASETS):
    sel = np.flatnonzero(datasets == ds)
    keys = jax.vmap(jax.random.fold_in, (0, None))(_mc_keys(config, key), d)
    ledger_keys = (jax.vmap(jax.random.fold_in, (None, 0))(ledger_stream, jnp.asarray(sel))
                   if config.ledger else None)
    out = attacks.budget_limited(
        keys, ledger_keys, hists[sel], [names[b] for b in sel],
        params=config.datasets[ds].to_dict(), variants=variants, samplers=config.samplers,
        conversion=config.conversion, max_queries=config.max_queries,
        ledger_batch=config.ledger_batch,
        progress=functools.partial(experiment.progress, desc=f"{ds} ledger"))
    results["datasets"][ds] = out["summary"]
    results["histograms"].extend(out["histograms"])
    shown = experiment.to_jsonable(out["summary"])  # numbers, not np.float64(...)
    print(f"{ds}: mean error {shown['mean_error']} (paper: "
          f"{0.11 if ds == 'mnist' else 0.05}); ledger {shown.get('ledger_mean_error')}")
    print(f"{ds}: Cramér–Rao {shown['cramer_rao']}")
  results["figures"] = [attacks.plot_budget(
      pathlib.Path(workdir) / "fig4_budget_limited.png", results,
      {ds: config.datasets[ds].budget for ds in _DATASETS})]
  return results


def run_edge(config, key, workdir) -> dict:
  h = attacks.table1_histogram(config.histogram)
  results = {"histogram": config.histogram, **attacks.edge_sigmas(
      _mc_keys(config, key), h, sigmas=config.sigmas, num_queries=config.num_queries,
      variants=reconstruction_variants(config))}
  results["figures"] = [attacks.plot_edge(
      pathlib.Path(workdir) / "fig9_edge_sigma.png", results,
      f"{config.histogram} {h.tolist()}: {config.num_queries} queries")]
  for v, e in results["error_mean"].items():
    print(f"[{v}] error by σ: " + ", ".join(f"{s:g}: {x:.3f}" for s, x in
                                            zip(results["sigmas"], e)))
  print(f"baselines: uniform guess {results['baseline_uniform_error']:.3f}; all N votes on "
        f"the top class {results['baseline_unanimous_top_class_error']:.3f}")
  return results


def run_defense(config, key, workdir) -> dict:
  hists, names = attacks.table1_histograms()
  results = attacks.consistent_answers(
      _mc_keys(config, key), hists, names, sigmas=config.sigmas,
      num_queries=config.num_queries, variants=reconstruction_variants(config))
  if config.ledger:
    results["ledger_check"] = [attacks.replay_consistency(
        rng.stream(key, "attack_ledger"), attacks.table1_histogram("svhn/M3"),
        sigma=float(config.sigmas[0]), num_queries=config.num_queries,
        delta=config.ledger_delta, consistent=c) for c in (False, True)]
    print("ledger replay:", experiment.to_jsonable(results["ledger_check"]))
  results["figures"] = [attacks.plot_defense(
      pathlib.Path(workdir) / "defense_consistent_answers.png", results)]
  _print_summary(results)
  return results


def run_adult(config, key, workdir) -> dict:
  from pate_jax import tabular  # pylint: disable=g-import-not-at-top
  from pate_jax import votes as votes_lib  # pylint: disable=g-import-not-at-top
  from pate_jax.data import adult  # pylint: disable=g-import-not-at-top

  budget_lib.refuse_spent_votes(workdir)  # before anything is fitted
  # The public split's vocabulary: a private row's category it lacks is coded silently.
  splits = adult.load_adult(config.data_dir or None, splits=("train", "test"),
                            drop_columns=(config.minority_column,), vocabulary="test")
  train, test = splits["train"], splits["test"]
  if config.teacher == "rf_search":
    estimator = functools.partial(attacks.searched_forest, n_iter=config.search_iterations,
                                  folds=config.search_folds)
  elif config.teacher == "rf":
    estimator = tabular.random_forest(config.n_estimators, max_depth=config.max_depth)
  else:
    raise ValueError(f"config.teacher must be 'rf_search' or 'rf', got {config.teacher!r}")
  ensemble = tabular.fit_teachers(rng.stream(key, "teachers"), train.features,
                                  train.labels, config.num_teachers,
                                  num_classes=tabular.NUM_CLASSES, estimator=estimator,
                                  n_jobs=config.n_jobs, progress=experiment.progress)
  minority = np.asarray(test.columns[config.minority_column]) == config.minority_value
  votes, _ = tabular.teacher_votes(ensemble, test.features, n_jobs=config.n_jobs)
  k_sample = rng.stream(key, "attack_sample")
  rows = attacks.balanced_rows(jax.random.fold_in(k_sample, 0), minority)  # Balanced test set.
  draw_keys = jax.vmap(lambda d: jax.random.fold_in(k_sample, d))(
      1000 + jnp.arange(config.num_balanced_draws, dtype=jnp.uint32))
  results = {
      "num_teachers": config.num_teachers, "teacher": config.teacher,
      "plurality_test_accuracy": float(np.mean(np.argmax(votes, -1) == test.labels)),
      **attacks.consensus_inference(votes, minority, rows, draw_keys,
                                    threshold=config.consensus_threshold)}
  votes_lib.save_votes(pathlib.Path(workdir) / "votes.npz", votes, test.labels,
                       dataset="adult-test-noeducation",
                       private_data=tabular.private_data("adult", config.data_dir or None))
  # Owner-only: the hidden attribute itself (who holds a doctorate), the attack's target.
  io.write_private(pathlib.Path(workdir) / "minority.npy", lambda f: np.save(f, minority))
  draws = results["balanced_precision_over_draws"]
  print(f"{experiment.PRIVATE_MARK}Section 2: precision {results['balanced']['precision']:.3f} "
        "on the balanced test set "
        f"(paper ~0.75); over {draws['num_draws']} draws of the majority sample "
        f"{draws['mean']:.3f} ± {draws['std']:.3f}; rates {results['balanced']}")
  e2e = results["end_to_end"] = attacks.end_to_end(
      k_sample, rng.stream(key, "attack_answers"), votes[rows], minority[rows],
      threshold=config.consensus_threshold, num_individuals=config.num_end_to_end,
      sigma=config.sigma, delta=config.delta, budget=config.budget,
      num_teachers=config.num_teachers, conversion=config.conversion,
      max_queries=config.max_queries,
      **next(iter(reconstruction_variants(config).values())))
  queries = [r["queries_allowed"] for r in e2e["individuals"]]
  print(f"{experiment.PRIVATE_MARK}Appendix E: agreement "
        f"{e2e['agreement_with_true_consensus_class']:.2f}, mean error "
        f"{e2e['mean_error']:.4f}, queries {min(queries)}..{max(queries)}")
  results["figures"] = [attacks.plot_consensus_groups(
      pathlib.Path(workdir) / "fig1_fig8_adult_consensus.png", results["balanced"],
      e2e["rates_from_reconstructed"], np.asarray(attacks.consensus(votes[rows])),
      minority[rows], config.consensus_threshold, (
          f"PRIVATE: Fig. 1: true histograms, balanced test set (n={rows.size}),\nprecision "
          f"{results['balanced']['precision']:.2f}",
          f"PRIVATE: Fig. 8: reconstructed from GNMax answers (σ={config.sigma:g}, "
          f"ε≤{config.budget}),"
          f"\n{e2e['num_individuals']} individuals"))]
  return results


def _trained_teachers(tc, prefix: str):
  """Trains the ensemble of teachers config ``tc`` in memory, as the teachers stage does
  (same data, shards, keys and segments, hence the same teachers; no checkpoints, no
  votes.npz): ``(ensemble, params, dataset)``. ``prefix``: how ``tc``'s fields are named
  in the errors that refuse them."""
  from pate_jax import data  # pylint: disable=g-import-not-at-top
  from pate_jax.stages import teachers as teachers_stage  # pylint: disable=g-import-not-at-top

  teachers_stage.check_config(tc, prefix)
  ds, _, _, (shard_x, shard_y, dropped), root = teachers_stage.prepare_data(tc, prefix=prefix)
  print(f"{shard_y.shape[0]} teachers × {shard_y.shape[1]} examples ({dropped} dropped); "
        f"data: {ds.source}")
  ensemble = teachers_stage.build_ensemble(tc, ds.num_classes)
  t = tc.num_teachers
  shard_x = data.to_float(shard_x)
  sample = shard_x[0]
  init_keys, train_keys = teachers_stage.teacher_keys(root, t)
  keys, shard_x, shard_y = ensemble.prepare((train_keys, shard_x, shard_y))
  state = ensemble.init(init_keys, sample)
  for step in experiment.progress(range(0, tc.num_steps, tc.checkpoint_every),
                                  desc="teacher segments"):
    state, _ = ensemble.train(state, keys, shard_x, shard_y, step,
                              min(tc.checkpoint_every, tc.num_steps - step))
  return ensemble, state["params"], ds


def run_near_duplicates(config, key, workdir) -> dict:
  from pate_jax import data, teachers  # pylint: disable=g-import-not-at-top
  from pate_jax import votes as votes_lib  # pylint: disable=g-import-not-at-top

  tc = config.teachers
  ensemble, params, ds = _trained_teachers(tc, "config.teachers.")
  vote = lambda x: np.asarray(ensemble.votes(params, jnp.asarray(x), ds.num_classes,
                                             tc.num_teachers))
  # The main job's targets: the lowest-consensus rows among the labelled pool queries.
  index, num_pool = teachers.query_set(ds)
  pool = index[:num_pool]
  rows = pool[votes_lib.query_rows(config.query_selection, ds.test_labels[pool],
                                   config.num_candidates, ds.num_classes)]
  images = data.to_float(ds.test_images[rows])
  candidates = vote(images)
  pick = attacks.lowest_consensus(candidates, config.num_histograms)
  x, h, m = images[pick], candidates[pick], config.num_queries
  k_sample = rng.stream(key, "attack_sample")
  near = {}
  for i, kind in enumerate(config.perturbations):
    copies = np.asarray(attacks.near_duplicates(jax.random.fold_in(k_sample, i), x, m, kind))
    near[kind] = (copies, vote(copies.reshape((-1,) + x.shape[1:])).reshape(len(x), m, -1))
  results = attacks.near_duplicate_attack(
      _mc_keys(config, key), x, h, near, sigma=config.sigma,
      variants=reconstruction_variants(config), num_teachers=float(tc.num_teachers))
  results.update(dataset=ds.name, data_source=ds.source, fallback_data=ds.fallback,
                 perturbations=list(config.perturbations), num_candidates=config.num_candidates,
                 test_rows=rows[pick], note=NEAR_DUPLICATE_NOTE)
  results["figures"] = [attacks.plot_near_duplicates(
      pathlib.Path(workdir) / "near_duplicates.png", results, experiment.PRIVATE_TITLE)]
  for case, s in results["summary"].items():
    print(experiment.PRIVATE_MARK + case, s)
  return results


NEAR_DUPLICATE_NOTE = (
    "the consistent-answer defense keys the noise by a hash of the query's bytes, so it "
    "caches exact repeats only: a near-duplicate (pixel: one value set to another 8-bit grey "
    "level, distinct copies; pixel_step: one value moved by ±1/255, reflected at 0 and 1; "
    "gauss: N(0, (1/255)²) i.i.d., clipped to [0, 1]) is a new query with fresh noise")

SETTINGS = {"fixed": run_fixed, "budget": run_budget, "edge": run_edge,
            "defense": run_defense, "adult": run_adult, "dirichlet": run_dirichlet,
            "near_duplicates": run_near_duplicates}
# The settings that attack teachers trained here on private data (their lines are printed
# marked private); the others attack the attack paper's published histograms (Table 1) or
# synthetic ones: no private data.
ON_PRIVATE_DATA = ("adult", "near_duplicates")


def run(config: Any, workdir: str) -> dict:
  """Runs ``config.setting``'s experiment (module docstring) and writes ``results.json``
  (a measurement: the histograms attacked are the paper's, drawn fresh or, for
  ``near_duplicates``, the votes of teachers trained here)."""
  if config.setting not in SETTINGS:
    raise ValueError(f"config.setting must be one of {sorted(SETTINGS)}, got "
                     f"{config.setting!r}")
  check_sweeps(config)
  key = rng.root_key(config.seed)
  pathlib.Path(workdir).mkdir(parents=True, exist_ok=True)
  with experiment.locked_workdir(workdir):  # a second run there fails at once
    results = SETTINGS[config.setting](config, key, workdir)
    results["setting"] = config.setting
    experiment.write_results(workdir, results, config=config, seed=config.seed,
                             disclosure=experiment.MEASUREMENT if config.setting in
                             ON_PRIVATE_DATA else experiment.NO_PRIVATE_DATA)
  return results


_PLAN_FIELDS = ("num_seeds", "num_queries", "sigmas", "sigma", "sweep_sigma", "query_counts",
                "histogram", "alphas", "num_per_alpha", "num_teachers", "num_classes",
                "samplers", "max_queries", "teacher", "num_end_to_end", "budget",
                "num_histograms", "num_candidates")


def plan(config: Any) -> dict[str, Any]:
  """``--dry_run``: the setting, the histograms attacked, the reconstruction variants, the
  Monte Carlo seeds and the queries (σ grid, query sweep) it will process."""
  check_sweeps(config)
  out = {"setting": config.setting}
  out.update({k: config[k] for k in _PLAN_FIELDS if k in config})
  if config.setting in ("fixed", "budget", "defense"):
    out["histograms"] = int(attacks.table1_histograms()[0].shape[0])
  elif config.setting == "edge":
    out["histograms"] = 1
  elif config.setting == "dirichlet":
    out["histograms"] = len(config.alphas) * int(config.num_per_alpha)
  elif config.setting == "near_duplicates":
    out.update(histograms=int(config.num_histograms), teachers=int(config.teachers.num_teachers),
               teacher_steps=int(config.teachers.num_steps),
               perturbations=tuple(config.perturbations),
               teacher_predictions=int(config.teachers.num_teachers) * (
                   int(config.num_candidates) + int(config.num_histograms) * int(
                       config.num_queries) * len(config.perturbations)))
  elif config.setting == "adult":
    from pate_jax.data import adult  # pylint: disable=g-import-not-at-top
    try:
      splits = adult.load_adult(config.data_dir or None, splits=("train", "test"),
                                drop_columns=(config.minority_column,), vocabulary="test")
      out.update({"train_rows": len(splits["train"].labels),
                  "test_rows": len(splits["test"].labels),
                  "rows_per_teacher": len(splits["train"].labels) // int(config.num_teachers)})
    except (FileNotFoundError, OSError) as e:
      out["data"] = f"MISSING: {e}"
  if "variants" in config or "reconstruction" in config:
    out["variants"] = tuple(reconstruction_variants(config))
  if "histograms" in out and "sigmas" in config and "num_seeds" in config:
    out["attacks"] = out["histograms"] * len(config.sigmas) * int(config.num_seeds)
  return out
