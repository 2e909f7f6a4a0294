"""The GPU acceptance command (``experiments/gpu_acceptance.py``): the default paper config,
the benchmarks, the paper's students, the KD-GAN and the test suite, in stages that each fit
one 10-minute call and resume from the files of the earlier calls.

Stages and their runs (``config.stages`` picks some: numbers or run names):

  1  ``pate_mnist``        the main job (:mod:`main_job`) on ``config.pate_mnist``
  2  ``bench_teachers_nondeterministic``  :mod:`bench_teachers` in a subprocess whose
                           ``XLA_FLAGS`` lack ``--xla_gpu_deterministic_ops`` (run first, while
                           this process may not hold the device yet)
     ``bench_teachers``    :mod:`bench_teachers` in this process, with deterministic kernels
                           where any nested config asks for them (the paper config does)
     ``bench_accounting``  :mod:`bench_accounting`
     ``bench_student``     :mod:`bench_student` (the main job's student: ms per step, device
                           events per step)
  3  ``pate_g_<n>``        :mod:`student` on stage 1's teachers' votes, ``n`` noisy labels
     ``pate_g_shift_<n>``  the same with the real images shifted (the main job's student)
     ``pate_g_cgn``        :mod:`student` on those votes with ``config.pate_g_cgn`` (2018's row)
     ``mnist_baseline``    :mod:`teachers` with one teacher on all the training data
  4  ``kd_gan``            :mod:`kd_gan`
  5  ``tests_<group>``     :mod:`suite`: pytest on the group's tests, in a subprocess

Each run writes into ``<workdir>/<run>/`` and is skipped when its ``results.json`` is there
(a test run interrupted at ``tests.timeout_s`` does not count): a call resumes from what the
earlier calls left, and each stage resumes from its own checkpoints where it has them. A
run that raises is recorded (``<run>/error.txt``) and the next one goes on. After the runs,
``<workdir>/results.json`` holds every run's status and the ``targets`` (the acceptance
thresholds beside the measured values, met or not, computed from the runs' results) and
``deterministic_slowdown`` (the teachers benchmark's examples/s without deterministic GPU
kernels over those with them, per strategy: a measurement, not a target), and
optionally ``config.publish_dir/<run>_gpu/`` receives each run's ``results.json`` (the
reproduction report's GPU rows) and ``config.archive`` a ``.tar.gz`` of the workdir without
checkpoints, for the next call on a fresh machine (written after every run, and in the main
job as soon as its labels have spent the teachers' budget).

``plan(config)`` is ``--dry_run``: every run's own plan, its expected wall against the
call's limit (and all of them against one GPU period, ``period_limit_s``) and, for the
planned chunks, the memory planner's numbers on a device of ``plan_device_gib``
(:func:`at_budget`). ``report(results)`` prints the statuses and targets.
"""

from __future__ import annotations

import copy
import os
import pathlib
import pickle
import subprocess
import sys
import tarfile
import tempfile
import time
import traceback
from typing import Any, Callable, Mapping

import ml_collections

from pate_jax import _checks, budget, checkpoint, experiment, io, memory
from pate_jax.reproduction import resolve
from pate_jax.stages import kd_gan, main_job, student, suite
from pate_jax.stages import teachers as teachers_stage
from pate_jax.stages.bench import accounting as bench_accounting
from pate_jax.stages.bench import student as bench_student
from pate_jax.stages.bench import teachers as bench_teachers

__all__ = ["run", "plan", "report", "runs", "select", "check_runs", "at_budget", "targets",
           "expected_wall", "deterministic_slowdown", "NONDETERMINISTIC_BENCH"]

GIB = 2**30
# The teachers benchmark again, in a subprocess without deterministic GPU kernels.
NONDETERMINISTIC_BENCH = "bench_teachers_nondeterministic"


# ------------------------------------------------------------------------------- the runs

def runs(config) -> list[tuple[int, str]]:
  """``(stage, run name)`` in order."""
  return ([(1, "pate_mnist"), (2, NONDETERMINISTIC_BENCH), (2, "bench_teachers"),
           (2, "bench_accounting"), (2, "bench_student")]
          + [(3, f"pate_g_{int(n)}") for n in config.pate_g_queries]
          + [(3, f"pate_g_shift_{int(n)}") for n in config.get("pate_g_shift_queries", ())]
          + [(3, "pate_g_cgn"), (3, "mnist_baseline"), (4, "kd_gan")]
          + [(5, f"tests_{g}") for g in config.tests.groups.keys()])


def check_config(config, dry_run: bool = False) -> None:
  """The call's settings, refused naming the field before any run starts: ``call_limit_s``
  (finite seconds > 0: the nondeterministic bench's timeout), ``deadline_s`` (finite, >= 0;
  0: none), ``pate_g_queries`` and ``pate_g_shift_queries`` (integers >= 1: a run's name
  and its queries) and, for ``--dry_run`` (``dry_run``), ``period_limit_s`` and
  ``plan_device_gib`` (finite, > 0) and ``plan_allocator_fraction`` (in (0, 1])."""
  _checks.positive(config.call_limit_s, "config.call_limit_s")
  deadline = float(_checks.scalar(config.get("deadline_s", 0) or 0, "config.deadline_s"))
  if deadline < 0:
    raise ValueError(f"config.deadline_s must be >= 0 (0: none); got {deadline:g}")
  for name in ("pate_g_queries", "pate_g_shift_queries"):
    for i, n in enumerate(config.get(name, ())):
      _checks.positive_int(n, f"config.{name}[{i}]")
  if dry_run:
    for name in ("period_limit_s", "plan_device_gib"):
      _checks.positive(config[name], f"config.{name}")
    frac = float(_checks.positive(config.plan_allocator_fraction,
                                  "config.plan_allocator_fraction"))
    if frac > 1:
      raise ValueError(f"config.plan_allocator_fraction must lie in (0, 1]; got {frac:g}")


def _prefix(name: str) -> str:
  """How the fields of run ``name``'s nested config are named in its errors and restart
  flags (``config.pate_g.`` for every ``pate_g_<n>`` and ``pate_g_shift_<n>``)."""
  nested = {"pate_mnist": "pate_mnist", NONDETERMINISTIC_BENCH: "bench_teachers",
            "pate_g_cgn": "pate_g_cgn", "mnist_baseline": "baseline"}
  if name not in nested and name.startswith("pate_g_"):
    return "config.pate_g."
  return f"config.{nested.get(name, name)}."


def check_runs(config, chosen: list[str]) -> None:
  """The nested configs of the runs ``chosen``, refused naming the nested field
  (``config.kd_gan.<field>``, ...) before any run starts, in ``--dry_run`` too: each
  stage's own checks of what it reads before its data (``main_job``, ``bench_teachers``,
  ``bench_accounting``, ``bench_student``, ``student`` on each ``pate_g_*`` run's config,
  ``teachers`` on ``config.baseline``, ``kd_gan``). Nothing is loaded, and JAX's backend
  is not started (the nondeterministic bench's subprocess runs first)."""
  checks = {"pate_mnist": lambda c, p: main_job.check_config(c.pate_mnist, p),
            "bench_teachers": lambda c, p: bench_teachers.check_config(c.bench_teachers, p),
            "bench_accounting": lambda c, p: bench_accounting.check_config(
                c.bench_accounting, p),
            "bench_student": lambda c, p: bench_student.check_config(c.bench_student, p),
            "mnist_baseline": lambda c, p: teachers_stage.check_config(c.baseline, p),
            "kd_gan": lambda c, p: kd_gan.check_config(c.kd_gan, p)}
  checks[NONDETERMINISTIC_BENCH] = checks["bench_teachers"]
  for name in chosen:
    if name.startswith("pate_g_"):
      student.check_config(_pate_g_config(config, name, pathlib.Path("<workdir>")),
                           _prefix(name))
    elif name in checks:
      checks[name](config, _prefix(name))


def select(config) -> list[str]:
  """The run names ``config.stages`` names (``all``, or numbers and names, comma-separated)."""
  every = runs(config)
  spec = str(config.stages).strip()
  if spec in ("", "all"):
    return [n for _, n in every]
  picked = set()
  for part in (p.strip() for p in spec.split(",") if p.strip()):
    hit = [n for s, n in every if part in (str(s), n)]
    if not hit:
      raise ValueError(f"config.stages: {part!r} is neither a stage (1-5) nor a run "
                       f"({', '.join(n for _, n in every)})")
    picked.update(hit)
  if not picked:  # only commas: a typo, not a wish to run nothing
    raise ValueError(f"config.stages: {spec!r} names no stage; give numbers (1-5) or runs "
                     f"({', '.join(n for _, n in every)}), or 'all'")
  return [n for _, n in every if n in picked]


def _tests_config(config, name: str) -> ml_collections.ConfigDict:
  group = name[len("tests_"):]
  return ml_collections.ConfigDict({
      "group": group, "args": config.tests.groups[group], "timeout_s": config.tests.timeout_s,
      "require_data": config.tests.require_data, "workers": config.tests.get("workers", 0)})


def _pate_g_config(config, name: str, root: pathlib.Path):
  """A student run's config: ``pate_g_cgn`` as configured, ``pate_g_<n>`` with ``n`` queries,
  ``pate_g_shift_<n>`` the same with the real images shifted by up to
  ``config.pate_g_shift_pixels`` pixels (the main job's student; not the authors' PATE-G);
  all label from stage 1's teachers."""
  if name == "pate_g_cgn":
    c = copy.deepcopy(config.pate_g_cgn)
  else:
    c = copy.deepcopy(config.pate_g)
    c.aggregate.num_queries = int(name.rsplit("_", 1)[1])
    if name.startswith("pate_g_shift_"):
      c.student.kwargs.translate = int(config.pate_g_shift_pixels)
  c.votes_dir = str(root / "pate_mnist" / "teachers")
  return c


_CHILD = ("import importlib, pickle, sys; m = importlib.import_module(sys.argv[1]); "
          "m.run(pickle.loads(open(sys.argv[2], 'rb').read()), sys.argv[3])")


def _run_in_subprocess(module: str, config, workdir: pathlib.Path, env: dict[str, str],
                       timeout_s: float) -> dict:
  """``module.run(config, workdir)`` in a fresh Python process with environment ``env``
  (XLA reads its flags once per process); its output goes to ``workdir/subprocess.log``
  and is printed when it ends. Returns the results it wrote.

  Raises:
    RuntimeError: the process failed or ran past ``timeout_s`` (the log's tail says why).
  """
  workdir.mkdir(parents=True, exist_ok=True)
  log = workdir / "subprocess.log"
  with tempfile.TemporaryDirectory() as tmp, io.open_private(log) as f:  # its private lines
    spec = pathlib.Path(tmp) / "config.pkl"
    spec.write_bytes(pickle.dumps(config))
    try:
      code = subprocess.run([sys.executable, "-c", _CHILD, module, str(spec), str(workdir)],
                            stdout=f, stderr=subprocess.STDOUT, env=env, timeout=timeout_s,
                            check=False).returncode
    except subprocess.TimeoutExpired:
      code = f"killed after {timeout_s:g} s"
  text = log.read_text()
  print(text, end="" if text.endswith("\n") or not text else "\n", flush=True)
  if code != 0:
    raise RuntimeError(f"{module} in a subprocess: exit {code}; the log ({log}) ends: "
                       + "\n".join(text.strip().splitlines()[-5:]))
  return experiment.read_results(workdir)


def _nondeterministic_env() -> dict[str, str]:
  """This process's environment without deterministic GPU kernels. If this process has
  started its backend (an earlier run of the same call), it holds its allocator's share of
  the device (``XLA_PYTHON_CLIENT_MEM_FRACTION``, 0.75 by default): the child allocates on
  demand within what is left, and its memory planner may pick smaller chunks (both are in
  its results: ``xla_env``, ``teachers_per_chunk``). Run stage 2 in a call of its own for
  a like-for-like comparison."""
  env = dict(os.environ, PYTHONPATH=experiment.python_path(suite.REPO),
             PATE_JAX_NO_PROGRESS="1",
             XLA_FLAGS=experiment.without_deterministic_flag(os.environ.get("XLA_FLAGS", "")))
  if experiment.backend_started() is not False:  # unknown: the safe side, on demand
    held = float(os.environ.get("XLA_PYTHON_CLIENT_MEM_FRACTION", "0.75"))
    env.update(XLA_PYTHON_CLIENT_PREALLOCATE="false",
               XLA_PYTHON_CLIENT_MEM_FRACTION=f"{max(0.05, 0.95 - held):.2f}")
  return env


def _run_one(config, name: str, root: pathlib.Path) -> tuple[Any, Callable | None]:
  """Runs ``name`` into ``root/name``; returns its results and its stage's ``report``."""
  out = str(root / name)
  if name == "pate_mnist":
    # Its labels spend the teachers' secret budget, and their noise shows in all it prints
    # after: the archive takes the spent ledger at once, so a call killed before its end
    # hands it over and the next call, on a fresh machine, finds those rows answered (not
    # answered again with new noise).
    hand_over = None if not config.archive else (
        lambda: _archive(root, pathlib.Path(config.archive)))
    return (main_job.run(config.pate_mnist, out, on_labels=hand_over, prefix=_prefix(name)),
            main_job.report)
  if name == "bench_teachers":
    return bench_teachers.run(config.bench_teachers, out, prefix=_prefix(name)), None
  if name == NONDETERMINISTIC_BENCH:
    # Refused here, naming the nested field, not in the subprocess as config.<field>.
    bench_teachers.check_config(config.bench_teachers, _prefix(name))
    return _run_in_subprocess(bench_teachers.__name__, config.bench_teachers, root / name,
                              _nondeterministic_env(), float(config.call_limit_s)), None
  if name == "bench_accounting":
    return (bench_accounting.run(config.bench_accounting, out, prefix=_prefix(name)),
            bench_accounting.report)
  if name == "bench_student":
    return bench_student.run(config.bench_student, out, prefix=_prefix(name)), None
  if name.startswith("pate_g_"):
    c = _pate_g_config(config, name, root)
    if not (pathlib.Path(c.votes_dir) / "votes.npz").exists():
      raise FileNotFoundError(f"{c.votes_dir}/votes.npz: {name} labels from stage 1's "
                              "teachers; run stage 1 (pate_mnist) in this workdir first")
    return student.run(c, out, restart_flag=f"--{_prefix(name)}restart",
                       prefix=_prefix(name)), None
  if name == "mnist_baseline":
    return (teachers_stage.run(config.baseline, out, restart_flag=f"--{_prefix(name)}restart",
                               prefix=_prefix(name)), teachers_stage.report)
  if name == "kd_gan":
    return (kd_gan.run(config.kd_gan, out, restart_flag=f"--{_prefix(name)}restart",
                       prefix=_prefix(name)), kd_gan.report)
  return suite.run(_tests_config(config, name), out), None


def _read(root: pathlib.Path, name: str, interrupted: bool = False) -> dict | None:
  """The results of run ``name`` if it is done (an interrupted test run is not, unless
  ``interrupted``: its counts so far)."""
  try:
    results = experiment.read_results(root / name)
  except (OSError, ValueError, KeyError):
    return None
  if interrupted:
    return results
  return None if isinstance(results, dict) and results.get("interrupted") else results


# ------------------------------------------------------------------------------ targets

def _value(results: Mapping | None, *paths: str) -> Any:
  for path in paths:
    try:
      return resolve(results, path)
    except (KeyError, IndexError, TypeError):
      continue
  return None


def _target(what: str, run: str, value: Any, op: str, threshold: float, *,
            private: bool = False) -> dict:
  """One target; ``private``: its value is a function of the teachers' private data (and so
  is whether it was met), printed and reported as such."""
  met = None if value is None else (value <= threshold if op == "<=" else value >= threshold)
  return {"target": f"{what} {op} {threshold:g}", "run": run, "value": value,
          "threshold": threshold, "met": met, "private": private}


def targets(config, root: pathlib.Path) -> dict[str, dict]:
  """The acceptance targets, each with the measured value and whether it was met (``None``:
  its run has not finished), computed from the runs' results in ``root``. Two are always
  private (``private``: the teachers' accuracy and the data-dependent ε, and so whether they
  met their thresholds), and stage 3's student targets are where their labels came from a
  research noise seed (:func:`_research_noise`): :func:`report` prints them as such and
  ``RESULTS.md`` marks them."""
  t, r = config.targets, {n: _read(root, n) for _, n in runs(config)}
  main, pate_g = r["pate_mnist"], f"pate_g_{int(t.pate_g_queries)}"
  shift = f"pate_g_shift_{int(t.pate_g_queries)}"
  error = (root / "pate_mnist" / "error.txt")
  oom = error.is_file() and any(s in error.read_text() for s in (
      "RESOURCE_EXHAUSTED", "out of memory", "MemoryError"))
  api = [_value(r["bench_accounting"], f"public_api_over_kernel_{w}_votes")
         for w in ("device", "host")]
  tests = [r[f"tests_{g}"] for g in config.tests.groups.keys()]
  # A failure seen before an interruption is a failure: an interrupted group counts here.
  seen = [_read(root, f"tests_{g}", interrupted=True) for g in config.tests.groups.keys()]
  bad = sum(x["failures"] + x["errors"] for x in seen if x)
  # A group that ran no test (its JUnit file missing or empty) proves nothing.
  empty = [g for g, x in zip(config.tests.groups.keys(), tests) if x and x.get("tests") == 0]
  suite_value = None
  if any(seen):
    suite_value = f"{bad} failed or errored" + (
        f"; no test ran in {', '.join(empty)}" if empty else "")
  out = {
      "main_job_wall": _target("default paper config: wall seconds to its student's end",
                               "pate_mnist", _value(main, "wall_seconds"), "<=",
                               t.main_job_wall_s),
      "main_job_no_oom": {"target": "default paper config: no out-of-memory",
                          "run": "pate_mnist", "value": "out of memory" if oom else (
                              "completed" if main else None),
                          "met": False if oom else (True if main else None),
                          "private": False},
      "teacher_accuracy": _target(
          "mean teacher test accuracy", "pate_mnist",
          _value(main, "private.teachers.teacher_test_accuracy.mean"), ">=", t.teacher_accuracy,
          private=True),
      "examples_per_second": _target(
          "teachers benchmark, vmap: examples/s", "bench_teachers",
          _value(r["bench_teachers"], "strategies.vmap.examples_per_second"), ">=",
          t.examples_per_second),
      "pate_g_accuracy": _target(f"PATE-G 300 epochs, {pate_g}: held-out accuracy"
                                 f"{_mean_of(r.get(pate_g))}", pate_g,
                                 _value(r.get(pate_g), "eval_accuracy"), ">=",
                                 t.pate_g_accuracy, private=_research_noise(r.get(pate_g))),
      "pate_g_epsilon": _target(
          f"PATE-G 300 epochs, {pate_g}: data-dependent epsilon (moments to 8)", pate_g,
          _value(r.get(pate_g), "private.epsilon.moments_data_dependent.epsilon",
                 "epsilon.moments_data_dependent.epsilon"), "<=", t.pate_g_epsilon,
          private=True),
      "pate_g_shift_accuracy": _target(
          f"PATE-G 300 epochs with shifted real images (not the authors'), {shift}: held-out "
          f"accuracy{_mean_of(r.get(shift))}", shift, _value(r.get(shift), "eval_accuracy"),
          ">=", t.pate_g_accuracy, private=_research_noise(r.get(shift))),
      "cgn_accuracy": _target("PATE-G on Confident-GNMax labels (2018's row): held-out "
                              f"accuracy{_mean_of(r['pate_g_cgn'])}", "pate_g_cgn",
                              _value(r["pate_g_cgn"], "eval_accuracy"), ">=", t.cgn_accuracy,
                              private=_research_noise(r["pate_g_cgn"])),
      "cgn_epsilon": _target("PATE-G on Confident-GNMax labels: epsilon released with smooth "
                             "sensitivity", "pate_g_cgn", _value(
                                 r["pate_g_cgn"], "epsilon_release.epsilon_released"), "<=",
                             t.cgn_epsilon, private=_research_noise(r["pate_g_cgn"])),
      "api_over_kernel": _target("accounting API end to end / kernel", "bench_accounting",
                                 None if None in api else max(api), "<=", t.api_over_kernel),
      "suite_passes": {"target": "test suite passes (no failure, no error)",
                       "run": ",".join(f"tests_{g}" for g in config.tests.groups.keys()),
                       "value": suite_value,
                       "met": False if bad or empty else (True if all(tests) else None),
                       "private": False},
  }
  return out


def _research_noise(results: dict | None) -> bool:
  """Whether a student run's labels came from a research noise seed: then its labels, its
  student and its release are functions of the votes and a public seed, private as a whole
  (README, *What you may publish*), and so is whether they met a target."""
  return bool(_value(results, "noise_source.public"))


def _mean_of(results: dict | None) -> str:
  """", the mean of N students" for a student run that trained N > 1 side by side."""
  n = (results or {}).get("num_seeds", 1)
  return f", the mean of {n} students" if n > 1 else ""


def deterministic_slowdown(root: pathlib.Path) -> dict:
  """The teachers benchmark's examples/s without deterministic GPU kernels over those with
  them, per strategy (``value``: ``vmap``'s), from the two runs' results in ``root``: what
  ``--xla_gpu_deterministic_ops`` costs. A measurement, not a target; ``None`` until both
  ran. ``deterministic_ops`` is each run's flag as recorded; ``note`` says when they are
  not (without, with) = (False, True) or the two runs' memory planners chunked the teachers
  differently. XLA:CPU ignores the flag: on a CPU the ratio is run-to-run noise."""
  fast, det = _read(root, NONDETERMINISTIC_BENCH), _read(root, "bench_teachers")
  out: dict[str, Any] = {
      "what": "teachers benchmark: examples/s without deterministic GPU kernels / with them",
      "runs": [NONDETERMINISTIC_BENCH, "bench_teachers"], "value": None, "by_strategy": {}}
  if not fast or not det:
    return out
  flags = [r.get("deterministic_ops") for r in (fast, det)]
  out["deterministic_ops"] = dict(zip(out["runs"], flags))
  for s, r in det.get("strategies", {}).items():
    f = fast.get("strategies", {}).get(s)
    if f and r.get("examples_per_second"):
      out["by_strategy"][s] = f["examples_per_second"] / r["examples_per_second"]
  out["value"] = out["by_strategy"].get("vmap")
  notes = [] if flags == [False, True] else [
      f"deterministic_ops was {flags[0]} without and {flags[1]} with: the ratio does not "
      "measure the deterministic kernels"]
  chunks = {s: (f.get("teachers_per_chunk"), det["strategies"][s].get("teachers_per_chunk"))
            for s, f in fast.get("strategies", {}).items() if s in out["by_strategy"]}
  notes += [f"{s}: {a} teachers per chunk without, {b} with" for s, (a, b) in chunks.items()
            if a != b]
  if notes:
    out["note"] = "; ".join(notes)
  return out


# -------------------------------------------------------------------------- run / plan

_KEPT_WHATEVER_THEIR_SIZE = (teachers_stage.VOTES_FILE, *(
    name + suffix for name in (budget.LEDGER_FILE, budget.RESEARCH_LEDGER_FILE)
    for suffix in ("", budget.JOURNAL_SUFFIX)))


def _archive(root: pathlib.Path, path: pathlib.Path, max_bytes: int = 8 * 2**20) -> dict:
  """``path``: a .tar.gz of ``root``'s files but checkpoint directories (those holding a
  :class:`pate_jax.checkpoint.Checkpointer`'s fingerprint), locks and files over
  ``max_bytes`` (but the teachers' votes, ledgers and journals, whatever their size: a
  ledger left behind would lose what was spent, and teachers are refused beside a ledger
  whose votes are gone): the hand-over to the next call, unpacked into its workdir."""
  skipped = []

  def keep(info: tarfile.TarInfo):
    if info.isdir() and (pathlib.PurePath(info.name).name == "checkpoints" or (
        root / info.name / checkpoint.FINGERPRINT_FILE).is_file()):
      return None
    if info.name.endswith(".lock"):
      return None
    if info.isfile() and info.size > max_bytes and pathlib.PurePath(
        info.name).name not in _KEPT_WHATEVER_THEIR_SIZE:
      skipped.append(info.name)
      return None
    return info
  path.parent.mkdir(parents=True, exist_ok=True)
  tmp = path.with_name(path.name + ".tmp")
  # It holds the teachers' votes and ledger: readable by its owner only, as they are.
  with (io.open_private(tmp, narrow_directory=False) as f,  # the user's folder: left alone
        tarfile.open(fileobj=f, mode="w:gz") as tar):
    for child in sorted(root.iterdir()):
      if child.resolve() not in (path.resolve(), tmp.resolve()):
        tar.add(child, arcname=child.name, filter=keep)
  tmp.replace(path)
  return {"path": str(path), "bytes": path.stat().st_size, "skipped_over_limit": skipped}


# A main job's stages whose own results.json (the training's and the votes' seconds, the
# memory plans, ``phase_seconds``) are published beside its summary, as ``<run>_<stage>_gpu``.
_PUBLISHED_STAGES = ("teachers", "student")


def _publish(root: pathlib.Path, names: list[str], out: pathlib.Path) -> list[str]:
  """Copies each finished run's results.json and top-level PNGs to ``out/<run>_gpu/``, and
  the results.json of its teachers' and student's stages, where it has them, to
  ``out/<run>_<stage>_gpu/``; an owner-only file (private values) stays owner-only, in an
  owner-only folder: the owner decides what of it to publish (the RESULTS.md rows mark
  its private values)."""
  done = []
  for name in names:
    src = root / name
    if _read(root, name) is None and name != "acceptance":
      continue
    copies = {f"{name}_gpu": [src / "results.json", *sorted(src.glob("*.png"))]}
    copies.update({f"{name}_{stage}_gpu": [src / stage / "results.json"]
                   for stage in _PUBLISHED_STAGES if (src / stage / "results.json").is_file()})
    for run, files in copies.items():
      dst = out / run
      dst.mkdir(parents=True, exist_ok=True)
      for f in files:  # a file holding private values stays owner-only
        io.copy_file(f, dst / f.name)
      done.append(str(dst))
  return done


def expected_wall(config, name: str) -> float:
  """Run ``name``'s expected wall in seconds (``config.expected_wall_s``; 0 if unknown)."""
  return float(config.expected_wall_s.get("pate_g" if name.startswith("pate_g_") else name, 0))


# A test group starts while at least this much of the deadline is left, its pytest
# interrupted (its partial counts kept) this long before the deadline.
_TESTS_MIN_LEFT_S, _TESTS_MARGIN_S = 60.0, 10.0


def _deadline_check(config, name: str, left: float | None):
  """``(skip reason or None, config to run with)`` under ``config.deadline_s``: a run starts
  only if its expected wall fits what is left; a test group if ``_TESTS_MIN_LEFT_S`` is
  left, its timeout cut to end ``_TESTS_MARGIN_S`` before the deadline."""
  if left is None:
    return None, config
  if name.startswith("tests_"):
    if left < _TESTS_MIN_LEFT_S:
      return f"deadline: {left:.0f} s left, a test group needs {_TESTS_MIN_LEFT_S:.0f} s", config
    cut = left - _TESTS_MARGIN_S
    if cut < float(config.tests.timeout_s):
      config = copy.deepcopy(config)
      config.tests.timeout_s = int(cut)
    return None, config
  expected = expected_wall(config, name)
  if expected > left:
    return f"deadline: {left:.0f} s left, {expected:.0f} s expected", config
  return None, config


def _hand_over(config, root: pathlib.Path, chosen: list[str], status: dict) -> dict:
  """``results.json`` (statuses, targets), the published copies and the archive, as they
  stand: written after every run, so a call cut short keeps what it finished."""
  summary = {"selected": chosen, "status": status, "targets": targets(config, root),
             "deterministic_slowdown": deterministic_slowdown(root),
             "runs_done": [n for _, n in runs(config) if _read(root, n) is not None]}
  experiment.write_results(root, summary, config=config, seed=None,
                           disclosure=experiment.MEASUREMENT)
  if config.publish_dir:
    (root / "acceptance").mkdir(exist_ok=True)
    io.copy_file(root / "results.json", root / "acceptance" / "results.json")
    summary["published"] = _publish(root, summary["runs_done"] + ["acceptance"],
                                    pathlib.Path(config.publish_dir))
  if config.archive:
    summary["archive"] = _archive(root, pathlib.Path(config.archive))
  return summary


def run(config, workdir: str) -> dict:
  """Runs the selected runs not done yet (module docstring); writes ``results.json``, the
  published copies and the archive after each run. With ``config.deadline_s`` > 0 (seconds
  from the start of this call), a run starts only if its expected wall fits the time left
  (:func:`_deadline_check`), and the rest are recorded as skipped."""
  check_config(config)
  chosen = select(config)
  check_runs(config, chosen)
  root = pathlib.Path(workdir)
  root.mkdir(parents=True, exist_ok=True)
  status: dict[str, dict] = {}
  deadline = float(config.get("deadline_s", 0) or 0)
  start = time.time()
  summary, handed = None, 0
  with experiment.locked_workdir(root):
    for stage, name in runs(config):
      if name not in chosen:
        continue
      if _read(root, name) is not None:
        status[name] = {"stage": stage, "status": "done earlier (results.json found)"}
        print(f"[stage {stage}] {name}: done earlier, skipped", flush=True)
        continue
      left = deadline - (time.time() - start) if deadline else None
      skip, run_config = _deadline_check(config, name, left)
      if skip is not None:
        status[name] = {"stage": stage, "status": f"not started ({skip})"}
        print(f"[stage {stage}] {name}: not started ({skip})", flush=True)
        continue
      print(f"\n[stage {stage}] {name}: running into {root / name}", flush=True)
      t0 = time.time()
      # An earlier call's error goes first: removed after the run, it would set the run
      # directory's time to the run's end (the main job's: its private attack's end).
      (root / name / "error.txt").unlink(missing_ok=True)
      try:
        results, show = _run_one(run_config, name, root)
        status[name] = {"stage": stage, "status": "ran", "wall_seconds": time.time() - t0}
        if isinstance(results, dict) and (results.get("private") or {}).get("seconds"):
          # The main job: its call ends with the attack, whose seconds are private.
          status[name].update(wall_seconds=results["wall_seconds"],
                              wall="to the student's end (the attack's seconds are private)")
        if show is not None:  # marked private where the run's results.json is private
          experiment.report_marked(show, results, root / name)
      except Exception as e:  # pylint: disable=broad-except  # record it, go on to the next
        (root / name).mkdir(parents=True, exist_ok=True)
        experiment.write_text(root / name / "error.txt", traceback.format_exc(), private=True)
        status[name] = {"stage": stage, "status": "failed", "wall_seconds": time.time() - t0,
                        "error": f"{type(e).__name__}: {str(e)[:500]}".replace(
                            str(root.resolve()), str(root))}
        # Marked as the harness marks error lines: every line of a message of several (one
        # may quote what the run computed from the private data).
        print(f"[stage {stage}] {name}: FAILED: "
              + experiment.mark_private(f"{type(e).__name__}: {e}"), flush=True)
      summary, handed = _hand_over(config, root, chosen, status), len(status)
    if summary is None or handed != len(status):  # runs skipped since the last hand-over
      summary = _hand_over(config, root, chosen, status)
  summary["results_json"] = str((root / "results.json").resolve())
  return summary


def at_budget(p: Any, *, host_budget: int, budget: int, local: int,
              num_queries: int | None = None) -> dict | str:
  """The memory planner's chunk for ``budget`` bytes per device, from a plan entry made with
  ``host_budget`` (its probe's bytes per teacher / per teacher-query pair, scaled as
  :func:`pate_jax.memory.plan_teacher_chunk` and :func:`~pate_jax.memory.plan_predict_chunks`
  do; the resident bytes are what the host plan kept aside). The entry's estimate is XLA's
  analysis times the host's ``analysis_factor`` (8 on a CPU); on the planned device, a GPU,
  the analysis is taken as it is."""
  if not isinstance(p, Mapping) or p.get("estimate_bytes_per_chunk") is None:
    return f"not measured ({p})" if isinstance(p, str) else "not measured"
  resident = host_budget - int(p["budget_bytes_left_for_chunks"])
  available = budget - resident
  t, q = int(p["teachers_per_chunk"]), p.get("queries_per_chunk")
  analysis = p["estimate_bytes_per_chunk"] / float(p.get("analysis_factor", 1.0))
  try:
    if q is None:
      per = analysis / t
      tk, qk = memory.plan_teacher_chunk(local, per, available), None
      estimate = per * tk
    else:
      per = analysis / (t * int(q))
      tk, qk = memory.plan_predict_chunks(local, int(num_queries), per, available)
      estimate = per * tk * qk
  except MemoryError as e:
    return f"DOES NOT FIT: {e}"
  out = {"teachers_per_chunk": tk, "estimate_bytes_per_chunk": int(estimate),
         "resident_bytes": resident, "budget_bytes": budget,
         "fits": bool(resident + estimate <= budget),
         "description": (f"{tk} teachers{'' if qk is None else f' × {qk} queries'} per chunk, "
                         f"~{estimate / GIB:.2f} GiB + {resident / GIB:.2f} GiB resident of "
                         f"{budget / GIB:.2f} GiB")}
  if qk is not None:
    out["queries_per_chunk"] = qk
  return out


def _teachers_at(p: Mapping, fraction: float, device: int) -> dict:
  """A teachers plan's training and prediction chunks at ``fraction`` of ``device`` bytes."""
  budget, host = int(fraction * device), int(p["budget_bytes_per_device"])
  kw = {"host_budget": host, "budget": budget, "local": int(p["teachers_per_device"])}
  return {"train_plan": at_budget(p["train_plan"], **kw),
          "predict_plan": at_budget(p["predict_plan"], num_queries=int(p["queries"]), **kw)}


def _plan_one(config, name: str, device: int) -> tuple[dict, Any]:
  """Run ``name``'s own plan and its memory at ``device`` bytes per device."""
  frac = float(config.plan_allocator_fraction)
  if name == "pate_mnist":
    p = main_job.plan(copy.deepcopy(config.pate_mnist), _prefix(name))
    t = config.pate_mnist.teachers
    return p, {"teachers": _teachers_at(p["teachers"], t.memory_fraction * frac, device)}
  if name == "mnist_baseline":
    p = teachers_stage.plan(copy.deepcopy(config.baseline), _prefix(name))
    return p, _teachers_at(p, config.baseline.memory_fraction * frac, device)
  if name in ("bench_teachers", NONDETERMINISTIC_BENCH):
    # Its Ensemble plans at 0.6 of a device.
    p = bench_teachers.plan(config.bench_teachers, _prefix(name))
    if name == NONDETERMINISTIC_BENCH:
      p["process"] = "a subprocess whose XLA_FLAGS lack --xla_gpu_deterministic_ops"
    return p, {"vmap_train_plan": at_budget(
        p["vmap_train_plan"], host_budget=memory.memory_budget(0.6),
        budget=int(0.6 * frac * device), local=p["padded_teachers"] // p["devices"])}
  if name == "bench_accounting":
    p = bench_accounting.plan(config.bench_accounting, _prefix(name))
    need = sum(v for k, v in p.items() if k.endswith("bytes") and isinstance(v, int))
    return p, {"bytes": need, "fits": need <= frac * device}
  if name == "bench_student":
    p = bench_student.plan(config.bench_student, _prefix(name))
    need = p["pool_bytes"] + p["state_bytes"]
    return p, {"bytes": need, "fits": need <= frac * device}
  if name.startswith("pate_g_"):
    p = student.plan(_pate_g_config(config, name, pathlib.Path("<workdir>")),
                     prefix=_prefix(name))
    need = sum(v for k, v in p.items() if k in ("pool_bytes", "state_bytes",
                                                "train_step_temp_bytes_per_batch")
               and isinstance(v, int))
    return p, {"bytes": need, "fits": need <= frac * device}
  if name == "kd_gan":
    return kd_gan.plan(config.kd_gan, _prefix(name)), "small MLPs (no memory plan)"
  return suite.plan(_tests_config(config, name)), "the suite's own processes"


def _misfits(name: str, at: Any) -> list[str]:
  """The entries of a run's memory at the planned device that do not fit."""
  if isinstance(at, str):
    return [f"{name}: {at}"] if "DOES NOT FIT" in at else []
  if isinstance(at, Mapping):
    return [name] if at.get("fits") is False else [
        m for k, v in at.items() for m in _misfits(f"{name}.{k}", v)]
  return []


def plan(config) -> dict:
  """``--dry_run``: each selected run's plan, its memory on a ``plan_device_gib`` device and
  its expected wall against the call's limit (per stage too)."""
  check_config(config, dry_run=True)
  device = int(float(config.plan_device_gib) * GIB)
  chosen, limit = select(config), float(config.call_limit_s)
  check_runs(config, chosen)
  out: dict[str, Any] = {
      "selected": ", ".join(chosen), "call_limit_s": limit,
      "device_for_memory_plan": f"{config.plan_device_gib:g} GiB, of which JAX may use "
                                f"{config.plan_allocator_fraction:g} (planner numbers from "
                                "this host's XLA account of the probes)"}
  per_stage: dict[int, float] = {}
  misfits, key = [], f"at_{config.plan_device_gib:g}gib"
  for stage, name in runs(config):
    if name not in chosen:
      continue
    expected = expected_wall(config, name)
    per_stage[stage] = per_stage.get(stage, 0.0) + expected
    p, at = _plan_one(config, name, device)
    out[name] = {"stage": stage, "expected_wall_s": expected, key: at, "plan": p}
    misfits += _misfits(name, at)
  out[f"fits_{key[3:]}"] = ("every planned chunk fits" if not misfits else
                            "DOES NOT FIT: " + "; ".join(misfits))
  out["expected_wall_s_per_stage"] = {
      str(s): f"{w:.0f} s" + ("" if w <= limit else f" > {limit:.0f} s: run its runs in "
                              "separate calls (--config.stages=<run>)")
      for s, w in per_stage.items()}
  out["expected_wall_s_total"] = _period_fit(per_stage, float(config.period_limit_s))
  return out


def _period_fit(per_stage: Mapping[int, float], period: float) -> str:
  """Whether the stages' expected walls together fit one GPU period of ``period`` seconds,
  and if not, which first stages do."""
  total = sum(per_stage.values())
  if total <= period:
    return f"{total:.0f} s: all stages fit one {period / 60:g}-minute period"
  done, first = 0.0, []
  for s in sorted(per_stage):
    if done + per_stage[s] > period:
      break
    done += per_stage[s]
    first.append(str(s))
  head = (f"stages {', '.join(first)} ({done:.0f} s) fit it; the rest needs another period"
          if first else "no stage fits it")
  return f"{total:.0f} s > one {period / 60:g}-minute period: {head}"


def report(s: dict) -> None:
  """Prints each run's status and each target; exits 1 if a run failed this call."""
  print("\nGPU acceptance:")
  for name, st in s["status"].items():
    wall = f" ({st['wall_seconds']:.0f} s)" if "wall_seconds" in st else ""
    print(f"  stage {st['stage']} {name}: {st['status']}{wall}"
          + (f": {st['error']}" if "error" in st else ""))
  for key, t in s["targets"].items():
    met = {True: "met", False: "NOT MET", None: "not measured yet"}[t["met"]]
    value = t["value"]
    value = f"{value:.4g}" if isinstance(value, float) else value
    mark = experiment.PRIVATE_MARK if t.get("private") else ""
    print(f"  {mark}target {t['target']}: {met} (value: {value})")
  slow = s.get("deterministic_slowdown") or {}
  if slow.get("by_strategy"):
    ratios = ", ".join(f"{k} {v:.2f}x" for k, v in slow["by_strategy"].items())
    print(f"  {slow['what']} (not a target): {ratios}" + (
        f" ({slow['note']})" if "note" in slow else ""))
  for path in s.get("published", []):
    print(f"  published: {path}")
  if "archive" in s:
    print(f"  archive: {s['archive']['path']} ({s['archive']['bytes']:,} bytes)")
  print(f"  results: {s['results_json']}")
  failed = [n for n, st in s["status"].items() if st["status"] == "failed"]
  if failed:
    raise SystemExit(f"gpu_acceptance: {', '.join(failed)} failed (see <run>/error.txt)")
