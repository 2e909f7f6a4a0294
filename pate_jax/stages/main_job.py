"""The main job: teachers → noisy labels and their privacy cost → the PATE-G student →
the histogram attack on the run's own votes → report.md.

  python experiments/run_pate.py --config configs/pate_mnist.py:cpu --workdir runs/pate_mnist_cpu

Runs each stage's ``run(config, workdir)`` in its own sub-directory of
``--workdir``: ``teachers/`` (votes.npz, gap.png), ``aggregate/`` (labels.npz, privacy.png),
``student/`` (accuracy.png) and ``attack/`` (the attack paper's attacker on the run's
lowest-consensus labelled queries, with fresh noise and with consistent answers;
defense_consistent_answers.png), and writes a summary ``results.json`` with the headline
numbers of every stage and ``report.md`` (Markdown with those figures), each in two parts:
*publishable* (the labels' accuracy, ε data-independent and released with smooth
sensitivity, the student's accuracy) and *private: for the data owner only* (the teachers'
accuracy and vote gap, the data-dependent ε, the attack on the run's own vote
histograms and its seconds, the seconds of drawing the private figures, the wall end to
end; the publishable wall stops at the student's end, before the attack and those
figures, which are drawn after every other stage's files). It
ends by printing the headlines (private lines say so) and the files' paths.
Noise is secret unless ``--config.noise_seed`` names a research seed (then every output
says that its ε is a measurement, not a release, and the run is private as a whole). The
attack needs the labels, not the student: where its device is not the student's (the host
beside an accelerator) it runs in a thread beside the student's training
(``--config.attack.beside_student``). In the same way the labels' accounting, almost all
compilation, is compiled ahead on synthetic votes beside the teachers' training
(``--config.compile_accounting_ahead``), and so is the student's training, on synthetic
data of its shapes (``--config.compile_student_ahead``).
The seconds of such host work are recorded apart from the stages' (``concurrent_seconds``),
and the teachers' and the student's stages break their own down (``phase_seconds``);
the teachers stage compiles its own training and votes ahead in a thread of its own
(``--config.teachers.compile_ahead``; its results' ``compiled_ahead_seconds``).
A rerun resumes: a killed teachers stage from its checkpoint (deleted once votes.npz is
written, unless ``--config.teachers.keep_checkpoints=True``; a finished one reuses
votes.npz), the teachers' privacy budget kept beside their votes
(``teachers/ledger.npz``: labels already paid for come back as recorded, never bought
again), and the student from its last checkpoint (the one kept: the trained model,
~30 MB). About 35 MB remain on disk after the CPU run (votes.npz, stored uncompressed,
4.4 MiB of it).

Overrides name the stage: ``--config.teachers.num_teachers=100``,
``--config.aggregate.num_queries=1000``, ``--config.student.num_steps=450``. The stages'
``seed`` and ``student.aggregate`` / ``student.votes_dir`` are set from ``--config.seed``,
``--config.aggregate`` and the workdir.
"""

from __future__ import annotations

import concurrent.futures
import copy
import pathlib
import time
from typing import Any, Callable

import jax
import numpy as np

from pate_jax import _checks, attacks, budget, experiment, labels as labels_lib, mechanisms
from pate_jax import io, reporting
from pate_jax import rng, votes as votes_lib
from pate_jax import data as data_lib
from pate_jax import teachers as teachers_lib
from pate_jax.stages import aggregate as aggregate_stage
from pate_jax.stages import attack as attack_lib
from pate_jax.stages import student as student_stage
from pate_jax.stages import teachers as teachers_stage


def _attack_skipped(config, prefix: str = "config.") -> str | None:
  """Why the main job makes no attack (``None``: it makes one; ``prefix``: how the fields
  are named, as :func:`run`'s)."""
  if not config.attack.enabled:
    return f"--{prefix}attack.enabled=False"
  if mechanisms.get(config.aggregate.mechanism,
                    f"{prefix}aggregate.mechanism") is not mechanisms.GNMAX:
    # The attack models GNMax's answers.
    return f"the attack models GNMax answers; the labels used {config.aggregate.mechanism}"
  return None


def _host_beside_accelerator(choice: bool | None, device_kind: str, name: str) -> bool:
  """``choice``, or where it is ``None``, whether the device of ``device_kind`` (named by
  ``name`` in a refusal; :func:`pate_jax.experiment.accounting_device`) is not the default
  device: the host beside an accelerator, where host work costs the accelerator nothing."""
  if choice is not None:
    return bool(choice)
  device = experiment.accounting_device(device_kind, name)
  return device is not None and device.platform != jax.devices()[0].platform


def attack_beside_student(config, prefix: str = "config.") -> bool:
  """Whether the attack runs in a thread beside the student's training (never where the
  job makes no attack): ``config.attack.beside_student``, or where that is ``None``,
  whenever the attack's device (``config.attack.device``) is not the one the student trains
  on (the host beside an accelerator: the two then share no device, and the attack costs
  the job no wall time). ``prefix`` as :func:`run`'s."""
  return _attack_skipped(config, prefix) is None and _host_beside_accelerator(
      config.attack.get("beside_student"), config.attack.get("device", "host"),
      f"{prefix}attack.device")


def accounting_ahead(config, prefix: str = "config.") -> bool:
  """Whether the labels' accounting is compiled ahead, in a thread beside the teachers'
  training (:func:`pate_jax.stages.aggregate.compile_ahead`):
  ``config.compile_accounting_ahead``, or where that is ``None``, whenever the accounting's
  device (``config.aggregate.accounting_device``) is not the teachers' (the host beside an
  accelerator). ``prefix`` as :func:`run`'s."""
  return _host_beside_accelerator(config.get("compile_accounting_ahead"),
                                  config.aggregate.get("accounting_device", "host"),
                                  f"{prefix}aggregate.accounting_device")


def student_ahead(config, prefix: str = "config.") -> bool:
  """Whether the student's training is compiled ahead, in the thread beside the teachers'
  training (:func:`pate_jax.stages.student.compile_ahead`): ``config.compile_student_ahead``,
  or where that is ``None``, whenever the student trains on an accelerator (compiling is
  host work). ``prefix`` as :func:`run`'s."""
  return _host_beside_accelerator(config.get("compile_student_ahead"), "host",
                                  f"{prefix}compile_student_ahead")


def _query_set(config):
  """The dataset and the rows (public pool, then held-out) its votes.npz will hold."""
  t = config.teachers
  ds = data_lib.load_image_dataset(t.dataset, t.data_dir or None,
                                   allow_fallback=t.allow_fallback)
  rows, num_pool = teachers_lib.query_set(ds)  # what the teachers stage votes on
  return ds, len(rows), num_pool


def compile_accounting(config, query_set=None, prefix: str = "config.") -> float:
  """:func:`pate_jax.stages.aggregate.compile_ahead` with the shapes this run's votes will
  have (its teachers, its dataset's classes and student split); returns its seconds.
  ``query_set``: :func:`_query_set`'s, where the caller has it (else loaded); ``prefix``
  as :func:`run`'s."""
  ds, num_rows, num_pool = query_set or _query_set(config)
  return aggregate_stage.compile_ahead(
      config.aggregate, num_teachers=int(config.teachers.num_teachers),
      num_classes=ds.num_classes, num_rows=num_rows, num_pool=num_pool,
      prefix=f"{prefix}aggregate.")


def compile_student(config, query_set=None, prefix: str = "config.") -> float:
  """:func:`pate_jax.stages.student.compile_ahead` with the shapes of this run's student
  split; returns its seconds. ``query_set`` and ``prefix`` as :func:`compile_accounting`'s."""
  ds, num_rows, num_pool = query_set or _query_set(config)
  return student_stage.compile_ahead(
      config.student, num_classes=ds.num_classes, image_shape=ds.test_images.shape[1:],
      pool_size=num_pool, num_eval=num_rows - num_pool, prefix=f"{prefix}student.")


def attack_computation(config, root: pathlib.Path,
                       prefix: str = "config.") -> Callable[[], dict]:
  """The histogram attack on the run's ``config.attack.num_histograms`` lowest-consensus
  answered queries (GNMax with the labels' σ), fresh noise vs consistent answers, as a
  function of no arguments: its inputs (votes, labels, keys, settings) are read now, so
  that it may run in another thread while the student trains. ``prefix`` as :func:`run`'s."""
  a, agg = config.attack, config.aggregate
  data = votes_lib.load_votes(root / "teachers")
  answered = labels_lib.load_labels(root / "aggregate", votes_digest=budget.votes_digest(data))
  index = answered["query_index"][answered["answered"]]
  votes = np.asarray(data["votes"])[index]
  pick = attacks.lowest_consensus(votes, a.num_histograms)
  key = rng.root_key(config.seed)
  keys = attacks.seed_keys(rng.stream(key, "attack_answers"), a.num_seeds)
  ledger_key = rng.stream(key, "attack_ledger")
  kwargs = {"sigma": float(agg.sigma), "num_queries": int(a.num_queries),
            "variants": attack_lib.reconstruction_variants(a), "delta": float(agg.delta),
            "dataset": str(data["dataset"]), "conversion": str(a.conversion)}
  device = experiment.accounting_device(a.get("device", "host"), f"{prefix}attack.device")

  def compute() -> dict:
    t = time.time()
    # Tens of thousands of small noisy answers, their ledger and the reconstructions: many
    # small programs, each compiled once, cheaper on the host than as GPU kernels. (The
    # device choice is local to the thread that computes.)
    with jax.default_device(device):
      results = attacks.produced_histograms(keys, ledger_key, votes[pick], index[pick],
                                            **kwargs)
      results["platform"] = _checks.default_platform()  # where the attack ran
    results["seconds"] = time.time() - t
    return results

  return compute


def attack_stage(config, root: pathlib.Path,
                 computed: concurrent.futures.Future | None = None,
                 prefix: str = "config.") -> dict:
  """The attack (:func:`attack_computation`; ``computed``: its results, computing beside
  the student) written to ``root/attack`` with its figure; returns its summary. ``prefix``
  as :func:`run`'s."""
  skipped = _attack_skipped(config, prefix)
  if skipped:
    return {"skipped": skipped}
  results = (computed.result() if computed is not None
             else attack_computation(config, root, prefix)())
  results["beside_student"] = computed is not None
  workdir = root / "attack"
  workdir.mkdir(parents=True, exist_ok=True)
  results["figures"] = [attacks.plot_defense(workdir / "defense_consistent_answers.png",
                                             results, experiment.PRIVATE_TITLE)]
  experiment.write_results(workdir, results, config=config.attack, seed=config.seed,
                           disclosure=experiment.MEASUREMENT)
  return reporting.attack_summary(results)


def student_plot_title(student: dict, noise_source: dict) -> str:
  """The student's curve's title: marked private where the labels' noise came from a
  research seed (then the labels, and the student drawn from them, bound the votes beyond
  any ε: the run is private as a whole)."""
  mark = experiment.PRIVATE_TITLE if noise_source.get("public") else ""
  return f"{mark}{student['student']} student, {student['num_labels']} noisy labels"


def write_report(summary: dict, root: pathlib.Path) -> pathlib.Path:
  """``report.md`` with the figures that exist (paths relative to the workdir), written
  atomically and owner-only (its second part is private)."""
  figures = {"gap": "teachers/gap.png", "privacy": "aggregate/privacy.png",
             "student": "student/accuracy.png",
             "attack": "attack/defense_consistent_answers.png"}
  figures = {k: f for k, f in figures.items() if (root / f).exists()}
  return experiment.write_text(root / "report.md",
                               reporting.main_job_markdown(summary, figures), private=True)


def check_student(config, prefix: str = "config.") -> None:
  """The main job's student learns from the aggregate stage's noisy labels, whose ε and
  ledger its publishable summary reports: un-noised labels (``config.student.labels``) and
  the active learner (which spends from the budget itself) are
  ``experiments/train_student.py``'s, refused here before anything runs, as is a student
  schedule it could not train on (:func:`pate_jax.stages.student.check_schedule`), which
  would otherwise fail after the teachers trained and its labels were paid for, and the
  aggregate stage's settings (:func:`pate_jax.stages.aggregate.check_config`), which the
  job read only in the aggregate stage (or its compilation ahead), once it had started.
  ``prefix`` as :func:`run`'s."""
  student_stage.check_schedule(config.student, f"{prefix}student.")
  aggregate_stage.check_config(config.aggregate, f"{prefix}aggregate.")
  if config.student.labels != "noisy":
    raise ValueError(f"{prefix}student.labels must be 'noisy' in the main job (its summary "
                     f"publishes the noisy labels' ε); got {config.student.labels!r}: train "
                     "other students with experiments/train_student.py on its teachers")
  if config.student.get("active") and config.student.active.round_sizes:
    raise ValueError(f"{prefix}student.active.round_sizes must be empty in the main job (its "
                     "summary publishes the aggregate stage's labels and ledger); run the "
                     "active learner with experiments/train_student.py on its teachers")


def wire(config, root: pathlib.Path | None, prefix: str = "config.") -> None:
  """One root seed for every stage (pate_jax.rng streams); the student labels with the
  aggregate stage's config, from the teachers' votes and into aggregate/ under ``root``
  (``None``: a dry run, before any stage has written anything). Refuses a student the
  main job cannot report (:func:`check_student`), and a stage's seed, noise seed or
  labelling given by hand (configs/pate_mnist.py leaves them unset): they would be
  replaced, and a research ``aggregate.noise_seed`` would silently become secret noise.
  The teachers' settings are then refused as ``config.teachers.<field>``, before the data
  is loaded (:func:`pate_jax.stages.teachers.check_config`), and the student's
  (:func:`pate_jax.stages.student.check_config`) as ``config.student.<field>``; ``prefix``
  (as :func:`run`'s) stands for ``config.`` in these names."""
  check_student(config, prefix)
  owned = {f"{stage}.seed": (f"--{prefix}seed", config.seed)
           for stage in ("teachers", "aggregate", "student")}
  owned["aggregate.noise_seed"] = (f"--{prefix}noise_seed", config.noise_seed)
  for field, (instead, value) in owned.items():  # unset, or set by an earlier wire()
    stage, name = field.split(".")
    if config[stage].get(name) not in (None, value):
      raise ValueError(f"{prefix}{field}: the main job sets it from {instead}; give "
                       f"{instead} instead")
  if "aggregate" in config.student and (
      config.student.aggregate.to_dict() != config.aggregate.to_dict()):
    raise ValueError(f"{prefix}student.aggregate: the main job's student labels with the "
                     f"aggregate stage's config; give --{prefix}aggregate.* instead")
  with config.unlocked():
    for stage in (config.teachers, config.aggregate, config.student):
      stage.seed = config.seed
    config.aggregate.noise_seed = config.noise_seed
    if root is not None:
      config.student.votes_dir = str(root / "teachers")
      config.student.labels_dir = str(root / "aggregate")
    config.student.aggregate = config.aggregate
  teachers_stage.check_config(config.teachers, f"{prefix}teachers.")
  student_stage.check_config(config.student, f"{prefix}student.")


def check_config(config, prefix: str = "config.") -> None:
  """Every setting the job refuses before it loads data or starts JAX's backend, naming the
  field (:func:`wire`'s checks, on a copy: ``config`` is left as it is, and
  ``attack.device``, one of :data:`pate_jax.experiment.ACCOUNTING_DEVICES`). ``prefix`` as
  :func:`run`'s: the GPU acceptance refuses ``config.pate_mnist.<field>`` before any of
  its runs starts."""
  wire(copy.deepcopy(config), None, prefix)
  _checks.choice(config.attack.get("device", "host"), f"{prefix}attack.device",
                 experiment.ACCOUNTING_DEVICES)


def run(config, workdir: str, *, on_labels: Callable[[], Any] | None = None,
        prefix: str = "config.") -> dict:
  """Runs the main job (module docstring) into ``workdir``. ``on_labels``: called once the
  student's labels are paid for and written, before anything drawn from their noise is
  printed (the GPU acceptance hands its workdir over then); its seconds are private
  (``private.seconds.hand_over``: that hand-over compresses the teachers' directory), out
  of ``wall_seconds`` and ``stage_seconds``. ``prefix``: how the fields are named in the
  errors that refuse them and in the stages' restart flags (``config.pate_mnist.`` in the
  GPU acceptance: ``config.pate_mnist.teachers.<field>``)."""
  t0 = time.time()
  root = pathlib.Path(workdir)
  wire(config, root, prefix)
  # A batch larger than the student's pool, refused before the teachers train; the
  # query set is loaded once, for this and the compilations ahead.
  query_set = _query_set(config)
  student_stage.check_batch(config.student, query_set[2], f"{prefix}student.")
  # A bad device name is refused now, not after the teachers and the student.
  experiment.accounting_device(config.attack.get("device", "host"), f"{prefix}attack.device")
  experiment.remove_stale(root, ("results.json", "report.md"))
  stage_seconds = {}  # where the wall goes (the GPU acceptance's 60 s target)
  concurrent_seconds = {}  # host work beside a stage: not in the sum of stage_seconds
  beside = attack_beside_student(config, prefix)
  # One host thread, idle while the accelerator trains: the labels' accounting compiled
  # ahead beside the teachers, then the attack beside the student.
  with experiment.side_thread() as pool:
    ahead = {name: pool.submit(compile_fn, config, query_set, prefix)
             for name, compile_fn, on in (
                 ("accounting_compiled_beside_teachers", compile_accounting,
                  accounting_ahead(config, prefix)),
                 ("student_compiled_beside_teachers", compile_student,
                  student_ahead(config, prefix))) if on}
    t = time.time()
    # The private figures (the teachers' gap.png, the aggregate stage's privacy.png) take a
    # time that follows the votes: drawn after the student's end, which every publishable
    # time below (the stages' files, the summary's) precedes.
    figures = []
    # With a research noise seed the job is private as a whole, and every line it prints
    # says so: the teachers stage's too (the report's are marked by the harness).
    with experiment.printed_private(rng.noise_record(config.noise_seed)["public"]):
      teachers = teachers_stage.run(config.teachers, str(root / "teachers"),
                                    restart_flag=f"--{prefix}teachers.restart",
                                    prefix=f"{prefix}teachers.", figures=figures)
    for name, future in ahead.items():  # done before the labels and the student need them
      concurrent_seconds[name] = future.result()
    stage_seconds["teachers"], t = time.time() - t, time.time()
    # The student stage labels its queries in aggregate/ (or reuses the labels paid for);
    # the attack, which needs those labels, may then run beside its training.
    computing, hand_over = [], []

    def labelled():
      if on_labels is not None:
        start = time.time()
        on_labels()
        hand_over.append(time.time() - start)
      if beside:
        computing.append(pool.submit(attack_computation(config, root, prefix)))

    student = student_stage.run(config.student, str(root / "student"),
                                restart_flag=f"--{prefix}student.restart",
                                on_labels=labelled if on_labels or beside else None,
                                prefix=f"{prefix}student.",
                                aggregate_prefix=f"{prefix}aggregate.", figures=figures)
    labels = experiment.read_results(root / "aggregate")
    if student.get("history"):
      reporting.plot_history(student["history"], student_plot_title(
          student, labels["noise_source"]), root / "student" / "accuracy.png")
    student_end = time.time()
    stage_seconds["labels_and_student"] = student_end - t - sum(hand_over)
    t = student_end
    # Beside the student: the wait for what is left of it (then its files).
    attack = attack_stage(config, root, computing[0] if computing else None, prefix)
  # The attack's solvers stop on convergence on the private histograms: its seconds, and
  # the wall that holds them, are private.
  attack_seconds = {"attack": time.time() - t}
  if computing:
    attack_seconds["attack_beside_student"] = computing[0].result()["seconds"]
  figure_seconds = experiment.draw_private_figures(figures)  # after the student's end
  summary = {
      "noise_source": labels["noise_source"],
      "data": {k: teachers[k] for k in ("dataset", "data_source", "fallback_data")},
      "aggregate": labels,
      "student": {k: student[k] for k in (
          "student", "eval_accuracy", "num_eval", "num_labels", "label_accuracy", "epochs",
          "labels_seconds", "train_seconds", "wall_seconds") if k in student},
      "epsilon": labels["epsilon"],
      "epsilon_tight": labels.get("epsilon_tight"),
      "epsilon_at_grid_edge": labels["epsilon_at_grid_edge"],
      "epsilon_release": labels.get("epsilon_release"),
      "ledger": labels["ledger"],
      "delta": labels["delta"],
      # To the student's end (the attack's and the private figures' are after it), the
      # hand-over's aside.
      "wall_seconds": student_end - t0 - sum(hand_over),
      "stage_seconds": stage_seconds,  # sequential: they add up to (nearly) the wall
      "concurrent_seconds": concurrent_seconds,
      # Inside the teachers' and the student's stages (None: teachers reused, not timed).
      "phase_seconds": {
          "teachers": None if teachers.get("reused_votes") else teachers.get("phase_seconds"),
          "student": student.get("phase_seconds")},
      "private": reporting.private_part(
          teachers={**{k: teachers[k] for k in (
              "dataset", "num_teachers", "examples_per_teacher", "wall_seconds")},
                    **{k: teachers["private"][k] for k in (
                        "teacher_test_accuracy", "plurality_accuracy_eval",
                        "plurality_accuracy_test", "mean_normalized_gap")}},
          epsilon=labels["private"]["epsilon"],
          epsilon_release=labels["private"].get("epsilon_release"),
          attack=attack,
          # The hand-over compresses the teachers' directory (votes.npz and the ledger):
          # its seconds follow the votes' agreement.
          seconds={"wall_end_to_end": time.time() - t0, **attack_seconds,
                   **({"hand_over": sum(hand_over)} if hand_over else {}),
                   **figure_seconds}),
  }
  record = experiment.to_jsonable(config)  # without the other mechanisms' noise fields
  mechanism = mechanisms.get(config.aggregate.mechanism, f"{prefix}aggregate.mechanism")
  record["aggregate"] = record["student"]["aggregate"] = reporting.config_record(
      config.aggregate, mechanism)
  experiment.write_results(root, summary, config=record, seed=config.seed,
                           disclosure=experiment.noise_disclosure(summary["noise_source"]),
                           written_at=student_end)
  report = write_report(summary, root)
  # The files' and the directory's times are the student's end too, not the attack's (a
  # directory of another user's keeps its own: io.set_times); so are the attack's
  # directory's, owner-only (its files, private, keep the attack's own).
  for path in (report, root, root / "attack"):
    if path.exists():
      io.set_times(path, student_end)
  summary["report"] = str(report.resolve())
  return summary


def plan(config, prefix: str = "config.") -> dict:
  """``--dry_run``: the teachers' and the student's plans (data sizes, state bytes, the memory
  planner's chunks; the student sized from the teachers' dataset's student split, since
  the votes do not exist yet), the attack's size, and which host work runs beside the
  accelerator. ``prefix`` as :func:`run`'s."""
  a = config.attack
  wire(config, None, prefix)
  return {"host_work_beside_the_accelerator": {
              "compile_accounting_ahead": accounting_ahead(config, prefix),
              "compile_student_ahead": student_ahead(config, prefix),
              "attack_beside_student": attack_beside_student(config, prefix)},
          "teachers": teachers_stage.plan(config.teachers, f"{prefix}teachers."),
          "aggregate": {"mechanism": config.aggregate.mechanism,
                        "num_queries": config.aggregate.num_queries},
          "student": student_stage.plan(config.student, votes_from=_query_set(config)[0],
                                        prefix=f"{prefix}student."),
          "attack": ({"histograms": a.num_histograms, "repeats_each": a.num_queries,
                      "seeds": a.num_seeds, "variants": list(a.variants.keys())}
                     if a.enabled and mechanisms.get(
                         config.aggregate.mechanism,
                         f"{prefix}aggregate.mechanism") is mechanisms.GNMAX
                     else "skipped (needs gnmax labels and attack.enabled)")}


def report(s: dict) -> None:
  """The headline: labels, their ε, the student (publishable); then the teachers, the
  data-dependent ε and the attack, on lines that say they are private."""
  if s["data"]["fallback_data"]:
    print("\n!!! FALLBACK DATA (sklearn 8x8 digits): NOT an MNIST result !!!")
  st, p = s["student"], s["private"]
  mark = experiment.PRIVATE_MARK
  print("\n" + "\n".join([
      *reporting.aggregate_headline(s["aggregate"]),
      f"{st['student']} student: held-out accuracy {st['eval_accuracy']:.2%} on "
      f"{st['num_eval']} images from {st['num_labels']} noisy labels "
      f"({st['epochs']:.0f} epochs, {st['train_seconds']:.0f} s training)",
      mark + reporting.teachers_headline(p["teachers"]),
      *[mark + line for line in reporting.attack_headline(p["attack"])],
      f"main job wall to the student's end {s['wall_seconds']:.0f} s"
      + ("" if not s.get("stage_seconds") else
         " (" + ", ".join(f"{k.replace('_', ' ')} {v:.0f} s"
                          for k, v in s["stage_seconds"].items()) + ")")
      + "".join(f"; {k.replace('_', ' ')} {v:.0f} s"
                for k, v in (s.get("concurrent_seconds") or {}).items()),
      *([mark + "; ".join(f"{k.replace('_', ' ')} {v:.0f} s"
                          for k, v in p["seconds"].items())] if p.get("seconds") else []),
      f"report: {s['report']}"]))
