"""Helpers shared by the entry scripts in ``experiments/``.

Everything here runs at the boundary (host side): resolving the work directory,
recording provenance and writing ``results.json``. Library code below the entry
points never reads configs or writes files through this module.
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import pathlib
import platform
import subprocess
import time
from typing import Any, Iterable, Mapping

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


def progress(iterable=None, **kwargs):
  """A tqdm progress bar that writes to stderr and stays quiet when disabled."""
  from tqdm.auto import tqdm
  kwargs.setdefault("dynamic_ncols", True)
  kwargs.setdefault("disable", os.environ.get("PATE_JAX_NO_PROGRESS") == "1")
  return tqdm(iterable, **kwargs)
