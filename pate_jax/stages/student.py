"""Trains a student on the public pool and noisy teacher labels (PATE's published model).

  python experiments/train_student.py --config configs/student_pate_g.py:cpu \\
      --workdir runs/pate_g_100 --config.votes_dir=runs/pate_mnist_cpu/teachers

Reads the teachers' ``votes.npz`` (``--config.votes_dir``), labels
``aggregate.num_queries`` pool rows (``aggregate.query_selection``: by default
``"balanced"``, an equal share from each class; ``"first"``: the first rows) from the
teachers' budget (the aggregate stage, pate_jax.stages.aggregate, into
``<workdir>/labels/``; rows answered before, by any run, come back as recorded, never paid
for twice), trains the student with orbax checkpoints
(a killed run resumes) and writes ``results.json``: publishable -- held-out accuracy on
the evaluation rows (never queried), queries, the data-independent and released ε, δ,
label accuracy, epochs and wall time; ``private`` (for the data owner only) -- the
data-dependent ε. The active learner (configs/student_active.py) asks the teachers'
budget itself, round by round. Labels with research noise (``aggregate.noise_seed``) or
without noise make the whole file, and every line printed, private (a research
measurement). ``--config.num_seeds=N`` trains the students of N seeds side by side on the
same labels (one vmapped program); the file then gives their mean and each one's accuracy.
"""

from __future__ import annotations

import pathlib
import time
from typing import Any, Callable

import jax
import jax.numpy as jnp
import numpy as np

from pate_jax import _checks
from pate_jax import data as data_lib
from pate_jax import experiment, memory, reporting, rng, students
from pate_jax import labels as labels_lib
from pate_jax import votes as votes_lib
from pate_jax.stages import aggregate

LABELS = ("noisy", "plurality", "probabilities", "true", "true_answered")
"""``config.labels``: the aggregator's noisy answers (private), or, not private, the
teachers' plurality, their averaged probabilities, or the pool's own labels (the method
without label noise: a diagnostic) on the selected rows (``true``) or on the rows the noisy
aggregator answered (``true_answered``: its answers' rows with their errors taken out;
which rows is the aggregator's release, so the run reports its ε as ``noisy`` does)."""


def noisy_labels(config, out: pathlib.Path,
                 figures: list[experiment.PrivateFigure],
                 prefix: str = "config.aggregate.") -> tuple[dict, dict]:
  """labels.npz and the aggregate stage's results in ``out`` (pate_jax.stages.aggregate,
  with the run's seed): the rows answered before come back from the teachers' budget as
  recorded; settings that differ from the budget's are refused (``prefix``: how the
  aggregate stage's fields are named). Its private privacy.png goes to ``figures``, to be
  drawn after the student's files."""
  out = pathlib.Path(out)
  found = (out / labels_lib.FILENAME).exists()
  with config.aggregate.unlocked():
    config.aggregate.votes_dir = config.votes_dir
    config.aggregate.seed = config.seed
  results = aggregate.run(config.aggregate, out, prefix, figures=figures)
  if found:  # said once the budget has taken them (a refused run says why instead)
    print(f"labels.npz found in {out}: its rows came back from the teachers' budget as "
          "recorded (already paid for)")
  return labels_lib.load_labels(out), results


def check_schedule(config, prefix: str = "config.") -> None:
  """The training's schedule (``num_steps``, ``batch_size``, ``segment_steps``,
  ``max_to_keep``: integers >= 1), refused before anything is read or asked: the labels
  come first, and a student that then could not train would have spent the budget.
  ``prefix``: how the fields are named (``config.student.`` in the main job)."""
  for name in ("num_steps", "batch_size", "segment_steps", "max_to_keep"):
    _checks.positive_int(config.get(name, 1), f"{prefix}{name}")


def check_labelling(config, prefix: str = "config.") -> None:
  """The aggregate stage's settings of labels it answers (``noisy``, and ``true_answered``,
  the rows it answered; ``aggregate``: :func:`pate_jax.stages.aggregate.check_config`),
  refused naming the field before the votes and the public data are read. ``prefix`` as
  :func:`check_schedule`'s."""
  if (config.get("labels", "noisy") in ("noisy", "true_answered")
      and config.get("aggregate") is not None):
    aggregate.check_config(config.aggregate, f"{prefix}aggregate.")


def check_batch(config, pool_size: int, prefix: str = "config.") -> None:
  """``batch_size`` no larger than the pool of ``pool_size`` rows, refused before any label
  is asked for: each step's unlabelled batches are slices of the pool's permutations laid
  end to end (:func:`pate_jax.students.epoch_batches`), so a larger batch holds every row
  more than once and costs its size in every step. A batch above the labelled rows alone
  is allowed (the labelled set is repeated to fill it: an active learner's first rounds, a
  Confident-GNMax that answered few queries). ``prefix`` as :func:`check_schedule`'s."""
  b = _checks.positive_int(config.batch_size, f"{prefix}batch_size")
  if b > pool_size:
    raise ValueError(f"{prefix}batch_size must be <= the student's pool of {pool_size} rows "
                     f"(a larger batch repeats every row within each step); got {b}")


def check_config(config, prefix: str = "config.") -> None:
  """The settings refused naming the field before the votes are read or a label is asked
  for: the schedule (:func:`check_schedule`), the labelling (:func:`check_labelling`),
  ``labels`` (one of :data:`LABELS`; ``noisy`` with an active learner's
  ``active.round_sizes``), ``student.name`` (a registered student) and ``num_seeds``
  (an integer >= 1; 1 with an active learner). ``prefix`` as :func:`check_schedule`'s."""
  check_schedule(config, prefix)
  check_labelling(config, prefix)
  _checks.choice(config.student.name, f"{prefix}student.name", students.STUDENTS)
  if config.labels not in LABELS:
    raise ValueError(f"{prefix}labels must be one of {', '.join(map(repr, LABELS))}, got "
                     f"{config.labels!r}")
  active = bool(config.get("active") and config.active.round_sizes)
  if active and config.labels != "noisy":
    raise ValueError(f"{prefix}labels={config.labels!r} with {prefix}active.round_sizes: the "
                     "active learner asks the teachers' budget for noisy labels only; set "
                     f"{prefix}labels='noisy' or clear {prefix}active.round_sizes")
  num_seeds = _checks.positive_int(config.get("num_seeds", 1), f"{prefix}num_seeds")
  if num_seeds > 1 and active:
    raise ValueError(f"{prefix}num_seeds: the active learner trains one student (its rounds "
                     "ask for that student's least confident rows); use 1")


def run(config, workdir: str, restart_flag: str = experiment.RESTART_FLAG,
        on_labels: Callable[[], Any] | None = None, prefix: str = "config.",
        aggregate_prefix: str | None = None,
        figures: list[experiment.PrivateFigure] | None = None) -> dict:
  """Labels (or reuses) the student's queries, trains it and writes ``results.json``.

  ``on_labels``: called once the labels are written and before the training (the main
  job starts its attack there, beside the training); not called by the active learner,
  whose labels come during its training. Its seconds are private
  (``private.on_labels_seconds``), out of ``wall_seconds`` and ``phase_seconds``.
  ``prefix``: how the fields are named in the errors that refuse them
  (:func:`check_config`; ``config.student.`` in the main job); ``aggregate_prefix``: how
  the aggregate stage's are (``<prefix>aggregate.`` by default; ``config.aggregate.`` in
  the main job, whose student labels with its aggregate stage's config).
  ``figures``: ``None`` draws the aggregate stage's private privacy.png as the stage's last
  act, after results.json (its drawing takes a time that follows the votes, which the
  times of files written after it would carry); a list receives it instead, for a caller
  that writes files of its own after this stage (the main job) to draw it after them
  (:func:`pate_jax.experiment.draw_private_figures`).
  """
  with experiment.private_figures(figures) as drawn:
    return _run(config, workdir, restart_flag, on_labels, prefix, aggregate_prefix, drawn)


def _run(config, workdir: str, restart_flag: str, on_labels: Callable[[], Any] | None,
         prefix: str, aggregate_prefix: str | None,
         drawn: list[experiment.PrivateFigure]) -> dict:
  clock = experiment.PhaseClock()
  workdir = pathlib.Path(workdir)
  check_config(config, prefix)
  aggregate_prefix = aggregate_prefix or f"{prefix}aggregate."
  if not config.votes_dir:
    raise ValueError(f"{prefix}votes_dir: give the teachers' workdir (with votes.npz)")
  votes = votes_lib.load_votes(config.votes_dir)
  pool, eval_x, eval_y, num_classes = students.load_public_data(votes, config.data_dir)
  check_batch(config, pool.shape[0], prefix)
  root = rng.root_key(config.seed)
  num_seeds = int(config.get("num_seeds", 1))
  seed_roots = [root] + [rng.root_key(config.seed + i) for i in range(1, num_seeds)]
  student = students.build_student(config.student.name, num_classes, pool.shape[1:],
                                   **config.student.kwargs.to_dict())
  fit_kwargs = {"num_steps": int(config.num_steps), "batch_size": int(config.batch_size),
                "segment_steps": int(config.segment_steps),
                "fingerprint": {"student": config.student.to_dict(), "labels": config.labels},
                "restart": bool(config.get("restart", False)),
                "max_to_keep": int(config.get("max_to_keep", 1)),
                "restart_hint": experiment.restart_hint(restart_flag)}
  # Labels the teachers gave without noise, or with noise from a research seed (public: the
  # labels then bound the votes beyond any ε): the student, its accuracy and every line
  # about it are private (a research measurement), and so are its checkpoints' files
  # (owner-only). A student of labels released with secret noise is a release: orbax's modes.
  unnoised = config.labels in students.UNNOISED_LABELS
  if unnoised or rng.noise_record(config.aggregate.get("noise_seed"))["public"]:
    fit_kwargs["log"] = experiment.print_private
    fit_kwargs["private_checkpoints"] = True
  key = rng.stream(root, "student_train")
  results: dict = {"student": config.student.name, "labels": config.labels,
                   "dataset": votes["dataset"], "num_teachers": votes["num_teachers"],
                   "pool_size": int(pool.shape[0]),
                   "num_eval": int(eval_x.shape[0])}
  active = bool(config.get("active") and config.active.round_sizes)
  # Before anything is spent: a run killed or refused from here on leaves no earlier run's
  # report beside what it spent (a rerun with more queries charges them first).
  experiment.remove_stale(workdir, ("results.json",))
  clock.mark("data")
  if active:
    with config.aggregate.unlocked():
      config.aggregate.seed = config.seed
    budget = aggregate.make_budget(config.aggregate, votes, config.votes_dir, workdir,
                                   aggregate_prefix)
    before = budget.state()
    aggregate.warn_sampler_delta(  # the active learner draws no release
        budget, sum(config.active.round_sizes) + len(before["rows"]), votes["votes"],
        f"{aggregate_prefix}epsilon_max", int(before["release_count"]))
    empty = np.zeros((0,), np.int64)
    out = students.active_learning(
        student, students.make_student_data(pool, empty, empty, eval_x, eval_y, num_classes),
        budget, key, round_sizes=config.active.round_sizes,
        fit_kwargs={k: v for k, v in fit_kwargs.items() if k != "log"},  # its rounds log
        checkpoint_dir=str(workdir / "checkpoints"), log=fit_kwargs.get("log", print))
    fit, index, labels = out.fit, out.labelled_index, out.labels
    # The ε of every row charged (a Confident-GNMax row not answered paid its threshold).
    eps = reporting.epsilon_reports(
        budget.mechanism, budget.params, votes["votes"][out.charged_index],
        out.charged_answered, np.ones(out.charged_index.size, bool),
        budget.aggregator_kwargs["orders"],
        delta=config.aggregate.delta, max_moment=int(config.aggregate.max_moment))
    public, private = reporting.split_epsilon(eps["epsilon"])
    state = budget.state()
    results.update({"active_rounds": out.rounds, "stopped_by_budget": out.stopped_by_budget,
                    "num_queries": int(sum(r["asked"] for r in out.rounds)),
                    "noise_source": rng.noise_record(config.aggregate.get("noise_seed")),
                    "ledger_epsilon": budget.epsilon, "epsilon": public,
                    # As the aggregate stage's: the budget's bound, and how many budgets
                    # the private data has (their ε add up).
                    "ledger": {"epsilon": float(budget.epsilon),
                               "epsilon_max": float(budget.aggregator_kwargs["epsilon_max"]),
                               "accounting": "data-independent bound of the labels and the "
                                             "releases",
                               "budgets_on_private_data": budget.budgets_on_data(),
                               # Rows asked now, and those charged before (an upper
                               # bound of the rows the budget drew for).
                               **reporting.sampler_part(
                                   budget, sum(r["asked"] for r in out.rounds)
                                   + len(state["rows"]), votes["votes"],
                                   int(state["release_count"]))},
                    "private": reporting.private_part(epsilon=private)})
  else:
    if config.labels in ("noisy", "true_answered"):
      label_file, agg = noisy_labels(config, config.get("labels_dir") or workdir / "labels",
                                     drawn, aggregate_prefix)
      index, labels = students.answered_labels(label_file)
      if index.size == 0:  # the budget, or Confident-GNMax's threshold, refused every query
        raise ValueError(
            f"{aggregate_prefix[:-1]}: none of its {agg.get('num_queries')} queries was answered "
            f"(the budget's ε_max {agg.get('ledger', {}).get('epsilon_max')} leaves no room "
            "for an answer, or Confident-GNMax's threshold refused them all): the student has "
            f"no labels; raise {aggregate_prefix}epsilon_max or num_queries, or lower the "
            "noise")
      # answering, accounting, release (the private privacy.png is drawn at the end)
      results["labels_seconds"] = clock.mark("labels")
    if config.labels == "true_answered":  # the answered rows, their errors taken out
      labels = np.asarray(votes["labels"])[index]
      results["label_source"] = (
          "the pool's own labels (public) on the rows the noisy aggregator answered: which "
          "rows were answered is the aggregator's release, at its ε")
    if config.labels in ("noisy", "true_answered"):
      results.update({k: agg.get(k) for k in (
          "mechanism", "noise", "noise_source", "num_queries", "num_answered", "epsilon",
          "epsilon_tight", "epsilon_convention", "epsilon_at_grid_edge", "epsilon_release",
          "ledger") if k in agg})
      results["private"] = reporting.private_part(**{
          k: agg["private"][k] for k in ("epsilon", "epsilon_tight", "epsilon_release",
                                         "ledger") if k in agg["private"]})
    else:  # non-private comparison points
      index, labels = _clean_labels(config, votes, prefix)
      results["num_queries"] = int(index.size)
      if config.labels == "probabilities":
        results["temperature"] = float(config.student.kwargs.temperature)
      what = {"true": "the pool's own labels (no teacher)",
              "plurality": "the ensemble's plurality labels, without noise"}.get(
                  config.labels, "the ensemble's averaged probabilities at T = "
                  f"{config.student.kwargs.get('temperature', 1.0):g}, without noise")
      results["epsilon"] = f"not private: {what}"
    data = students.make_student_data(pool, index, labels, eval_x, eval_y, num_classes)
    clock.mark("labels")
    if on_labels is not None:
      on_labels()
      # The main job's hand-over (the GPU acceptance compresses the teachers' directory,
      # votes.npz and ledger among it: its seconds follow the votes' agreement): private,
      # out of the publishable phases and wall.
      results.setdefault("private", reporting.private_part())["on_labels_seconds"] = (
          clock.set_aside())
    if num_seeds == 1:
      fit, results["game_restarts"] = _fit_checked(config, student, data, key, root, workdir,
                                                   fit_kwargs)
    else:
      fit, seeds = _fit_seeds_checked(config, student, data, seed_roots, workdir, fit_kwargs)
      results.update(seeds)
  clock.mark("fit")  # the initialisation, checkpoints and held-out records with the training
  true = np.asarray(votes["labels"])[index]
  hard = labels if labels.ndim == 1 else labels.argmax(1)
  results.update({
      "eval_accuracy": fit.eval_accuracy,
      "num_labels": int(index.size),
      "label_accuracy": float(np.mean(hard == true)) if index.size else None,
      "delta": float(config.aggregate.delta),
      "steps": int(config.num_steps),
      "epochs": int(config.num_steps) * int(config.batch_size) / pool.shape[0],
      "resumed_from_step": fit.resumed_from,
      "train_seconds": fit.train_seconds,
      "history": fit.history,
      "wall_seconds": clock.elapsed(),
      # Where the wall went, phase by phase (they add up to it, but for this file's write);
      # the fit's training segments alone are ``train_seconds``.
      "phase_seconds": dict(clock.seconds),
  })
  experiment.write_results(workdir, results, config=config, seed=config.seed,
                           disclosure=experiment.MEASUREMENT if unnoised else
                           experiment.noise_disclosure(results.get("noise_source") or {}))
  return results


def compile_ahead(config, *, num_classes: int, image_shape: tuple[int, ...], pool_size: int,
                  num_eval: int, prefix: str = "config.") -> float:
  """Compiles the student's training for :func:`run` ahead, on synthetic data of the shapes
  its real data will have (``pool_size`` pool and ``num_eval`` held-out images of
  ``image_shape``, ``config.aggregate.num_queries`` labels: the real count where every
  query is answered, as GNMax does; otherwise the real run compiles its own) with
  :func:`pate_jax.students.compile_fit`: the main job does this while its teachers train
  on an accelerator. Nothing is read or written; returns the seconds taken. ``prefix`` as
  :func:`check_schedule`'s."""
  t = time.time()
  if config.get("active") and config.active.round_sizes:
    raise ValueError(f"{prefix}active: the active learner's rounds have no fixed shapes to "
                     "compile ahead")
  image_shape = tuple(int(n) for n in image_shape)
  student = students.build_student(config.student.name, num_classes, image_shape,
                                   **config.student.kwargs.to_dict())
  n, r = int(config.aggregate.num_queries), np.random.default_rng(0)
  labels = (np.full((n, num_classes), 1.0 / num_classes, np.float32)
            if config.labels == "probabilities" else np.arange(n) % num_classes)
  data = students.make_student_data(
      r.random((pool_size, *image_shape), np.float32), np.arange(n), labels,
      r.random((num_eval, *image_shape), np.float32), np.arange(num_eval) % num_classes,
      num_classes)
  students.compile_fit(student, data, rng.stream(rng.root_key(config.seed), "student_train"),
                       num_steps=int(config.num_steps), batch_size=int(config.batch_size),
                       segment_steps=int(config.segment_steps),
                       num_seeds=_checks.positive_int(config.get("num_seeds", 1),
                                                      f"{prefix}num_seeds"))
  return time.time() - t


def _fit_checked(config, student, data, key, root, workdir, fit_kwargs
                 ) -> tuple[students.FitResult, list[dict]]:
  """``students.fit``, restarted with a fresh key when the game fails ``config.game_check``
  (training metrics only), at most ``game_check.max_restarts`` times; the last try runs
  unchecked. Each try keeps its own checkpoints, so a killed run resumes in its try.
  Returns the fit and the failed tries."""
  check, restarts = _game_check(config)
  failed: list[dict] = []
  for attempt in range(restarts + 1):
    try_key = key if attempt == 0 else _restart_key(root, attempt)
    directory = workdir / ("checkpoints" if attempt == 0 else f"checkpoints_try{attempt + 1}")
    try:
      return students.fit(student, data, try_key, checkpoint_dir=str(directory),
                          check=check if attempt < restarts else None, **fit_kwargs), failed
    except students.GameFailed as e:  # a training metric: printed as the training log
      (fit_kwargs.get("log") or print)(f"{e}: restarting the student with a fresh key (try "
                                       f"{attempt + 2} of {restarts + 1})")
      failed.append(_failure(attempt, e))
  raise AssertionError("the last try runs unchecked and cannot fail its check")


def _game_check(config) -> tuple[students.GameCheck | None, int]:
  """``config.game_check`` as a :class:`pate_jax.students.GameCheck` (None where off) and
  the number of restarts it allows."""
  gc = config.get("game_check")
  restarts = int(gc.max_restarts) if gc is not None and gc.max_restarts else 0
  late = gc.get("late_max_value") if gc is not None else None
  check = (students.GameCheck(int(gc.step), str(gc.metric), float(gc.max_value),
                              None if late is None else float(late))
           if restarts else None)
  return check, restarts


def _restart_key(root: jax.Array, attempt: int) -> jax.Array:
  """The key of a student's try ``attempt + 1`` after a failed game (fresh, from the
  ``student_restart`` stream of the student's root)."""
  return jax.random.fold_in(rng.stream(root, "student_restart"), attempt)


def _failure(attempt: int, e: students.GameFailed) -> dict:
  return {"try": attempt + 1, "step": e.step, "metric": e.metric, "value": e.value,
          "max_value": e.max_value}


def _fit_seeds_checked(config, student, data, roots: list, workdir, fit_kwargs
                       ) -> tuple[students.FitResult, dict]:
  """``config.num_seeds`` students trained side by side in one vmapped program
  (:func:`pate_jax.students.fit_seeds`) on the same labels: seed ``i``'s student is the one
  a run with ``--config.seed`` + ``i`` trains (its ``student_train`` key, and its restarts'
  keys), so ``roots`` are those runs' root keys. A seed whose game fails the check is
  trained again with its next restart key, beside the others that failed, at most
  ``game_check.max_restarts`` times (the last try unchecked), each try in its own
  checkpoints as :func:`_fit_checked`'s.

  Returns a :class:`pate_jax.students.FitResult` whose accuracy is the seeds' mean and whose
  history is their mean curve, and the results' per-seed fields."""
  check, restarts = _game_check(config)
  log = fit_kwargs.get("log") or print
  seeds = [int(config.seed) + i for i in range(len(roots))]
  accuracy: list = [None] * len(roots)
  histories: list = [None] * len(roots)
  failed: list[dict] = []
  pending, seconds, resumed = list(range(len(roots))), 0.0, []
  for attempt in range(restarts + 1):
    keys = jnp.stack([rng.stream(roots[i], "student_train") if attempt == 0 else
                      _restart_key(roots[i], attempt) for i in pending])
    directory = workdir / ("checkpoints" if attempt == 0 else f"checkpoints_try{attempt + 1}")
    out = students.fit_seeds(student, data, keys, checkpoint_dir=str(directory),
                             check=check if attempt < restarts else None, **fit_kwargs)
    seconds += out.train_seconds
    resumed.append(out.resumed_from)
    again = []
    for j, i in enumerate(pending):
      if out.failed[j] is None:
        accuracy[i], histories[i] = out.eval_accuracy[j], out.history[j]
        continue
      log(f"seed {seeds[i]}: {out.failed[j]}: training it again with a fresh key (try "
          f"{attempt + 2} of {restarts + 1})")
      failed.append({"seed": seeds[i], **_failure(attempt, out.failed[j])})
      again.append(i)
    pending = again
    if not pending:
      break
  mean_history = [
      {k: (v if k == "step" else float(np.mean([h[n][k] for h in histories])))
       for k, v in entry.items()} for n, entry in enumerate(histories[0])]
  fit = students.FitResult(None, float(np.mean(accuracy)), mean_history, resumed[0],
                           seconds)
  # resumed_from_step is the first try's; each try's (the failed seeds' retrained beside
  # each other) is here.
  return fit, {"num_seeds": len(seeds), "seeds": seeds, "eval_accuracy_seeds": accuracy,
               "eval_accuracy_std": float(np.std(accuracy, ddof=1)),
               "game_restarts": failed, "seed_histories": histories,
               "resumed_from_step_tries": resumed}


def plan(config, *, votes_from: data_lib.ImageDataset | None = None,
         prefix: str = "config.") -> dict:
  """``--dry_run``: pool / labelled / held-out sizes, queries, the student's parameters and
  state, the training schedule and the compiled training step's temporary memory per batch
  (XLA's memory analysis of one step on abstract inputs).

  ``votes_from``: the dataset of teachers whose votes.npz is yet to be written (the main
  job's teachers stage): the sizes are those of its student split, the split the votes
  will cover. Without it and without the votes the sizes are MNIST's, and the plan says
  the votes are missing. ``prefix``: how the fields are named (:func:`check_schedule`)."""
  check_config(config, prefix)
  n = int(config.aggregate.num_queries)
  out: dict = {"student": config.student.name, "labels": config.labels,
               "mechanism": config.aggregate.mechanism, "num_queries": n}
  if votes_from is None:
    sizes, votes = experiment.votes_plan(config.votes_dir)
  else:
    sizes, votes = {"votes": "the teachers stage's, written by this job "
                             "(<workdir>/teachers/votes.npz)"}, None
  out.update(sizes)
  if votes is not None:
    pool, eval_x, _, num_classes = students.load_public_data(votes, config.data_dir)
    pool_shape, num_eval = pool.shape, len(eval_x)
  else:
    ds = votes_from or data_lib.load_image_dataset("mnist", config.data_dir or None)
    split = data_lib.student_split(ds.name, len(ds.test_labels))
    pool_shape = (len(split.pool_index), *ds.test_images.shape[1:])
    num_eval, num_classes = len(split.eval_index), ds.num_classes
    out["sizes_from"] = f"{ds.name} student split ({ds.source}): " + (
        "the split the teachers' votes will cover" if votes_from else "the votes are missing")
  check_batch(config, pool_shape[0], prefix)
  batch, steps = int(config.batch_size), int(config.num_steps)
  active = config.get("active") and config.active.round_sizes
  out.update({
      "pool_size": int(pool_shape[0]), "labelled": n if not active else
      f"up to {sum(config.active.round_sizes)} (active rounds {tuple(config.active.round_sizes)})",
      "num_eval": int(num_eval), "image_shape": tuple(pool_shape[1:]),
      "num_classes": int(num_classes), "batch_size": batch, "num_steps": steps,
      "segment_steps": int(config.segment_steps), "epochs": steps * batch / pool_shape[0],
      "pool_bytes": int(np.prod(pool_shape)) * 4})
  student = students.build_student(config.student.name, num_classes, tuple(pool_shape[1:]),
                                   **config.student.kwargs.to_dict())
  key = rng.stream(rng.root_key(config.seed), "student_train")
  pool_abs = jax.ShapeDtypeStruct(tuple(pool_shape), np.float32)
  state = jax.eval_shape(lambda k, x: students.init_state(student, x, k), key, pool_abs)
  params = state  # the trained parameters: every "*params" collection (PATE-G: g_ and d_)
  if isinstance(state, dict) and any("params" in k for k in state):
    params = {k: v for k, v in state.items() if "params" in k}
  out.update({"parameters": int(sum(np.prod(a.shape) for a in jax.tree.leaves(params))),
              "parameter_bytes": memory.tree_bytes(params),
              "state_bytes": memory.tree_bytes(state)})
  labels = (jax.ShapeDtypeStruct((n, num_classes), np.float32) if config.labels ==
            "probabilities" else jax.ShapeDtypeStruct((n,), np.int32))
  num_seeds = int(config.get("num_seeds", 1))
  if num_seeds == 1:
    step = students._loop._segment  # pylint: disable=protected-access  # the compiled step
  else:  # the seeds' stacked states and keys, in one vmapped program
    step = students._loop._seeds_segment  # pylint: disable=protected-access
    state, key = jax.tree.map(
        lambda a: jax.ShapeDtypeStruct((num_seeds, *a.shape), a.dtype), (state, key))
    out.update({"num_seeds": num_seeds, "state_bytes": memory.tree_bytes(state)})
  out["train_step_temp_bytes_per_batch"] = experiment.compiled_temp_bytes(
      lambda s, k, x, i, y: step(student, batch, 1, s, k, np.int32(0), x, i, y),
      state, key, pool_abs, jax.ShapeDtypeStruct((n,), np.int32), labels)
  return out


def _clean_labels(config, votes: dict, prefix: str = "config.") -> tuple[np.ndarray, np.ndarray]:
  """Labels without noise on the pool rows ``aggregate.query_selection`` picks: the pool's
  own labels (``true``), the plurality of the teachers' votes, or their averaged
  probabilities at the student's temperature (distillation)."""
  n = int(config.aggregate.num_queries)
  rows = votes_lib.query_rows(config.aggregate.query_selection,
                              np.asarray(votes["labels"])[:votes["num_pool"]], n,
                              int(votes["votes"].shape[1]))
  if config.labels == "true":
    return rows, np.asarray(votes["labels"])[rows]
  if config.labels == "plurality":
    return rows, np.asarray(votes["votes"])[rows].argmax(1)
  if "probabilities" not in votes:
    raise ValueError(f"{prefix}labels='probabilities': {config.votes_dir} has no teacher "
                     "probabilities; train the teachers with distill_temperatures set")
  temps = [float(t) for t in votes["temperatures"]]
  t = float(config.student.kwargs.get("temperature", 1.0))
  if t not in temps:
    raise ValueError(f"{prefix}student.kwargs.temperature: {t} is not among the teachers' saved "
                     f"temperatures {temps}")
  return rows, np.asarray(votes["probabilities"][temps.index(t)][rows], np.float64)


def report(r: dict) -> None:
  """The headline: publishable first; the private ε on a line that says so."""
  def fmt(eps):
    return (", ".join(f"{k} {v['epsilon']:.2f}" for k, v in eps.items())
            if isinstance(eps, dict) else str(eps))
  source = r.get("noise_source") or {}
  if source.get("public"):
    print(f"\nNOTE: {source['note']}")
  for f in r.get("game_restarts") or ():
    who = f"seed {f['seed']}'s " if "seed" in f else ""
    print(f"\nNOTE: {who}try {f['try']}'s game failed ({f['metric']} {f['value']:.3g} > "
          f"{f['max_value']:g} at step {f['step']}); the student restarted with a fresh key")
  release = r.get("epsilon_release")
  released = (f"; released ε {release['epsilon_released']:.2f}"
              if isinstance(release, dict) else "")
  ledger = r.get("ledger") or {}
  if "epsilon" in ledger:  # the teachers' budget: every label and release it paid for
    released += f"; budget ε {ledger['epsilon']:.2f} of {ledger['epsilon_max']:g}"
  seeds = ""
  if r.get("num_seeds", 1) > 1:
    seeds = (f" (mean of {r['num_seeds']} students, seeds {r['seeds'][0]}-{r['seeds'][-1]}: "
             + " ".join(f"{a:.2%}" for a in r["eval_accuracy_seeds"])
             + f"; sd {r['eval_accuracy_std']:.2%})")
  print(f"\n{r['student']} student: held-out accuracy {r['eval_accuracy']:.2%}{seeds} on "
        f"{r['num_eval']} images; {r['num_labels']} labels (accuracy "
        f"{r['label_accuracy']:.2%}); ε: {fmt(r['epsilon'])}{released} (δ "
        f"{reporting.delta_text(r['delta'], ledger.get('sampler_delta'))}); "
        f"{r['epochs']:.0f} epochs, {r['wall_seconds']:.0f} s")
  note = reporting.budgets_note((r.get("ledger") or {}).get("budgets_on_private_data"))
  if note:
    print(note)
  private = (r.get("private") or {}).get("epsilon")
  if private:
    print(f"{experiment.PRIVATE_MARK}data-dependent ε: {fmt(private)}")
