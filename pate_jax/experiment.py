"""Helpers shared by the entry scripts in ``experiments/``.

Everything here runs at the boundary (host side): resolving the work directory,
recording provenance and writing ``results.json``. Library code below the entry
points never reads configs or writes files through this module.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.metadata
import json
import os
import pathlib
import platform
import subprocess
import time
from typing import Any, Callable, Iterable, Iterator, Mapping

import numpy as np

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


def write_results(workdir: str | os.PathLike, results: Mapping[str, Any], *, config: Any,
                  seed: int | None, name: str = "results.json") -> pathlib.Path:
  """Writes ``results`` with the resolved config, seed, versions and git hash.

  Args:
    workdir: directory to write into (created if missing).
    results: the measured numbers.
    config: the resolved experiment config (a ConfigDict or mapping).
    seed: the root seed of the run.
    name: file name inside ``workdir``.

  Returns:
    The path written.
  """
  path = pathlib.Path(workdir)
  path.mkdir(parents=True, exist_ok=True)
  record = {
      "results": to_jsonable(results),
      "config": to_jsonable(config),
      "seed": seed,
      "git": git_hash(),
      "versions": package_versions(),
      "device": device_info(),
      "written_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
  }
  out = path / name
  tmp = out.with_suffix(out.suffix + ".tmp")
  tmp.write_text(json.dumps(record, indent=2, sort_keys=False) + "\n")
  tmp.replace(out)
  return out


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


def data_digest(*arrays: Any) -> str:
  """SHA-256 of arrays' dtypes, shapes and bytes: which data a run trained on."""
  h = hashlib.sha256()
  for a in arrays:
    a = np.ascontiguousarray(a)
    h.update(f"{a.dtype.str}|{a.shape}|".encode())
    h.update(memoryview(a).cast("B"))
  return h.hexdigest()


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


def progress(iterable=None, **kwargs):
  """A tqdm progress bar that writes to stderr and stays quiet when disabled."""
  from tqdm.auto import tqdm
  kwargs.setdefault("dynamic_ncols", True)
  kwargs.setdefault("disable", os.environ.get("PATE_JAX_NO_PROGRESS") == "1")
  return tqdm(iterable, **kwargs)


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


def run_main(run: Callable[[Any, str], Any], *, report: Callable[[Any], None] | None = None,
             quiet_logs: bool = False) -> None:
  """The entry point of a config-driven script in ``experiments/``.

  Defines ``--config`` (an ml_collections config file, ``path[:variant]``, with
  ``--config.field=value`` overrides) and ``--workdir``, then calls
  ``run(config, workdir)`` and ``report(results)``. Flags are defined here, when
  a script is executed, not when it is imported, so that scripts can import each
  other's ``run`` (``run_pate.py``) and tests can call ``run`` directly.

  Args:
    run: ``run(config, workdir) -> results``.
    report: prints a summary of the results.
    quiet_logs: raise absl's verbosity to WARNING (orbax logs every save at INFO).
  """
  from absl import app, flags, logging  # pylint: disable=g-import-not-at-top
  from ml_collections import config_flags  # pylint: disable=g-import-not-at-top

  config_flags.DEFINE_config_file("config", None, "Experiment config file (path[:variant]).",
                                  lock_config=True)
  flags.DEFINE_string("workdir", None, "Where to write results.json, plots and checkpoints.")
  flags.mark_flags_as_required(["config", "workdir"])

  def main(argv):
    if len(argv) > 1:
      raise app.UsageError(f"unexpected arguments: {argv[1:]}")
    if quiet_logs:
      logging.set_verbosity(logging.WARNING)
    config = flags.FLAGS.config
    if "deterministic" in config:  # before JAX initialises a backend
      set_deterministic(bool(config.deterministic))
    results = run(config, flags.FLAGS.workdir)
    if report is not None:
      report(results)

  app.run(main)


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
