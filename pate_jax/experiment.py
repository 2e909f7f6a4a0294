"""The harness: helpers shared by the stages and the entry scripts in ``experiments/``.

Everything here runs at the boundary (host side): resolving the work directory,
recording provenance and writing ``results.json``, reading configs, ``run_main``. The
core library never imports this module; the generic file and array helpers it needs
(:func:`data_digest`, :func:`progress`, :func:`write_text`) live in :mod:`pate_jax.io`
and are re-exported here.
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import json
import os
import pathlib
import platform
import subprocess
import time
from typing import Any, Callable, Iterable, Iterator, Mapping

import numpy as np

from pate_jax.io import data_digest, progress, write_text  # re-exported: the harness's too

_PACKAGES = (
    "jax", "jaxlib", "flax", "optax", "orbax-checkpoint", "chex", "ml-collections",
    "numpy", "scipy", "scikit-learn", "tensorflow-datasets", "dp-accounting",
)


def package_versions(packages: Iterable[str] = _PACKAGES) -> dict[str, str | None]:
  """Installed versions of ``packages`` (``None`` where not installed)."""
  out = {}
  for name in packages:
    try:
      out[name] = importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
      out[name] = None
  return out


def git_hash() -> str | None:
  """Commit of the code that produced a result, suffixed ``-dirty`` if modified."""
  root = pathlib.Path(__file__).resolve().parent.parent
  try:
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True,
                          text=True, check=True).stdout.strip()
    dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"],
                           cwd=root, capture_output=True, text=True, check=True).stdout.strip()
  except (OSError, subprocess.CalledProcessError):
    return None
  return head + ("-dirty" if dirty else "")


def device_info() -> dict[str, Any]:
  import jax  # Imported lazily so this module stays importable without jax.
  devices = jax.devices()
  return {
      "backend": jax.default_backend(),
      "device_count": len(devices),
      "device_kind": devices[0].device_kind,
      "host": platform.node(),
      "cpu_count": os.cpu_count(),
  }


def to_jsonable(value: Any) -> Any:
  """Converts numpy/jax scalars and arrays, and ConfigDicts, to JSON types."""
  if hasattr(value, "to_dict"):
    value = value.to_dict()
  if isinstance(value, Mapping):
    return {str(k): to_jsonable(v) for k, v in value.items()}
  if isinstance(value, (list, tuple)):
    return [to_jsonable(v) for v in value]
  if isinstance(value, (np.generic,)):
    return value.item()
  if hasattr(value, "__array__") and not isinstance(value, (str, bytes)):
    arr = np.asarray(value)
    return arr.item() if arr.ndim == 0 else arr.tolist()
  if isinstance(value, float) and not np.isfinite(value):
    return str(value)
  return value


PUBLISHABLE = ("publishable: every value outside a `private` part (functions of the private "
               "data, for the data owner only)")
"""The disclosure of a stage's results: what may be published, and what not."""

MEASUREMENT = ("private: a research measurement of the private data (many noisy answers "
               "and no privacy budget, or the teachers themselves); for the data owner only")
"""The disclosure of a research experiment's results (figures of the papers, ablations,
attacks on the run's own votes)."""

NO_PRIVATE_DATA = "publishable: synthetic or public data only"
"""The disclosure of a benchmark on synthetic data."""


def write_results(workdir: str | os.PathLike, results: Mapping[str, Any], *, config: Any,
                  seed: int | None, name: str = "results.json",
                  disclosure: str = PUBLISHABLE) -> pathlib.Path:
  """Writes ``results`` with the resolved config, seed, versions and git hash.

  Args:
    workdir: directory to write into (created if missing).
    results: the measured numbers.
    config: the resolved experiment config (a ConfigDict or mapping).
    seed: the root seed of the run.
    name: file name inside ``workdir``.
    disclosure: what of the file may be published (:data:`PUBLISHABLE`,
      :data:`MEASUREMENT` or :data:`NO_PRIVATE_DATA`), written first in the file.

  Returns:
    The path written.
  """
  path = pathlib.Path(workdir)
  path.mkdir(parents=True, exist_ok=True)
  record = {
      "disclosure": disclosure,
      "results": to_jsonable(results),
      "config": to_jsonable(config),
      "seed": seed,
      "git": git_hash(),
      "versions": package_versions(),
      "device": device_info(),
      "written_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
  }
  return write_text(path / name, json.dumps(record, indent=2, sort_keys=False) + "\n")


def remove_stale(workdir: str | os.PathLike, names: Iterable[str]) -> None:
  """Removes an earlier run's outputs ``names`` from ``workdir`` before a stage spends
  anything, so that a failure never leaves a report of less than was spent."""
  for name in names:
    with contextlib.suppress(FileNotFoundError):
      (pathlib.Path(workdir) / name).unlink()


def read_results(workdir: str | os.PathLike, name: str = "results.json") -> dict[str, Any]:
  """The ``results`` that :func:`write_results` wrote into ``workdir``."""
  return json.loads((pathlib.Path(workdir) / name).read_text())["results"]


def config_fields(config: Any, fields: Iterable[str]) -> dict[str, Any]:
  """``{field: value}`` of dotted ``fields`` of a ConfigDict (``"model.kwargs"``); a field
  the config lacks is ``None``. The input of a checkpoint fingerprint
  (:class:`pate_jax.checkpoint.Checkpointer`)."""
  out = {}
  for name in fields:
    value = config
    for part in name.split("."):
      value = value.get(part) if hasattr(value, "get") else None
    out[name] = value
  return out


@contextlib.contextmanager
def locked_workdir(workdir: str | os.PathLike, *, enabled: bool = True) -> Iterator[pathlib.Path]:
  """Holds ``<workdir>/.lock`` for a run: a second run on the same workdir fails at once
  with :class:`pate_jax.checkpoint.LockedError` naming this process; the lock of a
  killed run is taken over. ``enabled=False`` (other processes of a multi-process run)
  takes no lock."""
  from pate_jax.checkpoint import DirectoryLock  # pylint: disable=g-import-not-at-top
  if not enabled:
    yield pathlib.Path(workdir)
    return
  with DirectoryLock(workdir) as lock:
    yield lock.directory


DETERMINISTIC_FLAG = "--xla_gpu_deterministic_ops=true"


def deterministic_ops_enabled() -> bool:
  """Whether ``XLA_FLAGS`` asks GPU kernels for deterministic results."""
  return DETERMINISTIC_FLAG in os.environ.get("XLA_FLAGS", "").split()


def set_deterministic(deterministic: bool) -> bool:
  """Asks XLA for deterministic GPU kernels (convolution algorithms, reductions,
  scatters without atomics) so that a killed and resumed run ends bit-identical.

  XLA reads ``XLA_FLAGS`` once, when JAX initialises its first backend, so this
  must run before any array is created; the entry point calls it right after
  parsing the config. CPU and TPU ignore the flag (their kernels are
  deterministic already).

  Returns:
    Whether deterministic ops are in force.

  Raises:
    RuntimeError: ``deterministic`` was asked for after a backend started without it.
  """
  if not deterministic or deterministic_ops_enabled():
    return deterministic_ops_enabled()
  from jax._src import xla_bridge  # pylint: disable=g-import-not-at-top
  if xla_bridge.backends_are_initialized():
    raise RuntimeError(
        "deterministic=True must be set before JAX starts: export "
        f"XLA_FLAGS='{DETERMINISTIC_FLAG}' or set it before creating any array")
  os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + " " + DETERMINISTIC_FLAG).strip()
  return True


HELP_FLAGS = ("--help", "-h", "-?", "--helpshort")


def user_errors() -> tuple[type[BaseException], ...]:
  """Errors a script reports in one line (a missing input, a refused resume, a held lock,
  a value refused by validation -- a bad config value, a refused budget, a wrong file):
  their messages say what to do, and a traceback would bury it. ``TypeError`` is left
  out on purpose: it usually means a bug, whose traceback is wanted."""
  from pate_jax.checkpoint import LockedError, ResumeMismatchError  # pylint: disable=g-import-not-at-top
  return (FileNotFoundError, NotADirectoryError, LockedError, ResumeMismatchError, ValueError)


def _config_arg(argv: list[str]) -> str | None:
  """The ``--config`` value on a command line (``--config=x`` or ``--config x``)."""
  for i, a in enumerate(argv):
    if a.startswith("--config="):
      return a.split("=", 1)[1]
    if a == "--config" and i + 1 < len(argv):
      return argv[i + 1]
  return None


def load_config(spec: str) -> Any:
  """The ConfigDict of ``path[:variant]`` as ``--config`` would load it."""
  path, _, arg = spec.partition(":")
  module = load_script(path)
  return module.get_config(arg) if arg else module.get_config()


def config_items(config: Any, prefix: str = "") -> list[tuple[str, Any]]:
  """``(dotted name, value)`` of every field of a ConfigDict, nested ones included (a
  sub-config is listed before its fields)."""
  items = []
  for key, value in config.items():
    name = f"{prefix}{key}"
    items.append((name, value))
    if _is_node(value):
      items.extend(config_items(value, name + "."))
  return items


def _is_node(value: Any) -> bool:
  return hasattr(value, "items") and hasattr(value, "to_dict")


def closest_fields(name: str, config: Any, n: int = 3) -> list[str]:
  """The valid dotted names nearest to ``name``: nested fields ending in it first (for a
  composed config such as ``run_pate.py``'s), then :func:`difflib.get_close_matches` over
  the full and the last component of every name."""
  import difflib  # pylint: disable=g-import-not-at-top
  names = [k for k, _ in config_items(config)]
  nested = [k for k in names if k.endswith("." + name)]
  if nested:
    return nested[:n]
  out = difflib.get_close_matches(name, names, n=n, cutoff=0.6)
  last = name.rsplit(".", 1)[-1]
  out += [k for k in names if k.rsplit(".", 1)[-1] in
          difflib.get_close_matches(last, [k.rsplit(".", 1)[-1] for k in names], n=n,
                                    cutoff=0.75)]
  return list(dict.fromkeys(out))[:n]


def unknown_overrides(argv: list[str], config: Any) -> list[tuple[str, list[str]]]:
  """``(field, closest valid names)`` for every ``--config.field=value`` on ``argv`` whose
  field the config lacks."""
  names = {k for k, _ in config_items(config)}
  bad = []
  for a in argv:
    if a.startswith("--config.") and len(a) > len("--config."):
      field = a[len("--config."):].split("=", 1)[0]
      if field not in names:
        bad.append((field, closest_fields(field, config)))
  return bad


def help_text(doc: str | None, config_spec: str | None, config: Any | None) -> str:
  """``--help``: the script's docstring (its usage), the flags, and the config's fields
  with their defaults."""
  lines = [(doc or "").strip(), "", "flags:",
           "  --config PATH[:VARIANT]  the experiment's config file (configs/*.py; "
           "':cpu' is the small CPU variant)",
           "  --workdir DIR            where results.json, plots and checkpoints go "
           "(a rerun resumes)",
           "  --config.FIELD=VALUE     override one config field (fields below)",
           "  --dry_run                print the resolved config, data sizes, device mesh and",
           "                           planned memory per chunk; train and write nothing (no",
           "                           --workdir needed)",
           "  --helpfull               every absl flag"]
  if config is not None:
    lines += ["", f"config fields of {config_spec} (defaults):"]
    for name, value in config_items(config):
      if not _is_node(value):
        lines.append(f"  --config.{name}={value!r}")
  elif config_spec:
    lines += ["", f"(could not load {config_spec} to list its fields)"]
  return "\n".join(lines)


def _default_config_spec(doc: str | None, script: str) -> str | None:
  """The config named by the script's usage line in its docstring (``python
  experiments/<script>.py ... --config configs/x.py[:variant]``)."""
  import re  # pylint: disable=g-import-not-at-top
  doc = doc or ""
  at = doc.find(pathlib.Path(script).name)
  m = re.search(r"--config[= ](\S+\.py(?::\w+)?)", doc[max(at, 0):])
  return m.group(1) if m else None


def quiet_backend_probe() -> None:
  """Hides JAX's INFO line about backends it could not start ("Unable to initialize backend
  'tpu' … libtpu.so"): expected on a machine without a TPU, alarming to a newcomer; and
  matplotlib's INFO chatter ("Using categorical units …")."""
  import logging as std_logging  # pylint: disable=g-import-not-at-top
  for name in ("jax._src.xla_bridge", "matplotlib"):
    std_logging.getLogger(name).setLevel(std_logging.WARNING)


def output_files(workdir: str | os.PathLike, since: float) -> tuple[list[pathlib.Path],
                                                                     list[pathlib.Path]]:
  """The JSON results and PNG figures written under ``workdir`` since ``since`` (absolute
  paths; the top level's JSON first, checkpoints skipped)."""
  root = pathlib.Path(workdir).resolve()
  if not root.is_dir():
    return [], []
  def fresh(pattern):
    return sorted((p for p in root.rglob(pattern) if "checkpoints" not in p.parts
                   and p.is_file() and p.stat().st_mtime >= since - 1.0),
                  key=lambda p: (len(p.relative_to(root).parts), str(p)))
  jsons = fresh("*.json")
  top = [p for p in jsons if p.parent == root]
  return (top or jsons), fresh("*.png")


def print_outputs(workdir: str | os.PathLike, since: float) -> None:
  """The last lines of every script: where its results and figures are."""
  jsons, pngs = output_files(workdir, since)
  print(f"results: {', '.join(map(str, jsons)) or '(none written)'}")
  if pngs:
    print(f"figures: {', '.join(map(str, pngs))}")


def run_and_report(run: Callable[[Any, str], Any], report: Callable[[Any], None] | None,
                   config: Any, workdir: str) -> Any:
  """``run(config, workdir)``, then ``report(results)`` and :func:`print_outputs`: what a
  script does after parsing its flags (tests call it in-process)."""
  t0 = time.time()
  results = run(config, workdir)
  if report is not None:
    report(results)
  print_outputs(workdir, t0)
  return results


def _usage_error(message: str) -> None:
  import sys  # pylint: disable=g-import-not-at-top
  print(f"error: {message}", file=sys.stderr)
  raise SystemExit(2)


def format_bytes(n: Any) -> str:
  """``n`` bytes as ``"123,456 B (0.12 MiB)"``: exact and readable."""
  n = int(n)
  for unit, size in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
    if abs(n) >= size:
      return f"{n:,} B ({n / size:.2f} {unit})"
  return f"{n:,} B"


def mesh_info(config: Any = None) -> dict[str, Any]:
  """The devices a run would use: backend, processes, local/global device counts and kinds;
  for a teachers config (one with ``num_teachers`` and ``strategy``, or a ``teachers``
  sub-config with them), the teacher mesh's shape and the padded teachers per device
  (:mod:`pate_jax.teachers`). Starts the backend (after :func:`set_deterministic`)."""
  import jax  # pylint: disable=g-import-not-at-top
  devices, local = jax.devices(), jax.local_devices()
  info: dict[str, Any] = {
      "backend": jax.default_backend(),
      "process_count": jax.process_count(),
      "process_index": jax.process_index(),
      "local_device_count": len(local),
      "global_device_count": len(devices),
      "device_kinds": sorted({d.device_kind for d in devices}),
  }
  stage = config
  if stage is not None and "num_teachers" not in stage and "teachers" in stage:
    stage = stage.teachers
  if stage is not None and _is_node(stage) and "num_teachers" in stage and "strategy" in stage:
    from pate_jax import teachers  # pylint: disable=g-import-not-at-top
    mesh = teachers.teacher_mesh()
    t, d = int(stage.num_teachers), int(mesh.size)
    strategy = (teachers.default_strategy() if stage.strategy == "auto" else stage.strategy)
    info["teacher_mesh"] = dict(mesh.shape)
    info["teacher_strategy"] = strategy + (" (auto)" if stage.strategy == "auto" else "")
    info["num_teachers"] = t
    if strategy == "loop":  # one teacher at a time on the default device: no padding
      info["padded_teachers"] = t
      info["teachers_per_device"] = f"{t} on one device (loop strategy: no teacher mesh used)"
    else:
      info["padded_teachers"] = t + (-t) % d
      info["teachers_per_device"] = (t + (-t) % d) // d
  return info


def _plan_lines(plan: Mapping[str, Any], prefix: str = "") -> list[str]:
  lines = []
  for key, value in plan.items():
    name = f"{prefix}{key}"
    if hasattr(value, "to_dict"):
      value = value.to_dict()
    if isinstance(value, Mapping):
      if value:
        lines += _plan_lines(value, name + ".")
      else:
        lines.append(f"  {name}: {{}}")
    elif "bytes" in str(key) and isinstance(value, (int, np.integer)):
      lines.append(f"  {name}: {format_bytes(value)}")
    else:
      lines.append(f"  {name}: {value}")
  return lines


def votes_plan(votes_dir: Any, what: str = "config.votes_dir") -> tuple[dict[str, Any],
                                                                     dict | None]:
  """For a ``plan``: the sizes of the ``votes.npz`` in ``votes_dir`` and the votes, or
  ``({"votes": "MISSING: ..."}, None)`` when there are none (a dry run says so rather than
  fail)."""
  from pate_jax import votes as votes_lib  # pylint: disable=g-import-not-at-top
  if not votes_dir:
    return {"votes": f"MISSING: {what} is empty (name a teachers workdir with votes.npz)"}, None
  try:
    v = votes_lib.load_votes(votes_dir)
  except (FileNotFoundError, NotADirectoryError, OSError) as e:
    return {"votes": f"MISSING: {e}"}, None
  return {"votes": str(votes_dir), "votes_dataset": v["dataset"],
          "votes_num_teachers": int(v["num_teachers"]),
          "votes_rows": int(v["votes"].shape[0]), "votes_num_pool": int(v["num_pool"]),
          "votes_num_classes": int(v["votes"].shape[1])}, v


def compiled_temp_bytes(fn: Callable, *args) -> int | str | None:
  """:func:`pate_jax.memory.temp_bytes` of ``jit(fn)(*args)`` for a ``plan`` (``args``
  abstract), or why it could not be measured (a plan must print what it can)."""
  from pate_jax import memory  # pylint: disable=g-import-not-at-top
  try:
    return memory.temp_bytes(fn, *args)
  except Exception as e:  # pylint: disable=broad-except
    return f"not measured ({type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''})"


def dry_run_text(config: Any, plan: Mapping[str, Any] | None,
                 mesh: Mapping[str, Any] | None) -> str:
  """What ``--dry_run`` prints: the resolved config (every field, ``name: value``), the
  device mesh (:func:`mesh_info`) and the script's plan (data sizes, planned memory per
  chunk; nested dicts as dotted names, ``*bytes`` fields also in KiB/MiB/GiB)."""
  lines = ["dry run: nothing is trained or written", "", "config:"]
  for name, value in config_items(config):
    if not _is_node(value):
      lines.append(f"  {name}: {value!r}")
  lines += ["", "devices:"] + _plan_lines(mesh or {})
  lines += ["", "plan:"]
  lines += _plan_lines(plan) if plan else ["  (this script has no plan)"]
  return "\n".join(lines)


def dry_run(config: Any, plan: Callable[[Any], Mapping[str, Any]] | None) -> str:
  """The text of ``--dry_run`` for ``config``: joins a multi-process run if asked (as
  the scripts do), describes the devices and calls ``plan(config)``. Reads inputs,
  compiles small probes; writes nothing."""
  from pate_jax import distributed  # pylint: disable=g-import-not-at-top
  distributed.initialize()
  mesh = mesh_info(config)
  return dry_run_text(config, None if plan is None else plan(config), mesh)


def run_main(run: Callable[[Any, str], Any], *, report: Callable[[Any], None] | None = None,
             plan: Callable[[Any], Mapping[str, Any]] | None = None,
             quiet_logs: bool = False, argv: list[str] | None = None) -> None:
  """The entry point of a config-driven script in ``experiments/``.

  Defines ``--config`` (an ml_collections config file, ``path[:variant]``, with
  ``--config.field=value`` overrides), ``--workdir`` and ``--dry_run``, then calls
  ``run(config, workdir)`` and ``report(results)``, and ends with the absolute paths of
  the results and figures written. Flags are defined here, when a script is executed,
  not when it is imported, so that scripts can import each other's ``run``
  (``run_pate.py``) and tests can call ``run`` directly.

  ``--help`` prints the script's docstring, the flags and the config's fields with their
  defaults (the config given, else the one in the docstring's usage line) and exits 0; an
  override of a field the config lacks is a one-line error naming the closest valid
  fields (exit 2). ``--dry_run`` prints :func:`dry_run`'s text (the resolved config, the
  device mesh and ``plan(config)``) and exits 0 without calling ``run``: no workdir is
  needed, created, written or locked.

  Args:
    run: ``run(config, workdir) -> results``.
    report: prints a summary of the results.
    plan: ``plan(config) -> dict`` of data sizes and planned memory (``--dry_run``).
    quiet_logs: raise absl's verbosity to WARNING (orbax logs every save at INFO).
    argv: the command line (default ``sys.argv``).
  """
  import sys  # pylint: disable=g-import-not-at-top
  from absl import app, flags, logging  # pylint: disable=g-import-not-at-top
  from ml_collections import config_flags  # pylint: disable=g-import-not-at-top

  argv = list(sys.argv if argv is None else argv)
  doc = getattr(sys.modules.get("__main__"), "__doc__", None)
  spec = _config_arg(argv[1:])
  if any(a in HELP_FLAGS for a in argv[1:]):
    spec = spec or _default_config_spec(doc, argv[0])
    try:
      config = load_config(spec) if spec else None
    except Exception:  # pylint: disable=broad-except  # help must print whatever happens
      config = None
    print(help_text(doc, spec, config))
    raise SystemExit(0)
  if spec:
    try:
      config = load_config(spec)
    except Exception as e:  # pylint: disable=broad-except
      _usage_error(f"--config {spec}: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}")
    for field, near in unknown_overrides(argv[1:], config):
      hint = (" did you mean " + " or ".join(f"--config.{n}" for n in near) + "?") if near else ""
      _usage_error(f"{spec} has no field {field!r};{hint} (--help lists the fields)")

  config_flags.DEFINE_config_file("config", None, "Experiment config file (path[:variant]).",
                                  lock_config=True)
  flags.DEFINE_string("workdir", None, "Where to write results.json, plots and checkpoints.")
  flags.DEFINE_bool("dry_run", False, "Print the resolved config, data sizes, device mesh and "
                    "planned memory per chunk, then exit without training or writing.")
  flags.mark_flags_as_required(["config"])

  def main(args):
    if len(args) > 1:
      raise app.UsageError(f"unexpected arguments: {args[1:]}")
    if not flags.FLAGS.dry_run and flags.FLAGS.workdir is None:
      raise app.UsageError("flag --workdir must have a value other than None "
                           "(only --dry_run runs without one)")
    quiet_backend_probe()
    if quiet_logs:
      logging.set_verbosity(logging.WARNING)
    config = flags.FLAGS.config
    if "deterministic" in config:  # before JAX initialises a backend
      set_deterministic(bool(config.deterministic))
    try:
      if flags.FLAGS.dry_run:
        print(dry_run(config, plan))
        return
      run_and_report(run, report, config, flags.FLAGS.workdir)
    except user_errors() as e:
      if os.environ.get("PATE_JAX_TRACEBACK") == "1":
        raise
      print(f"error: {type(e).__name__}: {e} (PATE_JAX_TRACEBACK=1 shows the traceback)",
            file=sys.stderr)
      raise SystemExit(1) from None

  app.run(main, argv=argv)


def load_script(path: str | os.PathLike) -> Any:
  """Imports a config or experiment file by path (``configs/`` and ``experiments/`` are
  directories of scripts, not packages)."""
  import importlib.util  # pylint: disable=g-import-not-at-top
  path = pathlib.Path(path)
  spec = importlib.util.spec_from_file_location(f"_pate_jax_script_{path.stem}", path)
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  return module


def timed(fn: Callable[[], Any], repeats: int) -> tuple[list[float], list[float]]:
  """Wall and CPU seconds of ``repeats`` calls of ``fn`` (each blocked until ready): the
  benchmarks' timer."""
  import jax  # pylint: disable=g-import-not-at-top
  wall, cpu = [], []
  for _ in range(repeats):
    start, cpu_start = time.perf_counter(), time.process_time()
    jax.block_until_ready(fn())
    wall.append(time.perf_counter() - start)
    cpu.append(time.process_time() - cpu_start)
  return wall, cpu
