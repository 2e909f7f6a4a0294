"""Running a script: :func:`run_main`, its errors and outputs, determinism and timing.

:func:`run_main` is the entry point of a config-driven script (``--config``,
``--workdir``, ``--dry_run``, ``--help``); :func:`run_and_report` is what it does after
parsing the flags, ending with :func:`print_outputs`. :func:`set_deterministic` asks
XLA for deterministic GPU kernels before JAX starts, :func:`set_fast_compile` for XLA:CPU
programs compiled without LLVM's optimisation; :func:`accounting_device` picks where
a stage's privacy accounting runs; :func:`timed` is the benchmarks' timer.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import importlib.metadata
import io
import json
import os
import pathlib
import shutil
import signal
import sys
import time
from typing import Any, Callable, Iterator, Mapping

from pate_jax.experiment._config import (HELP_FLAGS, _config_arg, _default_config_spec,
                                         help_text, load_config, unknown_overrides)
from pate_jax.experiment._dry_run import dry_run
from pate_jax.experiment._results import disclosed_private

DETERMINISTIC_FLAG = "--xla_gpu_deterministic_ops=true"
FAST_COMPILE_FLAG = "--xla_backend_optimization_level=0"


def _xla_flag_set(flag: str) -> bool:
  """Whether this process's ``XLA_FLAGS`` holds ``flag``."""
  return flag in os.environ.get("XLA_FLAGS", "").split()


def deterministic_ops_enabled() -> bool:
  """Whether ``XLA_FLAGS`` asks GPU kernels for deterministic results."""
  return _xla_flag_set(DETERMINISTIC_FLAG)


def fast_compile_enabled() -> bool:
  """Whether ``XLA_FLAGS`` asks XLA:CPU to compile without LLVM's optimisation."""
  return _xla_flag_set(FAST_COMPILE_FLAG)


def without_deterministic_flag(xla_flags: str) -> str:
  """``xla_flags`` (an ``XLA_FLAGS`` value) without any ``--xla_gpu_deterministic_ops``
  setting: the environment of a subprocess that measures the default, non-deterministic
  GPU kernels while this process runs with deterministic ones."""
  return " ".join(f for f in xla_flags.split()
                  if not f.startswith(DETERMINISTIC_FLAG.split("=", 1)[0]))


def backend_started() -> bool | None:
  """Whether this process has started a JAX backend (XLA has read its flags, and on a GPU
  the allocator holds its share of the device); ``None`` if JAX's private call for it has
  moved (there is no public one)."""
  try:
    from jax._src import xla_bridge  # pylint: disable=g-import-not-at-top
    return bool(xla_bridge.backends_are_initialized())
  except (ImportError, AttributeError):
    return None


def python_path(first: str | os.PathLike, environ: Mapping[str, str] | None = None) -> str:
  """``PYTHONPATH`` for a subprocess: ``first``, then ``environ``'s (default: this
  process's), so that dependencies installed with ``pip --target`` stay importable."""
  rest = (os.environ if environ is None else environ).get("PYTHONPATH")
  return os.pathsep.join(p for p in (str(first), rest) if p)


def deterministic_requested(config: Any) -> bool | None:
  """``config.deterministic``, or a stage's (``config.teachers.deterministic`` in a
  pipeline's nested config: any of them asks); ``None`` when no config field names it."""
  if "deterministic" in config:
    return bool(config["deterministic"])
  nested = [bool(sub["deterministic"]) for sub in config.values()
            if hasattr(sub, "keys") and "deterministic" in sub]
  return any(nested) if nested else None


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
  return _ask_xla(DETERMINISTIC_FLAG, "deterministic") if deterministic else (
      deterministic_ops_enabled())


def _ask_xla(flag: str, field: str) -> bool:
  """Adds ``flag`` to ``XLA_FLAGS`` unless it is there; ``True``. Raises ``RuntimeError``
  naming the config ``field`` where a backend already started without it."""
  if _xla_flag_set(flag):
    return True
  if backend_started():
    raise RuntimeError(f"{field}=True must be set before JAX starts: export "
                       f"XLA_FLAGS='{flag}' or set it before creating any array")
  os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + " " + flag).strip()
  return True


def accelerator_installed() -> bool:
  """Whether this machine may run JAX on an accelerator: a JAX plugin (CUDA, ROCm, TPU) or
  NVIDIA's CUDA wheels installed, or an NVIDIA driver's ``nvidia-smi`` on the path."""
  names = {(d.metadata["Name"] or "").lower().replace("_", "-")
           for d in importlib.metadata.distributions()}
  return shutil.which("nvidia-smi") is not None or any(
      n.startswith(("jax-cuda", "jax-rocm", "libtpu", "nvidia-cu")) for n in names)


def compiles_for_cpu_only() -> bool:
  """Whether every backend this process may start is a CPU: ``JAX_PLATFORMS`` names only
  ``cpu``, or (unset) no accelerator is installed (:func:`accelerator_installed`)."""
  platforms = [p.strip() for p in os.environ.get("JAX_PLATFORMS", "").split(",") if p.strip()]
  return all(p == "cpu" for p in platforms) if platforms else not accelerator_installed()


def set_fast_compile(fast: bool) -> bool:
  """Asks XLA:CPU to compile without LLVM's optimisation passes (``FAST_COMPILE_FLAG``), for
  runs whose programs are tiny and brief, so that building them is most of their wall: a
  CPU rehearsal, a smoke run, the test suite. The programs compute the same operations up
  to float rounding (an optimised build may sum in another order: results are not
  bit-identical across the two); their own loops run slower, the library kernels of the
  convolutions and products do not change, so a run whose compute dominates (a CNN trained
  for long) loses by it. On the 2-core CPU the fast test tier took 591 s with it and 915 s
  without, the GPU acceptance's CPU rehearsal 272 s and 366 s (README). Like
  :func:`set_deterministic`, it must run before JAX starts a backend.

  Asked for only where every backend is a CPU (:func:`compiles_for_cpu_only`): XLA:GPU
  reads the same flag and would build every kernel of the run unoptimised. Elsewhere the
  request is declined (``False``) and XLA keeps its defaults.

  Returns:
    Whether the flag is in force.

  Raises:
    RuntimeError: ``fast`` was asked for after a backend started without it.
  """
  if fast and compiles_for_cpu_only():
    return _ask_xla(FAST_COMPILE_FLAG, "fast_compile")
  return fast_compile_enabled()


ACCOUNTING_DEVICES = ("host", "default")


def accounting_device(kind: str, name: str = "config.accounting_device") -> Any:
  """The device for a stage's privacy accounting: ``"host"``, the first CPU device;
  ``"default"``, JAX's default device (``None``: nothing set).

  The accounting of a few hundred or thousand answers is many small float64 programs
  (RDP and moments curves, smooth sensitivity, conditions C5/C6), each compiled once
  per run: on the host they build no GPU kernels and launch none. Use it as
  ``with jax.default_device(accounting_device(config.accounting_device)):``. A JAX
  without a CPU backend (``JAX_PLATFORMS`` naming accelerators only) gets ``None``.

  Raises:
    ValueError: naming ``name``: ``kind`` is not one of :data:`ACCOUNTING_DEVICES`.
  """
  if kind not in ACCOUNTING_DEVICES:
    raise ValueError(f"{name} must be one of {ACCOUNTING_DEVICES}; got {kind!r}")
  if kind == "default":
    return None
  import jax  # pylint: disable=g-import-not-at-top
  try:
    return jax.local_devices(backend="cpu")[0]
  except RuntimeError:  # the CPU backend is not among JAX_PLATFORMS
    return None


def user_errors() -> tuple[type[BaseException], ...]:
  """Errors a script reports in one line (a missing input, a refused resume, a held lock,
  a value refused by validation -- a bad config value, a refused budget, a wrong file):
  their messages say what to do, and a traceback would bury it. ``TypeError`` is left
  out on purpose: it usually means a bug, whose traceback is wanted."""
  from pate_jax.checkpoint import LockedError, ResumeMismatchError  # pylint: disable=g-import-not-at-top
  return (FileNotFoundError, NotADirectoryError, LockedError, ResumeMismatchError, ValueError)


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
  paths; the top level's JSON first, ``results.json`` first among them, checkpoints
  skipped)."""
  root = pathlib.Path(workdir).resolve()
  if not root.is_dir():
    return [], []
  def fresh(pattern):
    return sorted((p for p in root.rglob(pattern) if "checkpoints" not in p.parts
                   and p.is_file() and p.stat().st_mtime >= since - 1.0),
                  key=lambda p: (len(p.relative_to(root).parts), p.name != "results.json",
                                 str(p)))
  jsons = fresh("*.json")
  top = [p for p in jsons if p.parent == root]
  return (top or jsons), fresh("*.png")


def print_outputs(workdir: str | os.PathLike, since: float) -> None:
  """The last lines of every script: where its results and figures are."""
  jsons, pngs = output_files(workdir, since)
  print(f"results: {', '.join(map(str, jsons)) or '(none written)'}")
  if pngs:
    print(f"figures: {', '.join(map(str, pngs))}")


PRIVATE_MARK = "private (data owner only): "
"""How a printed line carrying a private value begins (README, *What you may publish*: on
screen every line without the word "private" is publishable)."""

PRIVATE_TITLE = "PRIVATE (data owner only): "
"""How the title of a figure drawn from private values begins (and the report's banner on
a private figure: "PRIVATE (data owner only)")."""


def mark_private(text: str) -> str:
  """``text`` with :data:`PRIVATE_MARK` before every non-blank line that does not already
  begin with it (or with :data:`PRIVATE_TITLE`, any case): a line that says "private"
  further on (a reason's "private training records", a value before a mid-line mark)
  is marked too, so every line of a private run reads as private from its start."""
  marks = (PRIVATE_MARK.strip().lower(), PRIVATE_TITLE.strip().lower())
  return "\n".join(line if not line.strip() or line.lstrip().lower().startswith(marks)
                   else PRIVATE_MARK + line for line in text.split("\n"))


def print_private_traceback(error: BaseException) -> None:
  """Prints ``error``'s traceback to stderr with :data:`PRIVATE_MARK` before every line: its
  message and its frames' values may quote what the run computed from the private data,
  and a line without the mark is publishable."""
  import traceback  # pylint: disable=g-import-not-at-top
  text = "".join(traceback.format_exception(type(error), error, error.__traceback__))
  print("".join(PRIVATE_MARK + line + "\n" for line in text.rstrip("\n").split("\n")),
        end="", file=sys.stderr, flush=True)


def _post_mortem(error: BaseException) -> None:
  """absl's ``--pdb_post_mortem`` (``--pdb``): the debugger on ``error``'s traceback, as
  absl would open it for an exception ``main`` let through (these are caught, to print
  their traceback marked private)."""
  from absl import flags  # pylint: disable=g-import-not-at-top
  if flags.FLAGS.is_parsed() and flags.FLAGS["pdb_post_mortem"].value:
    import pdb  # pylint: disable=g-import-not-at-top
    pdb.post_mortem(error.__traceback__)


def print_private(line: str) -> None:
  """Prints ``line`` after :data:`PRIVATE_MARK` (a private run's training log, as its
  ``log``)."""
  print(PRIVATE_MARK + line, flush=True)


def private_as_a_whole(workdir: str | os.PathLike) -> bool:
  """Whether a results file in ``workdir`` (``results.json``, or another name such as
  ``figure2.json``) says the whole file is private (its ``disclosure``, e.g.
  :data:`MEASUREMENT`)."""
  for path in sorted(pathlib.Path(workdir).glob("*.json")):
    try:
      record = json.loads(path.read_text())
    except (OSError, ValueError):
      continue
    if isinstance(record, dict) and disclosed_private(record.get("disclosure")):
      return True
  return False


def run_and_report(run: Callable[[Any, str], Any], report: Callable[[Any], None] | None,
                   config: Any, workdir: str) -> Any:
  """``run(config, workdir)``, then ``report(results)`` and :func:`print_outputs`: what a
  script does after parsing its flags (tests call it in-process). Where the results.json
  written is private as a whole (a research measurement), every line of the report says
  so (:func:`mark_private`)."""
  t0 = time.time()
  results = run(config, workdir)
  if report is not None:
    report_marked(report, results, workdir)
  print_outputs(workdir, t0)
  return results


def report_marked(report: Callable[[Any], None], results: Any,
                  workdir: str | os.PathLike) -> None:
  """``report(results)``, every printed line marked private (:func:`mark_private`) where
  a results file in ``workdir`` is private as a whole (:func:`private_as_a_whole`)."""
  if private_as_a_whole(workdir):
    report_private(report, results)
  else:
    report(results)


def report_private(report: Callable[[Any], None], results: Any) -> None:
  """``report(results)``, every line it prints marked private (:func:`mark_private`)."""
  with contextlib.redirect_stdout(io.StringIO()) as out:
    report(results)
  print(mark_private(out.getvalue()), end="")


class _MarkedLines(io.TextIOBase):
  """A text stream that writes each line to ``out`` as it ends, marked private
  (:func:`mark_private`); :meth:`close_line` writes an unfinished one."""

  def __init__(self, out: Any):
    super().__init__()
    self._out, self._pending = out, ""

  def writable(self) -> bool:
    return True

  def write(self, text: str) -> int:
    *lines, self._pending = (self._pending + text).split("\n")
    for line in lines:
      self._out.write(mark_private(line) + "\n")
    return len(text)

  def flush(self) -> None:
    self._out.flush()

  def close_line(self) -> None:
    if self._pending:
      self._out.write(mark_private(self._pending))
      self._pending = ""
    self._out.flush()


@contextlib.contextmanager
def printed_private(enabled: bool = True) -> Iterator[None]:
  """Within it (where ``enabled``), every line printed to stdout is marked private
  (:func:`mark_private`) as it ends: what a stage prints inside a run that is private as a
  whole (the teachers stage inside a main job with a research noise seed), whose lines
  would otherwise read as publishable. Every thread's prints are marked meanwhile (stdout
  is the process's)."""
  if not enabled:
    yield
    return
  marked = _MarkedLines(sys.stdout)
  try:
    with contextlib.redirect_stdout(marked):
      yield
  finally:
    marked.close_line()


@contextlib.contextmanager
def warnings_marked_private() -> Iterator[None]:
  """Within it, every line of a Python warning shown is marked private (:func:`mark_private`):
  a warning may quote the private data (a category of a training row unseen in the public
  split, the class counts of a teacher's shard in a cross-validation), and a line without
  the mark is publishable. Warnings filtered away stay unshown."""
  import warnings  # pylint: disable=g-import-not-at-top
  shown = warnings.showwarning

  def show(message, category, filename, lineno, file=None, line=None):
    out = sys.stderr if file is None else file
    try:
      out.write(mark_private(warnings.formatwarning(message, category, filename, lineno,
                                                    line)))
    except OSError:  # as warnings.showwarning: a stream that cannot be written
      pass

  warnings.showwarning = show
  try:
    yield
  finally:
    warnings.showwarning = shown


def _usage_error(message: str) -> None:
  print(f"error: {message}", file=sys.stderr)
  raise SystemExit(2)


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
    wanted = deterministic_requested(config)
    if wanted is not None:  # before JAX initialises a backend
      set_deterministic(wanted)
    if config.get("fast_compile"):  # a rehearsal's: likewise before the backend starts
      set_fast_compile(True)
    workdir = flags.FLAGS.workdir
    existed = workdir is not None and os.path.exists(workdir)
    try:
      with warnings_marked_private():
        if flags.FLAGS.dry_run:
          print(dry_run(config, plan))
          return
        run_and_report(run, report, config, workdir)
    except user_errors() as e:
      if not existed:
        remove_if_left_empty(workdir)
      if os.environ.get("PATE_JAX_TRACEBACK") == "1":
        print_private_traceback(e)
        _post_mortem(e)
        raise SystemExit(1) from None
      # Marked: a message may quote what a run computed from the private data (in a
      # research run, anything it computed), and a line without the mark is publishable.
      # A message of several lines (a list of the places a dataset was looked for) is
      # marked on each.
      message = (f"error: {PRIVATE_MARK}{type(e).__name__}: {e} (PATE_JAX_TRACEBACK=1 shows "
                 "the traceback)").split("\n")
      print("\n".join(message[:1] + [PRIVATE_MARK + line for line in message[1:]]),
            file=sys.stderr)
      raise SystemExit(1) from None
    except KeyboardInterrupt as e:  # Ctrl-C: a line, not the traceback of wherever it landed
      if not existed:
        remove_if_left_empty(workdir)
      if os.environ.get("PATE_JAX_TRACEBACK") == "1":
        print_private_traceback(e)
      # Marked like an error: every line a research run prints says private.
      print(f"interrupted: {PRIVATE_MARK}" + (
          f"what was finished stays in {workdir}; the same command resumes (a stage with "
          "checkpoints from its last complete one)" if workdir else "nothing was written"),
            file=sys.stderr, flush=True)
      # Ended by SIGINT, as an uncaught KeyboardInterrupt ends Python: a shell loop stops.
      # What is buffered is written first (stdout to a file or a pipe is); host work beside
      # the accelerator is not waited for (experiment.side_thread).
      import logging as std_logging  # pylint: disable=g-import-not-at-top
      sys.stdout.flush()
      std_logging.shutdown()
      signal.signal(signal.SIGINT, signal.SIG_DFL)
      os.kill(os.getpid(), signal.SIGINT)
      raise SystemExit(130) from None  # where SIGINT is blocked
    except Exception as e:  # pylint: disable=broad-except  # a bug: its traceback, marked
      print_private_traceback(e)
      _post_mortem(e)
      raise SystemExit(1) from None

  app.run(main, argv=argv)


def remove_if_left_empty(workdir: str | os.PathLike | None) -> bool:
  """Removes ``workdir`` if it holds nothing but run locks and empty directories: what a run
  refused before it wrote anything leaves (call it only for a workdir the run created).
  Returns whether it was removed."""
  from pate_jax.checkpoint import LOCK_FILE  # pylint: disable=g-import-not-at-top
  root = pathlib.Path(workdir) if workdir else None
  if root is None or not root.is_dir():
    return False
  if any((p.is_file() and p.name != LOCK_FILE) or p.is_symlink() for p in root.rglob("*")):
    return False
  shutil.rmtree(root)
  return True


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


@contextlib.contextmanager
def side_thread() -> Iterator[concurrent.futures.ThreadPoolExecutor]:
  """One host thread for work beside the accelerator (a compilation ahead, the attack
  beside the student). Leaving normally waits for that work; leaving by an exception does
  not: queued work is cancelled and the stage's error reaches the user at once. What is
  running still holds the process at its exit (Python joins the thread), but for Ctrl-C,
  which ends it by SIGINT (:func:`run_main`)."""
  pool = concurrent.futures.ThreadPoolExecutor(1)
  try:
    yield pool
  except BaseException:
    pool.shutdown(wait=False, cancel_futures=True)
    raise
  pool.shutdown(wait=True)


class PhaseClock:
  """Where a stage's wall goes: ``clock.mark("votes")`` ends the phase begun at the previous
  mark (or at the clock's start) and adds its seconds to ``seconds["votes"]`` (a name
  marked again accumulates). The phases tile the time from the start to the last mark, so
  they add up to the stage's wall up to that mark; host work in other threads is not
  theirs. The stages record them as ``phase_seconds`` in ``results.json``.
  ``clock.set_aside()`` ends a phase that is neither recorded nor in :meth:`elapsed` (time
  whose length is not the stage's to publish)."""

  def __init__(self):
    self.start = self._last = time.perf_counter()
    self.seconds: dict[str, float] = {}
    self._aside = 0.0

  def _lap(self) -> float:
    now = time.perf_counter()
    spent, self._last = now - self._last, now
    return spent

  def mark(self, name: str) -> float:
    """Ends phase ``name``; returns its seconds (this mark's)."""
    spent = self._lap()
    self.seconds[name] = self.seconds.get(name, 0.0) + spent
    return spent

  def set_aside(self) -> float:
    """Ends the phase begun at the previous mark, out of the phases and of :meth:`elapsed`;
    returns its seconds."""
    spent = self._lap()
    self._aside += spent
    return spent

  def elapsed(self) -> float:
    """Seconds since the clock started, but those set aside."""
    return time.perf_counter() - self.start - self._aside
