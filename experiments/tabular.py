"""Tabular PATE (Papernot et al. 2017, Appendix C): random-forest teachers and student.

Stages, all in one run (each hands over through the workdir):
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
     the whole noise grid from one vmapped aggregation call) -> PNG.

Usage:
  python experiments/tabular.py --config configs/adult_rf.py --workdir runs/adult_rf
"""

from __future__ import annotations

import os
import pathlib
import time

from absl import logging
import jax
import jax.numpy as jnp
import joblib
import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from pate_jax import accounting  # noqa: E402
from pate_jax import aggregation  # noqa: E402
from pate_jax import experiment  # noqa: E402
from pate_jax import tabular  # noqa: E402
from pate_jax import votes as votes_lib  # noqa: E402
from pate_jax.data import adult as adult_lib  # noqa: E402
from pate_jax.data import diabetes as diabetes_lib  # noqa: E402

# Key streams folded into the root key.
_STREAM_DATA, _STREAM_TEACHERS, _STREAM_BASELINE, _STREAM_STUDENT, _STREAM_NOISE = range(5)


def load_dataset(config) -> tuple[tabular.TabularSplit, tabular.TabularSplit, str]:
  """(train split, query split, dataset name) as the config says."""
  data_dir = config.data_dir or None
  drop = [c.strip() for c in config.drop_columns.split(",") if c.strip()]
  if config.dataset == "adult":
    splits = adult_lib.load_adult(data_dir, splits=("train", config.query_split),
                                  drop_columns=drop)
    train, queries = splits["train"], splits[config.query_split]
  elif config.dataset == "diabetes":
    if config.query_split != "test":
      raise ValueError(f"query_split: Diabetes has only a 'test' split, got "
                       f"{config.query_split!r}")
    key = jax.random.fold_in(jax.random.key(config.seed), _STREAM_DATA)
    splits = diabetes_lib.load_diabetes(key, data_dir, test_fraction=config.test_fraction,
                                        drop_columns=drop)
    train, queries = splits["train"], splits["test"]
  else:
    raise ValueError(f"dataset must be 'adult' or 'diabetes', got {config.dataset!r}")
  name = config.dataset + "".join(f"-no{c}" for c in drop)
  if config.query_split != "test":
    name += f"-{config.query_split}"
  return train, queries, name


def _accuracy(model, x, y) -> float:
  return float(np.mean(np.asarray(model.predict(x)) == y)) if len(y) else float("nan")


def _fit_and_score(seed: int, x, y, x_eval, y_eval, n_estimators, max_depth) -> float:
  """Student forest on (x, y), scored on (x_eval, y_eval). Runs in a joblib worker."""
  from sklearn.ensemble import RandomForestClassifier
  model = RandomForestClassifier(n_estimators=n_estimators, max_depth=max_depth,
                                 random_state=seed, n_jobs=1).fit(x, y)
  return _accuracy(model, x_eval, y_eval)


def _students(seeds, label_sets, x_pool, x_eval, y_eval, config) -> np.ndarray:
  """Accuracy of one student per (seed, labels of the pool prefix) pair, in parallel."""
  tasks = [joblib.delayed(_fit_and_score)(int(s), x_pool[:len(lab)], np.asarray(lab),
                                          x_eval, y_eval, config.student_n_estimators,
                                          config.max_depth)
           for s, lab in zip(seeds, label_sets)]
  return np.asarray(joblib.Parallel(n_jobs=config.n_jobs)(tasks), dtype=np.float64)


def _lnmax_eps(votes, gamma, config, data_dependent=True):
  eps, moment = accounting.lnmax_moments_epsilon(
      votes, gamma, config.delta, data_dependent=data_dependent,
      max_moment=config.lnmax_max_moment)
  return float(eps), int(moment)


def _gnmax_eps(votes, sigma, config, data_dependent=True):
  orders = np.asarray(config.rdp_orders, np.float64)
  rdp = accounting.gnmax_rdp(votes, sigma, orders, data_dependent=data_dependent)
  total = np.asarray(rdp, np.float64).sum(axis=0)  # Compose over queries (float64).
  eps, order = accounting.rdp_to_epsilon(total, orders, config.delta,
                                         config.rdp_conversion)
  return float(eps), float(order)


def _lnmax_eps_prefixes(votes, gamma, counts, config) -> list[float]:
  """Data-dependent LNMax eps of the first n queries, for each n in counts."""
  moments = np.arange(1, config.lnmax_max_moment + 1, dtype=np.float64)
  per_query = np.asarray(accounting.lnmax_log_moments(votes, gamma, moments,
                                                      data_dependent=True), np.float64)
  totals = np.cumsum(per_query, axis=0)[np.asarray(counts) - 1]  # [N, L]
  eps, _ = accounting.moments_to_epsilon(totals, moments, config.delta)
  return [float(e) for e in np.asarray(eps)]


def _gnmax_eps_prefixes(votes, sigma, counts, config) -> list[float]:
  """Data-dependent GNMax eps (RDP) of the first n queries, for each n in counts."""
  orders = np.asarray(config.rdp_orders, np.float64)
  per_query = np.asarray(accounting.gnmax_rdp(votes, sigma, orders, data_dependent=True),
                         np.float64)
  totals = np.cumsum(per_query, axis=0)[np.asarray(counts) - 1]  # [N, K]
  eps, _ = accounting.rdp_to_epsilon(totals, orders, config.delta, config.rdp_conversion)
  return [float(e) for e in np.asarray(eps)]


def plot(path, sweeps, baselines, config) -> None:
  """Student accuracy vs number of queries and vs noise scale (3 panels)."""
  fig, axes = plt.subplots(1, 3, figsize=(16, 4.6))
  ax = axes[0]
  twin = ax.twinx()
  n = np.asarray(sweeps["queries"]["num_queries"])
  for mech, style, color in (("lnmax", "o-", "C0"), ("gnmax", "s-", "C1")):
    acc = np.asarray(sweeps["queries"][mech]["student_accuracy_mean"])
    err = np.asarray(sweeps["queries"][mech]["student_accuracy_std"])
    scale = (f"γ={config.lnmax_gamma}" if mech == "lnmax" else f"σ={config.gnmax_sigma}")
    ax.errorbar(n, 100 * acc, 100 * err, fmt=style, color=color, capsize=3,
                label=f"student, {mech.upper()} labels ({scale})")
    twin.plot(n, sweeps["queries"][mech]["epsilon"], ":", marker=style[0], color=color,
              alpha=0.6, label=f"ε, {mech.upper()} (data-dep.)")
  ax.plot(n, 100 * np.asarray(sweeps["queries"]["plurality_student_accuracy"]), "k:",
          label="student, plurality labels (no noise)")
  ax.axhline(100 * baselines["non_private"], color="gray", ls="--",
             label="non-private forest")
  ax.set_xlabel("number of labelled queries (student training set)")
  ax.set_ylabel("student accuracy on held-out inputs (%)")
  twin.set_ylabel(f"ε at δ={config.delta:g}")
  ax.set_title("Student accuracy vs number of queries")
  h1, l1 = ax.get_legend_handles_labels()
  h2, l2 = twin.get_legend_handles_labels()
  ax.legend(h1 + h2, l1 + l2, fontsize=7, loc="lower right")

  for ax, mech, xlabel in ((axes[1], "lnmax", "Laplace scale 1/γ"),
                           (axes[2], "gnmax", "Gaussian σ")):
    s = sweeps["noise"][mech]
    scales = np.asarray(s["noise_scale"], np.float64)
    x = 1.0 / scales if mech == "lnmax" else scales
    order = np.argsort(x)
    ax.errorbar(x[order], 100 * np.asarray(s["student_accuracy_mean"])[order],
                100 * np.asarray(s["student_accuracy_std"])[order], fmt="o-", capsize=3,
                label="student accuracy")
    ax.plot(x[order], 100 * np.asarray(s["label_accuracy_mean"])[order], "^--",
            label=f"label accuracy ({config.num_seeds} draws)")
    ax.axhline(100 * baselines["non_private"], color="gray", ls="--", label="non-private")
    ax.set_xscale("log")
    ax.set_xlabel(xlabel)
    ax.set_ylabel("accuracy (%)")
    ax.set_title(f"{mech.upper()}: {config.num_pool} queries")
    twin = ax.twinx()
    twin.plot(x[order], np.asarray(s["epsilon"])[order], "r.:", label="ε (data-dep.)")
    twin.set_ylabel(f"ε at δ={config.delta:g}", color="r")
    lines = ax.get_legend_handles_labels()
    lines2 = twin.get_legend_handles_labels()
    ax.legend(lines[0] + lines2[0], lines[1] + lines2[1], fontsize=7, loc="lower left")
  fig.tight_layout()
  fig.savefig(path, dpi=120)
  plt.close(fig)


def run(config, workdir: str | os.PathLike) -> dict:
  """The whole experiment; writes into ``workdir`` and returns the results dict."""
  workdir = pathlib.Path(workdir)
  workdir.mkdir(parents=True, exist_ok=True)
  root = jax.random.key(config.seed)
  timings = {}
  t_start = time.perf_counter()
  load_at_start = list(os.getloadavg())  # The CPU is shared; record how busy it was.

  # 1. Data.
  t0 = time.perf_counter()
  train, queries, name = load_dataset(config)
  if not 0 < config.num_pool < len(queries):
    raise ValueError(f"num_pool must lie in (0, {len(queries)}) (query inputs), got "
                     f"{config.num_pool}")
  x_pool, y_pool = queries.features[:config.num_pool], queries.labels[:config.num_pool]
  x_eval, y_eval = queries.features[config.num_pool:], queries.labels[config.num_pool:]
  num_classes = int(max(train.labels.max(), queries.labels.max())) + 1
  timings["load_s"] = time.perf_counter() - t0
  logging.info("%s: %d train, %d queries (%d pool / %d eval), features %s", name,
               len(train), len(queries), len(y_pool), len(y_eval), train.feature_names)

  forest = tabular.random_forest  # sklearn defaults except n_estimators (Appendix C).

  # 2. Non-private baseline on all training data.
  t0 = time.perf_counter()
  baseline = tabular.fit_model(
      jax.random.fold_in(root, _STREAM_BASELINE), train.features, train.labels,
      estimator=forest(config.baseline_n_estimators, max_depth=config.max_depth,
                       n_jobs=config.n_jobs))
  non_private = {"accuracy_eval": _accuracy(baseline, x_eval, y_eval),
                 "accuracy_all_queries": _accuracy(baseline, queries.features, queries.labels)}
  timings["baseline_s"] = time.perf_counter() - t0
  logging.info("non-private forest: %s", non_private)

  # 3. Teachers and votes.
  t0 = time.perf_counter()
  ensemble = tabular.fit_teachers(
      jax.random.fold_in(root, _STREAM_TEACHERS), train.features, train.labels,
      config.num_teachers, estimator=forest(config.n_estimators, max_depth=config.max_depth),
      num_classes=num_classes, n_jobs=config.n_jobs, progress=experiment.progress)
  timings["teachers_fit_s"] = time.perf_counter() - t0
  t0 = time.perf_counter()
  votes, preds = tabular.teacher_votes(ensemble, queries.features, n_jobs=config.n_jobs)
  timings["teachers_predict_s"] = time.perf_counter() - t0
  votes_lib.save_votes(workdir / "votes.npz", votes, queries.labels,
                       index=np.arange(len(queries)), num_pool=config.num_pool, dataset=name)
  np.savez_compressed(workdir / "teacher_predictions.npz",
                      predictions=preds.astype(np.int8 if num_classes < 128 else np.int32),
                      partition=ensemble.index, random_states=ensemble.random_states,
                      index=np.arange(len(queries)), num_pool=np.int64(config.num_pool))
  pool_votes = votes[:config.num_pool]
  teacher_acc = (preds == queries.labels[None]).mean(axis=1)
  plurality_all = np.asarray(aggregation.plurality(votes))
  plurality_pool = plurality_all[:config.num_pool]
  gap = np.asarray(votes_lib.normalized_gap(pool_votes))
  ensemble_res = {
      "num_teachers": ensemble.num_teachers,
      "examples_per_teacher": int(ensemble.index.shape[1]),
      "dropped_examples": ensemble.dropped,
      "teacher_accuracy_mean": float(teacher_acc.mean()),
      "teacher_accuracy_min": float(teacher_acc.min()),
      "teacher_accuracy_max": float(teacher_acc.max()),
      "plurality_accuracy_pool": float(np.mean(plurality_pool == y_pool)),
      "plurality_accuracy_all_queries": float(np.mean(plurality_all == queries.labels)),
      "pool_normalized_gap_median": float(np.median(gap)),
  }
  logging.info("ensemble: %s", ensemble_res)

  # 4. Noisy labels of the pool (one vmapped call per mechanism for the configured
  # noise scale and the whole sweep grid), their accuracy, privacy and students.
  t0 = time.perf_counter()
  noise_key = jax.random.fold_in(root, _STREAM_NOISE)
  repeats = int(config.student_repeats)
  student_seeds = tabular.random_states(jax.random.fold_in(root, _STREAM_STUDENT), repeats)
  counts = sorted({int(n) for n in config.query_counts if 0 < int(n) < config.num_pool}
                  | {config.num_pool})
  mech = {}
  sweeps = {"queries": {"num_queries": counts}, "noise": {}}
  for m, scale, grid, agg in (
      ("lnmax", config.lnmax_gamma, config.lnmax_gammas, aggregation.lnmax),
      ("gnmax", config.gnmax_sigma, config.gnmax_sigmas, aggregation.gnmax)):
    scales = [float(scale), *map(float, grid)]  # Index 0: the configured scale.
    # labels[s, r] = agg(fold_in(noise_key, r), pool votes, scales[s]): scale and
    # draw are vmapped; draw r uses the same key at every scale (common random
    # numbers), and per-query keys make prefixes the labels of fewer queries.
    labels = np.asarray(jax.vmap(lambda s: jax.vmap(
        lambda r: agg(jax.random.fold_in(noise_key, r), pool_votes, s))(
            jnp.arange(repeats, dtype=jnp.uint32)))(jnp.asarray(scales, jnp.float32)))
    label_acc = np.asarray(aggregation.label_accuracy_grid(
        noise_key, pool_votes, y_pool, m, scales, config.num_seeds))  # [S, num_seeds]
    # Students: every (scale, draw) on all pool labels, then prefixes of the
    # configured scale's labels; each draw r trains with forest seed r.
    sets = [labels[s, r] for s in range(len(scales)) for r in range(repeats)]
    sets += [labels[0, r, :n] for n in counts for r in range(repeats)]
    acc = _students(list(student_seeds) * (len(sets) // repeats), sets, x_pool, x_eval,
                    y_eval, config)
    acc_grid = acc[:len(scales) * repeats].reshape(len(scales), repeats)
    acc_counts = acc[len(scales) * repeats:].reshape(len(counts), repeats)

    eps_fn = _lnmax_eps if m == "lnmax" else _gnmax_eps
    eps_dd = [eps_fn(pool_votes, sc, config, True) for sc in scales]
    eps_di = [eps_fn(pool_votes, sc, config, False) for sc in scales]
    best = "best_moment" if m == "lnmax" else "best_order"
    mech[m] = {
        ("gamma" if m == "lnmax" else "sigma"): scale,
        "epsilon_data_dependent": eps_dd[0][0], f"{best}_data_dependent": eps_dd[0][1],
        "epsilon_data_independent": eps_di[0][0], f"{best}_data_independent": eps_di[0][1],
        "delta": config.delta,
        "num_queries": config.num_pool,
        "label_accuracy": float(np.mean(labels[0, 0] == y_pool)),
        "label_accuracy_mean_over_seeds": float(label_acc[0].mean()),
        "label_agreement_with_plurality": float(np.mean(labels[0, 0] == plurality_pool)),
        "student_accuracy": float(acc_grid[0, 0]),
        "student_accuracy_mean": float(acc_grid[0].mean()),
        "student_accuracy_std": float(acc_grid[0].std()),
        "student_repeats": repeats,
    }
    if m == "lnmax":
      wide = int(config.lnmax_max_moment_wide)
      eps_wide, best_wide = accounting.lnmax_moments_epsilon(
          pool_votes, scale, config.delta, data_dependent=True, max_moment=wide)
      mech[m].update({
          "laplace_scale": 1.0 / scale,
          f"epsilon_data_dependent_max_moment_{wide}": float(eps_wide),
          f"best_moment_data_dependent_max_moment_{wide}": int(best_wide),
          "accountant": "2017 moments accountant (Theorems 2-3, Lemma 4), moments "
                        f"1..{config.lnmax_max_moment}"})
    else:
      mech[m]["accountant"] = (f"RDP (2018, Theorem 6 data-dependent), "
                               f"{config.rdp_conversion} conversion")
    logging.info("%s: %s", m, mech[m])
    prefix_fn = _lnmax_eps_prefixes if m == "lnmax" else _gnmax_eps_prefixes
    sweeps["queries"][m] = {
        "student_accuracy_mean": acc_counts.mean(axis=1),
        "student_accuracy_std": acc_counts.std(axis=1),
        "epsilon": prefix_fn(pool_votes, scale, counts, config)}
    sweeps["noise"][m] = {
        "noise_scale": scales[1:], "student_accuracy_mean": acc_grid[1:].mean(axis=1),
        "student_accuracy_std": acc_grid[1:].std(axis=1),
        "label_accuracy_mean": label_acc[1:].mean(axis=1),
        "epsilon": [e for e, _ in eps_dd[1:]],
        "epsilon_data_independent": [e for e, _ in eps_di[1:]]}

  plurality_sets = [y_pool, plurality_pool] + [plurality_pool[:n] for n in counts]
  acc = _students([student_seeds[0]] * len(plurality_sets), plurality_sets, x_pool, x_eval,
                  y_eval, config)
  reference_students = {"true_labels": float(acc[0]), "plurality_labels": float(acc[1])}
  sweeps["queries"]["plurality_student_accuracy"] = acc[2:]
  timings["aggregation_students_sweeps_s"] = time.perf_counter() - t0
  plot(workdir / "student_accuracy.png", sweeps, {"non_private": non_private["accuracy_eval"]},
       config)
  timings["total_s"] = time.perf_counter() - t_start

  results = {
      "dataset": name,
      "num_train": len(train), "num_queries": len(queries), "num_pool": config.num_pool,
      "num_eval": len(y_eval), "feature_names": list(train.feature_names),
      "non_private": non_private,
      "ensemble": ensemble_res,
      "lnmax": mech["lnmax"],
      "gnmax": mech["gnmax"],
      "reference_students": reference_students,
      "sweeps": sweeps,
      "timings": timings,
      "cpu_load_average_1_5_15min": {"start": load_at_start, "end": list(os.getloadavg())},
      "files": ["votes.npz", "teacher_predictions.npz", "student_accuracy.png"],
  }
  path = experiment.write_results(workdir, results, config=config, seed=config.seed)
  logging.info("wrote %s (%.1f s)", path, timings["total_s"])
  return results


def report(res: dict) -> None:
  name, non_private, ensemble_res = res["dataset"], res["non_private"], res["ensemble"]
  mech, timings = {"lnmax": res["lnmax"], "gnmax": res["gnmax"]}, res["timings"]
  print(f"{name}: non-private {non_private['accuracy_eval']:.4f} | plurality (pool) "
        f"{ensemble_res['plurality_accuracy_pool']:.4f} | LNMax labels "
        f"{mech['lnmax']['label_accuracy']:.4f}, student {mech['lnmax']['student_accuracy']:.4f}, "
        f"eps {mech['lnmax']['epsilon_data_dependent']:.3f} (data-indep. "
        f"{mech['lnmax']['epsilon_data_independent']:.3f}) | GNMax labels "
        f"{mech['gnmax']['label_accuracy']:.4f}, student {mech['gnmax']['student_accuracy']:.4f}, "
        f"eps {mech['gnmax']['epsilon_data_dependent']:.3f} | {timings['total_s']:.0f} s")


if __name__ == "__main__":
  experiment.run_main(run, report=report)
