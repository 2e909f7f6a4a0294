"""The tabular stage (Papernot et al. 2017, Appendix C): random-forest teachers and student.

``run(config, workdir)`` runs these steps in one process (each hands over through the
workdir):
  1. load the dataset (Adult, or Diabetes when configured) coded as integers;
  2. non-private baseline: one forest on all training data;
  3. T teachers on disjoint partitions (joblib, all cores) -> votes on every
     query input -> ``votes.npz`` (rows [:num_pool] student pool, the rest
     evaluation) and ``teacher_predictions.npz`` (``[T, Q]``);
  4. plurality / LNMax / GNMax labels of the pool, their accuracy, and eps under
     each accountant (LNMax: 2017 moments accountant, data-dependent and
     data-independent; GNMax: data-dependent RDP with the improved conversion);
  5. student forests on the noisy labels, evaluated on the remaining inputs;
  6. sweeps: student accuracy vs number of queries and vs noise scale (labels of
     the whole noise grid from one vmapped aggregation call) -> PNG;
  7. optionally (``config.confident_gnmax.enabled``) Confident-GNMax (Papernot et al.
     2018, Section 4.1, Table 1): the first ``confident_gnmax.num_queries`` query rows
     (default ``num_pool``) are asked, students train on the answered rows only and are
     scored on the rows after them; ε realised (data-independent; the data-dependent one
     and the paper's expected accounting in a ``private`` part);

and writes ``results.json`` (a measurement) beside them. The pieces are functions of
arrays in :mod:`pate_jax.tabular`; only this module reads the config.

The release: ``experiments/aggregate.py`` answers the pool rows of this stage's
``votes.npz`` from the teachers' budget (secret noise, the ledger beside the votes), and
this stage with ``config.labels_dir`` set to that run's workdir trains the student forests
on the released labels alone (:func:`released_student`): publishable, as the image
students trained on released labels are. Not on Diabetes' ``config.diabetes_preparation =
"paper"``, whose rows and columns are chosen on the private rows: its ``votes.npz`` carries
``not_releasable`` (:func:`not_releasable`), and the budget refuses it secret noise.
"""

from __future__ import annotations

import os
import pathlib
import time

from absl import logging
import jax
import numpy as np

from pate_jax import _checks as checks
from pate_jax import accounting
from pate_jax import aggregation
from pate_jax import budget as budget_lib
from pate_jax import experiment
from pate_jax import labels as labels_lib
from pate_jax import reporting
from pate_jax import rng
from pate_jax import tabular
from pate_jax import votes as votes_lib

__all__ = ["run", "plan", "report", "grid_edges", "confident_gnmax_settings",
           "confident_gnmax_key", "released_student", "CONFIDENT_GNMAX_DRAW"]

CONFIDENT_GNMAX_DRAW = 2**31
"""Folded into the stage's ``aggregation`` key for Confident-GNMax's noise. LNMax's and
GNMax's labels and sweeps fold their draw indices ``0, 1, ...`` (below ``num_seeds`` and
``student_repeats``) into the same key, so Confident-GNMax never reuses their noise."""


def run(config, workdir: str | os.PathLike) -> dict:
  """The whole experiment; writes into ``workdir`` (locked meanwhile: a second run there
  fails at once) and returns the results dict."""
  check_forests(config)
  with experiment.locked_workdir(workdir):
    if config.get("labels_dir"):
      return released_student(config, pathlib.Path(workdir))
    return _run(config, pathlib.Path(workdir))


def released_student(config, workdir: pathlib.Path) -> dict:
  """Student forests on the labels that ``config.labels_dir``'s ``labels.npz`` released (an
  aggregate run on this task's ``votes.npz``), scored on the query inputs after the pool.

  Reads the task's public query inputs and labels and the released labels, never the
  votes (the dataset is loaded whole to draw the same split, and nothing of the teachers'
  training part is used): with secret noise everything it writes outside its ``private``
  entry is publishable (the students, their accuracy, the released labels' accuracy on the
  public pool, the budget's data-independent ε the labels were released at, and
  ``timings.total_s``, from the task read on); ``private.load_task_seconds`` is the read
  of the task, whose private training rows it reads and checks. Labels of a research
  noise seed make it a measurement, private as a whole.

  Raises:
    ValueError: labels of rows outside this task's pool, or of another task (their
      recorded true labels differ from the pool's: another seed, dataset or split), or
      none answered (each names ``config.labels_dir``).
  """
  start = time.perf_counter()
  # The task is read whole to draw the same split: its private training rows too, read and
  # checked in a time that follows them. Private, and out of the publishable total.
  _, queries, name = _load_task(config)
  load_task_seconds = time.perf_counter() - start
  t0 = time.perf_counter()
  num_pool = _pool_size(config, queries)
  released = labels_lib.load_labels(config.labels_dir)
  rows, answered = released["dataset_index"], released["answered"]
  where = f"config.labels_dir ({config.labels_dir})"
  if rows.size and (rows.min() < 0 or rows.max() >= num_pool):
    raise ValueError(f"{where}: labels of query rows outside this task's pool [0, {num_pool})")
  if not np.array_equal(released["true_labels"], queries.labels[rows]):
    raise ValueError(f"{where}: labels of other query inputs than this config's {name} task "
                     "(their true labels differ): answer this stage's votes.npz, with the "
                     "same seed, dataset and split")
  if not answered.any():
    raise ValueError(f"{where}: no query was answered; nothing to train a student on")
  x, y = queries.features[rows[answered]], released["labels"][answered]
  seeds = tabular.random_states(rng.stream(rng.root_key(config.seed), "student_init"),
                                int(config.student_repeats))
  task = tabular.StudentTask(
      x, queries.features[num_pool:], queries.labels[num_pool:], n_jobs=config.n_jobs,
      estimator=forests(config)["student"])
  noise_seed = labels_lib.noise_seed(released)
  budgets = None  # a research seed's labels: no registered budget
  if noise_seed is None:  # before any forest is fitted: a refused registry fails at once
    registry = budget_lib.BudgetRegistry(config.get("budget_registry") or None)
    data = registry.data_of(str(released["votes_digest"]))
    budgets = ("unknown: the labels' budget is not in this machine's budget registry"
               if data is None else len(registry.budgets(data)))
  acc = tabular.student_accuracies(task, seeds, [y] * len(seeds))
  results = {
      "dataset": name, "released_student": True, "labels_dir": str(config.labels_dir),
      "mechanism": released["mechanism"], "num_pool": num_pool,
      "num_eval": len(queries) - num_pool, "num_asked": int(rows.size),
      "num_answered": int(answered.sum()),
      "label_accuracy_answered": float(np.mean(y == released["true_labels"][answered])),
      "student_accuracy_mean": float(acc.mean()), "student_accuracies": acc.tolist(),
      "student_repeats": len(seeds),
      "epsilon": released["epsilon"], "epsilon_max": released["epsilon_max"],
      "delta": released["delta"], "sampler_delta": released["sampler_delta"],
      "noise_source": rng.noise_record(noise_seed),
      "epsilon_note": "the teachers' budget's data-independent bound when the labels were "
                      "released (labels.npz); the students add nothing to it",
      # How many budgets the registry holds on the teachers' private data (their ε add
      # up), or why that is not known here.
      "budgets_on_private_data": budgets,
      # From the task read on: the public query inputs, the released labels, the forests.
      "timings": {"total_s": time.perf_counter() - t0},
      "private": reporting.private_part(load_task_seconds=load_task_seconds),
  }
  experiment.write_results(workdir, results, config=config, seed=config.seed,
                           disclosure=experiment.noise_disclosure(results["noise_source"]))
  return results


def _load_task(config):
  """``(train, queries, name)`` of the config's tabular task (:func:`tabular.load_task`)."""
  return tabular.load_task(
      rng.stream(rng.root_key(config.seed), "data_split"), config.dataset,
      config.data_dir or None, query_split=config.query_split,
      test_fraction=config.test_fraction,
      drop_columns=[c.strip() for c in config.drop_columns.split(",") if c.strip()],
      coarsen=bool(config.get("coarsen", False)), preparation=_preparation(config))


def _preparation(config) -> str:
  """``config.diabetes_preparation`` (absent: "label_free"), checked for the dataset."""
  preparation = config.get("diabetes_preparation", "label_free")
  try:
    tabular.label_chosen(config.dataset, preparation)
  except ValueError as e:
    raise ValueError(f"config.diabetes_preparation: {e}") from None
  return preparation


def not_releasable(config) -> str | None:
  """What the stage writes into ``votes.npz``'s ``not_releasable`` (``None``: nothing):
  why no release may be drawn with secret noise from the votes of teachers whose data was
  prepared by looking at its private rows (Diabetes' ``config.diabetes_preparation =
  "paper"``; :func:`tabular.label_chosen`)."""
  preparation = _preparation(config)
  if not tabular.label_chosen(config.dataset, preparation):
    return None
  return (f"config.diabetes_preparation={preparation!r} chose the balanced subset, the "
          "private/public split and the feature columns from every row of the file, private "
          "rows' labels and missing values included, so no ε of these teachers holds for the "
          "file; train them with config.diabetes_preparation='label_free' for a release")


CLASS_WEIGHTS = (None, "balanced", "balanced_subsample")


def forests(config) -> dict[str, tabular.Estimator]:
  """The forest prototypes of the stage, by role: ``"baseline"`` (one forest on all the
  training rows), ``"teachers"`` and ``"student"``. scikit-learn's defaults except the
  number of trees (Appendix C), ``config.max_depth``, and, for the two trained on the
  private training rows (the baseline and every teacher), ``config.class_weight``
  (absent: ``None``, unweighted): ``"balanced"`` weights each class by the inverse of its
  frequency in the rows the forest is fitted on (each teacher's: its own partition, part of
  its training and so inside the ε; ``"balanced_subsample"``: in each tree's bootstrap
  sample). The student learns from the public pool's labels, unweighted.

  Raises:
    ValueError: ``config.class_weight`` not one of :data:`CLASS_WEIGHTS`.
  """
  weight = config.get("class_weight")
  if weight not in CLASS_WEIGHTS:
    raise ValueError(f"config.class_weight must be one of {CLASS_WEIGHTS}, got {weight!r}")
  forest, depth = tabular.random_forest, config.max_depth
  return {"baseline": forest(config.baseline_n_estimators, max_depth=depth,
                             n_jobs=config.n_jobs, class_weight=weight),
          "teachers": forest(config.n_estimators, max_depth=depth, class_weight=weight),
          "student": forest(config.student_n_estimators, max_depth=depth)}


def _pool_size(config, queries) -> int:
  """``config.num_pool``, refused unless it leaves query inputs on both sides (the pool the
  student learns from, the rest it is scored on)."""
  num_pool = int(config.num_pool)
  if not 0 < num_pool < len(queries):
    raise ValueError(f"num_pool must lie in (0, {len(queries)}) (query inputs), got {num_pool}")
  return num_pool


def confident_gnmax_key(root: jax.Array) -> jax.Array:
  """The key of Confident-GNMax's noise: ``fold_in(stream(root, "aggregation"),
  CONFIDENT_GNMAX_DRAW)``; query ``i`` then draws from ``fold_in(key, i)``."""
  return jax.random.fold_in(rng.stream(root, "aggregation"), CONFIDENT_GNMAX_DRAW)


def confident_gnmax_settings(config, num_query_rows: int | None = None
                             ) -> tuple[tabular.ConfidentParams, int] | None:
  """``(params, queries asked)`` of ``config.confident_gnmax``, or ``None`` when it is
  absent or not enabled.

  Fields: ``enabled`` (bool), ``threshold`` (real), ``sigma_threshold`` and ``sigma``
  (> 0), ``num_queries`` (``None``: ``config.num_pool``; else an integer >= 1, and below
  ``num_query_rows`` when given, so that rows are left to evaluate the student).

  Raises:
    ValueError: naming the field (``confident_gnmax.sigma``, ...) and its bad value.
  """
  cgn = config.get("confident_gnmax")
  if cgn is None or not checks.boolean(cgn.get("enabled", False), "confident_gnmax.enabled"):
    return None
  params = tabular.check_confident_params(
      tabular.ConfidentParams(cgn.threshold, cgn.sigma_threshold, cgn.sigma),
      prefix="confident_gnmax.")
  asked = cgn.get("num_queries")
  asked = checks.positive_int(config.num_pool if asked is None else asked,
                              "confident_gnmax.num_queries")
  if num_query_rows is not None and asked >= num_query_rows:
    raise ValueError(f"confident_gnmax.num_queries must be below the {num_query_rows} query "
                     f"inputs (the rest evaluate the student); got {asked}")
  return params, asked


def check_forests(config) -> None:
  """The run's seed, its counts and its forests, refused naming the field before the
  workdir is made or anything is read: ``num_teachers`` of 0 failed as a ZeroDivisionError,
  a forest of 0 trees, a depth or a pool of 0, or 0 joblib workers passed the dry run and
  failed in scikit-learn once the data were loaded or the teachers fitted."""
  rng.check_seed(config.seed, "config.seed")
  for name in ("num_teachers", "n_estimators", "student_n_estimators", "baseline_n_estimators",
               "num_pool"):
    checks.positive_int(config[name], f"config.{name}")
  checks.positive_int(config.get("reference_pools", 0), "config.reference_pools", minimum=0)
  if config.max_depth is not None:  # None: unlimited
    checks.positive_int(config.max_depth, "config.max_depth")
  if isinstance(config.n_jobs, bool) or not isinstance(config.n_jobs, int) or not (
      config.n_jobs >= 1 or config.n_jobs <= -1):
    raise ValueError(f"config.n_jobs must be an integer >= 1, or <= -1 (-1: all cores); got "
                     f"{config.n_jobs!r}")
  for q in config.query_counts:
    checks.positive_int(q, "config.query_counts")
  fraction = checks.scalar(config.test_fraction, "config.test_fraction")
  if not 0 < fraction < 1:
    raise ValueError(f"config.test_fraction must lie in (0, 1); got {config.test_fraction!r}")


def check_noise(config) -> None:
  """The labelling's settings, refused naming the field before anything is fitted (a bad
  noise scale was refused as ``scales (sigma)`` once every forest had been trained): the
  mechanisms' scales ``lnmax_gamma``, ``gnmax_sigma`` and their sweep grids (finite,
  > 0), ``delta``, the accounting's orders, moments and conversion, and the draws."""
  checks.positive(config.lnmax_gamma, "config.lnmax_gamma")
  checks.positive(config.gnmax_sigma, "config.gnmax_sigma")
  for name in ("lnmax_gammas", "gnmax_sigmas"):
    if len(config[name]):  # empty: the configured scale alone
      checks.positive_vector(config[name], f"config.{name}", "noise scales")
  checks.delta(config.delta, "config.delta")
  checks.orders(config.rdp_orders, "config.rdp_orders")
  checks.choice(config.rdp_conversion, "config.rdp_conversion", accounting.CONVERSIONS)
  for name in ("lnmax_max_moment", "lnmax_max_moment_wide", "num_seeds", "student_repeats"):
    checks.positive_int(config[name], f"config.{name}")


def _run(config, workdir: pathlib.Path) -> dict:
  budget_lib.refuse_spent_votes(workdir)  # before anything is fitted
  check_noise(config)
  root = rng.root_key(config.seed)  # stages draw the named streams of pate_jax.rng
  timings = {}
  t_start = time.perf_counter()
  load_at_start = list(os.getloadavg())  # The CPU is shared; record how busy it was.

  # 1. Data.
  t0 = time.perf_counter()
  train, queries, name = _load_task(config)
  _pool_size(config, queries)
  x_pool, y_pool = queries.features[:config.num_pool], queries.labels[:config.num_pool]
  x_eval, y_eval = queries.features[config.num_pool:], queries.labels[config.num_pool:]
  confident = confident_gnmax_settings(config, len(queries))  # before anything is fitted
  models = forests(config)
  num_classes = tabular.NUM_CLASSES  # the coding's, public: never counted on private rows
  timings["load_s"] = time.perf_counter() - t0
  logging.info("%s: %d train, %d queries (%d pool / %d eval), features %s", name,
               len(train), len(queries), len(y_pool), len(y_eval), train.feature_names)

  # 2. Non-private baseline on all training data.
  t0 = time.perf_counter()
  baseline = tabular.fit_model(rng.stream(root, "baseline"), train.features, train.labels,
                               estimator=models["baseline"])
  non_private = {
      "accuracy_eval": tabular.accuracy(baseline, x_eval, y_eval),
      "accuracy_all_queries": tabular.accuracy(baseline, queries.features, queries.labels)}
  timings["baseline_s"] = time.perf_counter() - t0
  logging.info("%snon-private forest: %s", experiment.PRIVATE_MARK, non_private)

  # 3. Teachers and votes.
  t0 = time.perf_counter()
  ensemble = tabular.fit_teachers(
      rng.stream(root, "teachers"), train.features, train.labels,
      config.num_teachers, estimator=models["teachers"], num_classes=num_classes,
      n_jobs=config.n_jobs, progress=experiment.progress)
  timings["teachers_fit_s"] = time.perf_counter() - t0
  t0 = time.perf_counter()
  votes, preds = tabular.teacher_votes(ensemble, queries.features, n_jobs=config.n_jobs)
  timings["teachers_predict_s"] = time.perf_counter() - t0
  # An earlier run's report would stand beside these new votes if this run were killed.
  experiment.remove_stale(workdir, ("results.json", "student_accuracy.png"))
  for tmp in votes_lib.temporary_files(workdir):  # left by a run killed while writing
    tmp.unlink(missing_ok=True)
  votes_lib.save_votes(workdir / "votes.npz", votes, queries.labels,
                       index=np.arange(len(queries)), num_pool=config.num_pool, dataset=name,
                       private_data=tabular.private_data(config.dataset, config.data_dir or None),
                       not_releasable=not_releasable(config))
  tabular.save_teacher_predictions(workdir / "teacher_predictions.npz", ensemble, preds,
                                   num_pool=config.num_pool)
  pool_votes = votes[:config.num_pool]
  plurality_all = np.asarray(aggregation.plurality(votes))
  plurality_pool = plurality_all[:config.num_pool]
  ensemble_res = tabular.ensemble_summary(ensemble, preds, queries.labels, plurality_all,
                                          pool_votes)
  logging.info(experiment.PRIVATE_MARK + "ensemble: %s", ensemble_res)

  # 4. Per mechanism: noisy labels of the pool (configured scale and sweep grid, one
  # vmapped call), their accuracy and eps, students on all labels and on prefixes.
  t0 = time.perf_counter()
  noise_key = rng.stream(root, "aggregation")
  student_seeds = tabular.random_states(rng.stream(root, "student_init"),
                                        int(config.student_repeats))
  task = tabular.StudentTask(x_pool, x_eval, y_eval, n_jobs=config.n_jobs,
                             estimator=models["student"])
  accountant = tabular.Accountant(
      delta=config.delta, max_moment=config.lnmax_max_moment,
      orders=tuple(config.rdp_orders), conversion=config.rdp_conversion,
      max_moment_wide=int(config.lnmax_max_moment_wide))
  counts = tabular.query_counts(config.query_counts, config.num_pool)
  mech = {}
  sweeps = {"queries": {"num_queries": counts}, "noise": {}}
  for m, scale, grid in (("lnmax", config.lnmax_gamma, config.lnmax_gammas),
                         ("gnmax", config.gnmax_sigma, config.gnmax_sigmas)):
    mech[m], sweeps["queries"][m], sweeps["noise"][m] = tabular.sweep_mechanism(
        noise_key, m, pool_votes, y_pool, plurality_pool, scale=scale, grid=grid,
        counts=counts, num_seeds=config.num_seeds, task=task, random_states=student_seeds,
        accountant=accountant)
    mech[m]["epsilon_at_grid_edge"] = grid_edges(mech[m], accountant)
    logging.info(experiment.PRIVATE_MARK + "%s: %s", m, mech[m])

  plurality_sets = [y_pool, plurality_pool] + [plurality_pool[:n] for n in counts]
  acc = tabular.student_accuracies(task, [student_seeds[0]] * len(plurality_sets),
                                   plurality_sets)
  reference_students = {"true_labels": float(acc[0]), "plurality_labels": float(acc[1])}
  if config.get("reference_pools", 0):
    # Where the first num_pool rows stand among random pools of the queries (true labels).
    pools = tabular.random_pool_accuracies(
        rng.stream(root, "reference_pools"), task.estimator, queries.features, queries.labels,
        config.num_pool, int(config.reference_pools), student_seeds[0], n_jobs=config.n_jobs)
    sd = float(pools.std(ddof=1)) if len(pools) > 1 else None
    reference_students["random_pools"] = {
        "num_pools": len(pools), "mean": float(pools.mean()), "sd": sd,
        "standard_error": sd / np.sqrt(len(pools)) if sd is not None else None,
        "below_first_pool": int(np.sum(pools < acc[0])), "accuracies": pools.tolist()}
  sweeps["queries"]["plurality_student_accuracy"] = acc[2:]
  timings["aggregation_students_sweeps_s"] = time.perf_counter() - t0

  # 7. Confident-GNMax (optional): its own noise, students on the answered rows only.
  confident_res = None
  if confident is not None:
    t0 = time.perf_counter()
    params, asked = confident
    public, private = tabular.confident_gnmax_run(
        confident_gnmax_key(root), votes, queries.labels, queries.features,
        num_queries=asked, params=params, estimator=task.estimator,
        random_states=student_seeds, accountant=accountant, n_jobs=config.n_jobs)
    public["non_private_accuracy_eval"] = tabular.accuracy(
        baseline, queries.features[asked:], queries.labels[asked:])
    confident_res = {**public, "private": reporting.private_part(**private)}
    timings["confident_gnmax_s"] = time.perf_counter() - t0
    logging.info(experiment.PRIVATE_MARK + "confident_gnmax: %s", confident_res)
  tabular.plot_sweeps(workdir / "student_accuracy.png", sweeps, non_private["accuracy_eval"],
                      lnmax_gamma=config.lnmax_gamma, gnmax_sigma=config.gnmax_sigma,
                      delta=config.delta, num_seeds=config.num_seeds, num_pool=config.num_pool)
  timings["total_s"] = time.perf_counter() - t_start

  results = {
      "dataset": name,
      "num_train": len(train), "num_queries": len(queries), "num_pool": config.num_pool,
      "num_eval": len(y_eval), "feature_names": list(train.feature_names),
      "non_private": non_private,
      "ensemble": ensemble_res,
      "lnmax": mech["lnmax"],
      "gnmax": mech["gnmax"],
      **({"confident_gnmax": confident_res} if confident_res is not None else {}),
      "reference_students": reference_students,
      "sweeps": sweeps,
      "timings": timings,
      "cpu_load_average_1_5_15min": {"start": load_at_start, "end": list(os.getloadavg())},
      "files": ["votes.npz", "teacher_predictions.npz", "student_accuracy.png"],
  }
  path = experiment.write_results(workdir, results, config=config, seed=config.seed,
                                  disclosure=experiment.MEASUREMENT)
  logging.info("wrote %s", path)  # not its seconds: the forests' fits on the private rows
  return results


def plan(config) -> dict:
  """``--dry_run``: the task's sizes (training rows, query pool and evaluation rows,
  features; loads the CSVs), rows per teacher, the forests (and their class weights), the
  sweep grids, and Diabetes' preparation."""
  check_forests(config)
  out = {"dataset": config.dataset, "num_teachers": int(config.num_teachers),
         "n_estimators": int(config.n_estimators), "num_pool": int(config.num_pool),
         "query_counts": tuple(config.query_counts), "lnmax_gammas": tuple(config.lnmax_gammas),
         "gnmax_sigmas": tuple(config.gnmax_sigmas), "num_seeds": int(config.num_seeds),
         "student_repeats": int(config.student_repeats),
         "labels_dir": config.get("labels_dir", "") or "off (teachers, votes and sweeps)",
         "class_weight": forests(config)["teachers"].get_params()["class_weight"]}
  if config.dataset == "diabetes":
    why = not_releasable(config)
    out["diabetes_preparation"] = (f"{_preparation(config)}: "
                                   + ("no secret-noise release of its votes" if why else
                                      "rows and columns chosen without looking at the rows"))
  if not config.get("labels_dir"):
    check_noise(config)
  confident = confident_gnmax_settings(config)
  if confident is not None:
    out["confident_gnmax"] = {**confident[0].as_dict(), "num_queries": confident[1]}
  try:
    train, queries, name = _load_task(config)
  except (FileNotFoundError, OSError) as e:
    out["data"] = f"MISSING: {e}"
    return out
  out.update({"task": name, "train_rows": len(train), "query_rows": len(queries),
              "eval_rows": len(queries) - int(config.num_pool),
              "num_pool_valid": 0 < config.num_pool < len(queries),
              **({"confident_gnmax_num_queries_valid": confident[1] < len(queries)}
                 if confident is not None else {}),
              "features": int(train.features.shape[1]),
              "rows_per_teacher": len(train) // int(config.num_teachers),
              "noisy_label_draws_per_grid_point": int(config.num_seeds) * int(config.num_pool)})
  return out


def grid_edges(summary: dict, accountant) -> list[str]:
  """The ``best_moment*`` / ``best_order*`` keys of a mechanism's summary whose best sits at
  the end of its grid (moments ``1..max_moment`` or ``..max_moment_N``: the last; RDP
  orders: either end), where a wider grid would give a smaller ε."""
  edges = []
  for key, best in summary.items():
    if key.startswith("best_moment"):
      hi = int(key.rsplit("_", 1)[1]) if "_max_moment_" in key else accountant.max_moment
      if best == hi:
        edges.append(key)
    elif key.startswith("best_order") and best in (min(accountant.orders),
                                                   max(accountant.orders)):
      edges.append(key)
  return edges


def report(res: dict) -> None:
  """Prints the headline: accuracies, ε of both mechanisms, and the wall time; then, when it
  ran, Confident-GNMax's line (its private values marked so). A released student's run:
  its labels, students and ε."""
  if res.get("released_student"):
    print(f"{res['dataset']}: student on {res['num_answered']} of {res['num_asked']} "
          f"{res['mechanism']} labels released (labels {res['label_accuracy_answered']:.4f} "
          f"right): accuracy {res['student_accuracy_mean']:.4f} (mean of "
          f"{res['student_repeats']}) on {res['num_eval']} held-out queries | budget's ε "
          f"{res['epsilon']:.3f} of {res['epsilon_max']:g} (δ = "
          f"{reporting.delta_text(res['delta'], res.get('sampler_delta'))}) | "
          f"{res['timings']['total_s']:.0f} s")
    note = reporting.budgets_note(res.get("budgets_on_private_data"))
    if note:
      print(note)
    return
  name, non_private, ensemble_res = res["dataset"], res["non_private"], res["ensemble"]
  mech, timings = {"lnmax": res["lnmax"], "gnmax": res["gnmax"]}, res["timings"]
  print(f"{name}: non-private {non_private['accuracy_eval']:.4f} | plurality (pool) "
        f"{ensemble_res['plurality_accuracy_pool']:.4f} | LNMax labels "
        f"{mech['lnmax']['label_accuracy']:.4f}, student {mech['lnmax']['student_accuracy']:.4f}, "
        f"eps {mech['lnmax']['epsilon_data_dependent']:.3f} (data-indep. "
        f"{mech['lnmax']['epsilon_data_independent']:.3f}) | GNMax labels "
        f"{mech['gnmax']['label_accuracy']:.4f}, student {mech['gnmax']['student_accuracy']:.4f}, "
        f"eps {mech['gnmax']['epsilon_data_dependent']:.3f} | {timings['total_s']:.0f} s")
  cgn = res.get("confident_gnmax")
  if cgn is not None:
    print(f"Confident-GNMax (T={cgn['threshold']:g}, sigma_T={cgn['sigma_threshold']:g}, "
          f"sigma={cgn['sigma']:g}): {cgn['num_answered']}/{cgn['num_queries']} answered, "
          f"labels {cgn['label_accuracy']:.4f}, student {cgn['student_accuracy_mean']:.4f} "
          f"(mean of {cgn['student_repeats']}), eps data-indep. "
          f"{cgn['epsilon_data_independent']:.3f} | private (data owner only): data-dep. eps "
          f"{cgn['private']['epsilon_data_dependent']:.3f}, expected answered "
          f"{cgn['private']['expected_answered']:.1f}, expected eps "
          f"{cgn['private']['expected_epsilon_data_dependent']:.3f}")

