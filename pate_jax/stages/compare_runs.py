"""The comparison stage: every script's ``results.json`` before and after a refactor.

``run(config, workdir)`` checks out commit ``config.before`` with ``git worktree add
--detach <workdir>/before_src`` (removed again afterwards), runs :data:`CATALOGUE` on that
checkout and on the working tree (the repository root, uncommitted changes included),
and compares every JSON file the runs wrote (:func:`compare`: ``results.json``, the
figure2.json and students.json of the two plots that write no ``results.json``, the votes'
fingerprints; checkpoints left out). It writes ``results.json`` (per catalogue run: both
exit codes and walls, equal or not, the differing keys and their values) and prints one
line per run.

The catalogue: tiny runs, the settings the test suite uses, each well under a minute on
two CPU cores. Every noise draw is seeded (``noise_seed=0`` wherever a config has one;
otherwise the noise is secret and differs from run to run by design). Later runs read
earlier runs' workdirs (``{runs}`` is the catalogue's work directory): the teachers'
votes feed aggregate, release_epsilon, ablate, plot_gap, plot_aggregation and the
student, whose workdir feeds plot_students. Every script that writes results is covered,
on one config each (the histogram attack on its ``fixed`` setting), except:

  report.py        writes RESULTS.md, no results.json (tests/test_report.py regenerates
                   the committed report exactly).
  compare_runs.py  this comparison itself (it would run the catalogue inside the catalogue).
  gpu_acceptance.py  runs other scripts (each covered here) and the test suite on an
                   accelerator; even its CPU rehearsal takes many minutes.

The teachers (and the main job's) train on the 8x8 digits (scikit-learn, offline);
train_kd_gan reads MNIST and tabular the UCI Adult split from ``$PATE_JAX_DATA_DIR``.
Shrunk to fit: train_student runs the supervised student only (PATE-G runs inside the main
job), release_epsilon without its joint (λ, β) release (10 s more of compilation),
bench_attack one reconstruction method, the attack its ``fixed`` setting.

What legitimately differs between two runs of the same code is dropped before comparing
(:func:`comparable`): timings and throughputs, load averages, dates, the git hash, library
versions, the host, and the directories of paths (the two sides' work directories).
The list was found by running the catalogue twice on one checkout and diffing; a
checkout compared with itself comes out equal (tests/test_compare_runs.py).
"""

from __future__ import annotations

import json
import math
import os
import pathlib
import re
import shutil
import subprocess
import sys
import time
from typing import Any, Iterable, Mapping, NamedTuple

from pate_jax import _checks, experiment, io

__all__ = ["Run", "CATALOGUE", "NOT_COVERED", "VOLATILE_KEYS", "command", "with_prerequisites",
           "run_catalogue", "comparable", "compare_files", "compare", "commits", "run", "plan",
           "report"]


class Run(NamedTuple):
  """One catalogue entry: ``python experiments/<script>.py --config <config>
  --config.<override> ... --workdir <runs>/<name>``."""
  name: str
  script: str
  config: str                      # configs/x.py[:variant]
  overrides: tuple[str, ...] = ()  # "field=value"; "{runs}" is the catalogue's work directory


_TEACHERS = "votes_dir={runs}/teachers"
_TINY_STUDENT = ("num_steps=6", "segment_steps=3", "batch_size=8", "aggregate.num_queries=30",
                 "aggregate.chunk_size=32", "aggregate.noise_seed=0")

CATALOGUE: tuple[Run, ...] = (
    Run("teachers", "train_teachers", "configs/mnist_250.py:cpu",
        ("dataset=digits", "num_teachers=5", "num_steps=40", "checkpoint_every=20",
         "model.kwargs.hidden=(16,)")),
    Run("aggregate", "aggregate", "configs/aggregate_mnist.py:cpu",
        (_TEACHERS, "num_queries=40", "chunk_size=32", "noise_seed=0", "epsilon_max=20.0")),
    Run("release_epsilon", "release_epsilon", "configs/release_epsilon.py",
        (_TEACHERS, "num_queries=40", "noise_seed=0", "threshold=3.0", "sigma_threshold=2.0",
         "orders=default", "joint_orders=False", "draws=8")),
    Run("ablate", "ablate", "configs/ablation_mnist.py:smoke",
        (_TEACHERS, "num_queries=40", "teacher_counts=(2,5)", "loop_max_cells=4")),
    Run("plot_gap", "plot_gap", "configs/plot_gap.py", ("runs={runs}/teachers",)),
    Run("plot_aggregation", "plot_aggregation", "configs/plot_aggregation.py",
        ("runs={runs}/teachers", "num_points=3", "num_seeds=1")),
    Run("student", "train_student", "configs/student_supervised.py:cpu",
        (_TEACHERS, *_TINY_STUDENT)),
    Run("plot_students", "plot_students", "configs/plot_students.py", ("runs={runs}/student",)),
    Run("run_pate", "run_pate", "configs/pate_mnist.py:cpu",
        ("noise_seed=0", "teachers.dataset=digits", "teachers.num_teachers=5",
         "teachers.num_steps=10", "teachers.checkpoint_every=10", "teachers.gap_plot=False",
         "teachers.model.kwargs.hidden=(16,)", "aggregate.num_queries=20",
         "aggregate.chunk_size=32", "aggregate.sigma=2.0", "aggregate.epsilon_max=1000.0",
         "student.num_steps=4", "student.segment_steps=2", "student.batch_size=8",
         "attack.num_histograms=3", "attack.num_queries=300")),
    Run("attack", "attack", "configs/attack_fixed.py:cpu",
        ("num_queries=200", "sigmas=(40.0,80.0)", "query_counts=(100,400)")),
    Run("bench_attack", "bench_attack", "configs/attack_bench.py:cpu",
        ("num_queries=500", "repeats=1", "sigmas=(40.0,80.0)", 'methods=("paper",)',
         'single_methods=("paper",)', "fresh_alphas=(0.3,)", "gradient_sigmas=(40.0,)",
         "quadrature_points=(17,33)", "quadrature_points_laplace=(201,401)",
         "quadrature_sigmas=(1.0,40.0)")),
    Run("bench_accounting", "bench_accounting", "configs/bench_accounting.py:small",
        ("num_queries=2000", "loop_queries=50", "repeats=1")),
    Run("bench_smooth_sensitivity", "bench_smooth_sensitivity",
        "configs/bench_smooth_sensitivity.py:small",
        ("num_queries=100", "loop_queries=5", "repeats=1")),
    Run("bench_teachers", "bench_teachers", "configs/bench_teachers.py",
        ("num_teachers=6", "examples_per_teacher=16", "model.kwargs.hidden=(16,)",
         "steps_per_call=2", "repeats=1", "chunk_size=3")),
    Run("bench_student", "bench_student", "configs/bench_student.py:cpu",
        ("pool_size=200", "num_labelled=20", "num_eval=10", "steps_per_call=2", "repeats=1")),
    Run("teacher_steps", "teacher_steps", "configs/teacher_steps.py:cpu",
        ("teachers.dataset=digits", "teachers.num_teachers=5", "eval_steps=(2,4)",
         "num_checked=2", "num_test=200")),
    Run("tabular", "tabular", "configs/adult_rf.py:cpu",
        ("num_teachers=4", "n_estimators=3", "n_jobs=1", "student_n_estimators=3",
         "baseline_n_estimators=3", "num_seeds=2")),
    Run("kd_gan", "train_kd_gan", "configs/kd_gan.py:smoke",
        ("noise_seed=0", "num_seeds=1", "teacher.num_steps=20", "table1.public_sizes=(100,)",
         "curve.num_public=200", "audit_rounds=0")),
    Run("ablate_kd_gan", "ablate_kd_gan", "configs/kd_gan_ablation.py:smoke",
        ("num_seeds=1", "teacher.num_steps=20", "num_public=100")),
    Run("published_accounting", "published_accounting", "configs/published_accounting.py"),
)

NOT_COVERED = {
    "report": "writes RESULTS.md, no results.json (tests/test_report.py regenerates the "
              "committed report exactly)",
    "compare_runs": "this comparison itself",
    "gpu_acceptance": "runs other scripts (each covered here) and the test suite on an "
                      "accelerator; its CPU rehearsal takes many minutes",
}


def command(entry: Run, runs_dir: str | os.PathLike) -> list[str]:
  """The command line of ``entry`` (run from the checkout's root)."""
  runs = str(pathlib.Path(runs_dir).resolve())
  return [sys.executable, f"experiments/{entry.script}.py", "--config", entry.config,
          *(f"--config.{o.format(runs=runs)}" for o in entry.overrides),
          "--workdir", str(pathlib.Path(runs, entry.name))]


def with_prerequisites(names: Iterable[str], runs: Iterable[Run] = CATALOGUE) -> list[Run]:
  """The entries named (all when none is), with the earlier entries whose workdirs they
  read (``{runs}/<name>`` in an override), in catalogue order."""
  runs = list(runs)
  by_name = {r.name: r for r in runs}
  wanted = [n for n in names if n]
  unknown = sorted(set(wanted) - set(by_name))
  if unknown:
    raise ValueError(f"config.runs: unknown run(s) {unknown}; the catalogue has "
                     f"{', '.join(by_name)}")
  todo, seen = list(wanted) or list(by_name), set()
  while todo:
    name = todo.pop()
    if name not in seen:
      seen.add(name)
      todo += re.findall(r"\{runs\}/(\w+)", " ".join(by_name[name].overrides))
  return [r for r in runs if r.name in seen]


def run_catalogue(checkout_dir: str | os.PathLike, workdir: str | os.PathLike,
                  env: Mapping[str, str] | None = None, *, runs: Iterable[Run] = CATALOGUE,
                  timeout_s: float = 300.0, log: Any = None) -> dict[str, dict[str, Any]]:
  """Runs every entry of ``runs`` in turn with the code of ``checkout_dir``.

  Each is ``python experiments/<script>.py ... --workdir <workdir>/<name>`` (that
  directory emptied first, so that nothing resumes) with ``checkout_dir`` as its working
  directory and first on ``PYTHONPATH`` (checked: a ``pate_jax`` imported from elsewhere is
  a ``RuntimeError``; the rest of ``PYTHONPATH`` stays, for dependencies installed there);
  ``env`` (default: this process's environment) supplies the rest:
  ``PATE_JAX_DATA_DIR``, ``PATE_JAX_OFFLINE``, ``JAX_PLATFORMS``. Its output goes to
  ``<workdir>/<name>.log``. Returns ``{name: {"rc", "wall_s", "command"}}`` (``<runs>``
  for ``workdir`` in the command); ``rc`` is
  124 for a run killed after ``timeout_s`` seconds and None for a script the checkout
  does not have.
  """
  checkout = pathlib.Path(checkout_dir).resolve()
  root = pathlib.Path(workdir).resolve()
  root.mkdir(parents=True, exist_ok=True)
  environ = dict(os.environ if env is None else env)
  environ.update(PYTHONPATH=experiment.python_path(checkout, environ),
                 PATE_JAX_NO_PROGRESS="1")
  probe = subprocess.run([sys.executable, "-c", "import pate_jax; print(pate_jax.__file__)"],
                         cwd=checkout, env=environ, capture_output=True, text=True, check=False)
  found = pathlib.Path(probe.stdout.strip() or ".").resolve()
  if probe.returncode or checkout not in found.parents:
    raise RuntimeError(f"import pate_jax from {checkout} found {probe.stdout.strip()!r} "
                       f"{probe.stderr.strip()[-300:]}")
  out = {}
  for entry in runs:
    cmd = command(entry, root)
    shutil.rmtree(root / entry.name, ignore_errors=True)
    rc, start = None, time.perf_counter()
    if (checkout / "experiments" / f"{entry.script}.py").is_file():
      # Owner-only: a run on the private data prints its private lines into it.
      with io.open_private(root / f"{entry.name}.log") as f:
        try:
          rc = subprocess.run(cmd, cwd=checkout, env=environ, stdout=f,
                              stderr=subprocess.STDOUT, timeout=timeout_s,
                              check=False).returncode
        except subprocess.TimeoutExpired:
          rc = 124
    out[entry.name] = {"rc": rc, "wall_s": time.perf_counter() - start,
                       "command": " ".join(cmd[1:]).replace(str(root), "<runs>")}
    if log:
      log(f"  {entry.name}: rc {rc}, {out[entry.name]['wall_s']:.1f} s")
  return out


# ------------------------------------------------------------------------ the comparison

# What differs between two runs of the same code (found by running the catalogue twice on
# one checkout and diffing every JSON it wrote), matched against keys at any depth:
# provenance (git hash, library versions, date, host), timings and what is computed from
# them (throughputs, speed-ups, the benchmarks' goals: goal_*), load averages, and the
# size of checkpoints (their metadata holds timestamps). "_s" ends a timing after a word
# (time_s, loop_s), not KD-GAN's k_s (student steps per round).
VOLATILE_KEYS = re.compile(
    r"^(git|commit|code_version|versions|written_at|host|hostname|platform|timings|bytes.*)$"
    r"|^checkpoint_bytes|seconds|([a-z]{2}_s|_per_second|all_runs)$|^wall|speedup"
    r"|over_kernel|throughput"
    r"|achieved_tflops|^ms_per_step$|share_of_training|load_?av|^goal_")
# The directories of a path: absolute, or relative with segments that name something
# (results files hold paths relative to the working directory, which differs between the
# sides); "3/40" or "1/γ" are no paths.
_SEGMENT = r"(?:\.{1,3}|[A-Za-z0-9_.+~-]*[A-Za-z_][A-Za-z0-9_.+~-]*)"  # ...: outside
_PATH_DIRS = re.compile(rf"(?<![A-Za-z0-9_.+~/-])/?(?:{_SEGMENT}/)+")


def _normalised(value: Any) -> Any:
  """``value`` without volatile keys, paths reduced to their last component."""
  if isinstance(value, Mapping):
    return {k: _normalised(v) for k, v in value.items() if not VOLATILE_KEYS.search(str(k))}
  if isinstance(value, list):
    return [_normalised(v) for v in value]
  if isinstance(value, str):
    return _PATH_DIRS.sub("", value)
  return value


def comparable(results: Any) -> Any:
  """A ``results.json`` record without what legitimately differs between two runs of the
  same code (:data:`VOLATILE_KEYS`: timings, walls, load averages, dates, git hash,
  library versions, host), paths reduced to their last component (so that two work
  directories compare equal). Takes and returns any JSON value."""
  return _normalised(results)


def _is_number(x: Any) -> bool:
  return isinstance(x, (int, float)) and not isinstance(x, bool)


def _relative(a: float, b: float) -> float:
  if a == b or (math.isnan(a) and math.isnan(b)):
    return 0.0
  return abs(a - b) / max(abs(a), abs(b))


def _short(value: Any, limit: int = 120) -> Any:
  text = json.dumps(value)
  return value if len(text) <= limit else text[:limit] + "..."


def _differences(a: Any, b: Any, path: str, out: list[dict[str, Any]]) -> None:
  """Appends ``{"key", "before", "after"[, "max_relative_difference"]}`` for each place
  where ``a`` and ``b`` differ (a list of numbers is one place)."""
  if isinstance(a, Mapping) and isinstance(b, Mapping):
    for k in list(a) + [k for k in b if k not in a]:
      sub = f"{path}.{k}" if path else str(k)
      if k not in a or k not in b:
        out.append({"key": sub, "before": _short(a.get(k, "<missing>")),
                    "after": _short(b.get(k, "<missing>"))})
      else:
        _differences(a[k], b[k], sub, out)
  elif (isinstance(a, list) and isinstance(b, list) and len(a) == len(b)
        and not (a and all(map(_is_number, a + b)))):
    for i, (x, y) in enumerate(zip(a, b)):
      _differences(x, y, f"{path}[{i}]", out)
  elif a != b:
    entry = {"key": path, "before": _short(a), "after": _short(b)}
    pairs = (list(zip(a, b)) if isinstance(a, list) and isinstance(b, list)
             and len(a) == len(b) else [(a, b)])
    if all(_is_number(x) and _is_number(y) for x, y in pairs):
      entry["max_relative_difference"] = max(_relative(x, y) for x, y in pairs)
    out.append(entry)


def compare_files(before: Any, after: Any, max_shown: int = 50) -> dict[str, Any]:
  """Two results records once :func:`comparable`: ``equal``, the number of differences and
  the first ``max_shown`` (key path, both values, for numbers their largest relative
  difference ``|a - b| / max(|a|, |b|)``), and the largest relative difference of all."""
  diffs: list[dict[str, Any]] = []
  _differences(comparable(before), comparable(after), "", diffs)
  rel = [d["max_relative_difference"] for d in diffs if "max_relative_difference" in d]
  return {"equal": not diffs, "num_differences": len(diffs), "differences": diffs[:max_shown],
          "max_relative_difference": max(rel) if rel else None}


# A run's resume state, not its results (teacher_steps' measured teachers).
_RESUME_STATE = ("progress.json",)


def _json_files(tree: pathlib.Path) -> set[str]:
  """The JSON files under ``tree`` (relative paths), checkpoints' directories and resume
  state (:data:`_RESUME_STATE`) left out."""
  if not tree.is_dir():
    return set()
  return {str(p.relative_to(tree)) for p in tree.rglob("*.json")
          if "checkpoints" not in p.relative_to(tree).parts and p.name not in _RESUME_STATE}


def compare(before_dir: str | os.PathLike, after_dir: str | os.PathLike) -> dict[str, Any]:
  """Every JSON file under either tree (``results.json``, and the two plots' figure2.json
  and students.json, the votes' fingerprints; checkpoints and resume state left out), by
  its path relative to the tree: ``{"equal": all equal, "files": {path: compare_files(...)
  or {"equal": False, "missing": "before" | "after"}}}``."""
  trees = [pathlib.Path(before_dir), pathlib.Path(after_dir)]
  found = [_json_files(t) for t in trees]
  files = {}
  for rel in sorted(found[0] | found[1]):
    missing = [side for side, f in zip(("before", "after"), found) if rel not in f]
    if missing:
      files[rel] = {"equal": False, "missing": missing[0]}
    else:
      files[rel] = compare_files(*(json.loads((t / rel).read_text()) for t in trees))
  return {"equal": all(f["equal"] for f in files.values()), "files": files}


# ----------------------------------------------------------------------------- the stage


def _repo() -> pathlib.Path:
  return pathlib.Path(__file__).resolve().parents[2]


def _git(*args: str) -> str:
  proc = subprocess.run(["git", *args], cwd=_repo(), capture_output=True, text=True,
                        check=False)
  if proc.returncode:
    raise RuntimeError(f"git {' '.join(args)}: {proc.stderr.strip()}")
  return proc.stdout.strip()


def _commit(rev: Any, field: str) -> str:
  """The commit ``rev`` names in this repository (``git rev-parse --verify``); a
  ``ValueError`` naming ``field`` if none (or ``rev`` is no string, or reads as an option)."""
  if not isinstance(rev, str) or rev.startswith("-"):
    raise ValueError(f"{field} must be a commit of this repository (a hash, branch or tag) or "
                     f"empty (the working tree); got {rev!r}")
  try:
    return _git("rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}")
  except RuntimeError:
    raise ValueError(f"{field}: {rev!r} names no commit of this repository (git rev-parse "
                     "--verify)") from None


def commits(config: Any) -> dict[str, str]:
  """The commits ``config.before`` and ``config.after`` name (a side left empty is the
  working tree, absent here), refused naming the field before anything is checked out: an
  unknown one was shown as UNKNOWN by ``--dry_run``."""
  return {side: _commit(config[side], f"config.{side}") for side in ("before", "after")
          if config[side]}


def _environment(config: Any) -> dict[str, str]:
  env = dict(os.environ)
  if config.platform.strip():
    env["JAX_PLATFORMS"] = config.platform.replace(" ", "")
  return env


def _status(name: str, before: Mapping, after: Mapping, files: Mapping) -> dict[str, Any]:
  """One run's verdict: equal / DIFFERENT / FAILED / NEW / MISSING."""
  mine = {k: v for k, v in files.items() if k.split("/")[0] == name}
  keys = sorted({d["key"] for f in mine.values() for d in f.get("differences", [])})
  rel = [f["max_relative_difference"] for f in mine.values()
         if f.get("max_relative_difference") is not None]
  out = {"rc_before": before["rc"], "rc_after": after["rc"],
         "wall_before_s": before["wall_s"], "wall_after_s": after["wall_s"],
         "json_files": len(mine), "differing_keys": keys,
         "max_relative_difference": max(rel) if rel else None,
         "missing_files": {k: v["missing"] for k, v in mine.items() if "missing" in v}}
  if before["rc"] is None or after["rc"] is None:
    out["status"] = "NEW" if before["rc"] is None else "MISSING after"
  elif before["rc"] or after["rc"]:
    out["status"] = "FAILED"
  else:
    out["status"] = "equal" if mine and all(f["equal"] for f in mine.values()) else "DIFFERENT"
  out["equal"] = out["status"] == "equal"
  return out


# The names JAX_PLATFORMS takes (``gpu`` stands for CUDA or ROCm).
PLATFORMS = ("cpu", "gpu", "cuda", "rocm", "tpu")


def check_config(config: Any) -> None:
  """``config.runs`` (a string of comma-separated names), ``config.timeout_s`` (finite
  seconds > 0) and ``config.platform`` ("" or comma-separated names of :data:`PLATFORMS`,
  an accelerator's only where one is installed), refused naming the field before anything
  is checked out: a timeout of 0 or below killed every run of both sides, and a platform
  JAX does not know or cannot start failed every run of both sides (each counted as
  failed, the reason only in each run's log)."""
  if not isinstance(config.runs, str):
    raise ValueError(f"config.runs must be a string of comma-separated catalogue names; got "
                     f"{config.runs!r}")
  _checks.positive(config.timeout_s, "config.timeout_s")
  platform = config.platform
  names = [p.strip() for p in platform.split(",")] if isinstance(platform, str) else None
  if names is None or (platform.strip() and not all(p in PLATFORMS for p in names)):
    raise ValueError(f"config.platform must be empty (JAX's default) or comma-separated names "
                     f"of {PLATFORMS}; got {platform!r}")
  if platform.strip() and "cpu" not in names and not experiment.accelerator_installed():
    raise ValueError(f"config.platform: {platform!r} names no platform of this machine, "
                     "which has no accelerator installed; use 'cpu' or leave it empty")


def plan(config: Any) -> dict[str, Any]:
  """``--dry_run``: the commits compared and the runs, without checking anything out."""
  check_config(config)
  found = commits(config)
  out: dict[str, Any] = {
      side: f"{config[side]} = {found[side][:12]}" if side in found else "the working tree"
      for side in ("before", "after")}
  runs = with_prerequisites(config.runs.split(","))
  out.update(runs=", ".join(r.name for r in runs), not_covered=", ".join(NOT_COVERED),
             data_dir=os.environ.get("PATE_JAX_DATA_DIR") or "UNSET (MNIST and Adult runs fail)",
             platform=config.platform.strip() or "JAX's default", timeout_s=config.timeout_s)
  return out


def run(config: Any, workdir: str) -> dict[str, Any]:
  """Checks out ``config.before`` (and ``config.after``, when a commit), runs the
  catalogue on both, compares, writes ``results.json`` (module docstring)."""
  t0 = time.perf_counter()
  check_config(config)
  found = commits(config)
  root = pathlib.Path(workdir).resolve()
  runs = with_prerequisites(config.runs.split(","))
  sources, made, done = {"before": _repo(), "after": _repo()}, [], {}
  try:
    for side, commit in found.items():
      sources[side] = root / f"{side}_src"
      if sources[side].exists():  # a killed earlier run's
        _git("worktree", "remove", "--force", str(sources[side]))
      _git("worktree", "add", "--detach", str(sources[side]), commit)
      made.append(sources[side])
    for side in ("before", "after"):
      # Marked: the comparison is a research measurement, private as a whole (a run's wall
      # may hold seconds that follow the private data: the main job's attack's).
      experiment.print_private(f"{side}: {config[side] or 'the working tree'} "
                               f"({sources[side]})")
      done[side] = run_catalogue(sources[side], root / side, _environment(config), runs=runs,
                                 timeout_s=float(config.timeout_s), log=experiment.print_private)
  finally:
    for path in made:
      _git("worktree", "remove", "--force", str(path))
  comparison = compare(root / "before", root / "after")
  per_run = {r.name: _status(r.name, done["before"][r.name], done["after"][r.name],
                             comparison["files"]) for r in runs}
  results = {
      "before": config.before or "working tree", "before_commit": found.get("before"),
      "after": config.after or "working tree", "after_commit": found.get("after"),
      "equal": all(r["equal"] for r in per_run.values()), "runs": per_run,
      "files": comparison["files"], "not_covered": NOT_COVERED,
      "commands": {r.name: done["after"][r.name]["command"] for r in runs},
      "total_wall_s": time.perf_counter() - t0,
  }
  experiment.write_results(workdir, results, config=config, seed=None,
                           disclosure=experiment.MEASUREMENT)
  return results


def report(results: Mapping[str, Any]) -> None:
  """One line per run (its verdict, exit codes and walls, the differing keys), then the
  verdict and the total wall."""
  for name, r in results["runs"].items():
    keys = r["differing_keys"]
    shown = (": " + ", ".join(keys[:6]) + (f" (+{len(keys) - 6} more)" if len(keys) > 6
                                            else "")) if keys else ""
    missing = f"; missing: {r['missing_files']}" if r["missing_files"] else ""
    print(f"{name:<25} {r['status']:<9} rc {r['rc_before']}/{r['rc_after']}, "
          f"{r['wall_before_s']:5.1f}/{r['wall_after_s']:5.1f} s, {r['json_files']} JSON"
          f"{shown}{missing}")
  verdict = "EQUAL" if results["equal"] else "NOT EQUAL"
  sides = [f"{results[s]} ({results[s + '_commit'][:12]})" if results[s + "_commit"]
           else results[s] for s in ("before", "after")]
  print(f"{verdict}: {sides[0]} vs {sides[1]}; {results['total_wall_s']:.0f} s")
