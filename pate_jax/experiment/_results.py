"""Provenance and results files: what a run records, and the work directory it writes.

:func:`write_results` writes ``results.json`` with the disclosure (:data:`PUBLISHABLE`,
:data:`MEASUREMENT`, :data:`NO_PRIVATE_DATA`), the resolved config, the seed, the
package versions, the git hash and the device; :func:`read_results` reads it back.
:func:`remove_stale` clears an earlier run's outputs and :func:`locked_workdir` holds
the work directory's lock for a run. :func:`draw_private_figures` draws a run's private
figures once its publishable files are written, and records their seconds privately.
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
from typing import Any, Callable, Iterable, Iterator, Mapping, NamedTuple

import numpy as np

from pate_jax.io import set_times, times_kept, write_text

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
  root = pathlib.Path(__file__).resolve().parents[2]
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


def portable_path(value: str) -> str:
  """An absolute path as a path relative to the working directory (results files and
  configs name where things are from the run's directory, never the machine's root); one
  outside it as ``.../<its last part>`` (``../../tmp/x/data`` would spell the machine's
  directories out again)."""
  if not os.path.isabs(value):
    return value
  relative = os.path.relpath(value)
  if relative.split(os.sep, 1)[0] != os.pardir:
    return relative
  return "/".join(("...", os.path.basename(os.path.normpath(value)))).rstrip("/")


def to_jsonable(value: Any) -> Any:
  """Converts numpy/jax scalars and arrays, and ConfigDicts, to JSON types; paths
  (``os.PathLike``, or strings that are absolute paths) become relative ones."""
  if isinstance(value, os.PathLike):
    return portable_path(os.fspath(value))
  if isinstance(value, str) and value.startswith(os.sep):
    return portable_path(value)
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


def noise_disclosure(noise_source: Mapping[str, Any]) -> str:
  """The disclosure of a run that answered queries with the noise ``noise_source``
  (:func:`pate_jax.rng.noise_record`): :data:`PUBLISHABLE` with secret noise,
  :data:`MEASUREMENT` with a research seed, whose recorded noise lets anyone holding the
  labels recompute exact inequalities on the votes: no ε bounds what they reveal."""
  return MEASUREMENT if noise_source.get("public") else PUBLISHABLE


def write_results(workdir: str | os.PathLike, results: Mapping[str, Any], *, config: Any,
                  seed: int | None, name: str = "results.json",
                  disclosure: str = PUBLISHABLE,
                  written_at: float | None = None) -> pathlib.Path:
  """Writes ``results`` with the resolved config, seed, versions and git hash.

  Args:
    workdir: directory to write into (created if missing).
    results: the measured numbers.
    config: the resolved experiment config (a ConfigDict or mapping).
    seed: the root seed of the run.
    name: file name inside ``workdir``.
    disclosure: what of the file may be published (:data:`PUBLISHABLE`,
      :data:`MEASUREMENT` or :data:`NO_PRIVATE_DATA`), written first in the file. A file
      that holds a private value (:func:`holds_private`) is owner-only.
    written_at: the time the file records (seconds since the epoch; default now), and,
      where given, its modification time too. The main job records its student's end,
      since what came after (its attack on the private votes) took a time that is a
      function of them, which the file's own time would otherwise carry.

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
      "written_at": time.strftime("%Y-%m-%dT%H:%M:%S%z", time.localtime(written_at)),
  }
  out = write_text(path / name, json.dumps(record, indent=2, sort_keys=False) + "\n",
                   private=holds_private(record["results"], disclosure))
  if written_at is not None:
    set_times(out, written_at)
  return out


def disclosed_private(disclosure: Any) -> bool:
  """Whether a ``disclosure`` says the whole file is private (:data:`MEASUREMENT`)."""
  return str(disclosure or "").startswith("private")


def holds_private(results: Any, disclosure: str = PUBLISHABLE) -> bool:
  """Whether a results file holds a private value: private as a whole
  (:func:`disclosed_private`), or results with a ``private`` part (at any depth). Such a
  file is written owner-only (0600)."""
  if disclosed_private(disclosure):
    return True
  if isinstance(results, Mapping):
    return any(k == "private" or holds_private(v) for k, v in results.items())
  if isinstance(results, (list, tuple)):
    return any(holds_private(v) for v in results)
  return False


def remove_stale(workdir: str | os.PathLike, names: Iterable[str]) -> None:
  """Removes an earlier run's outputs ``names`` from ``workdir`` before a stage spends
  anything, so that a failure never leaves a report of less than was spent."""
  for name in names:
    with contextlib.suppress(FileNotFoundError):
      (pathlib.Path(workdir) / name).unlink()


class PrivateFigure(NamedTuple):
  """A figure drawn from the private data (the teachers' ``gap.png``, the aggregate stage's
  ``privacy.png``): ``draw(path)`` writes it at ``path``. Drawing it and compressing its
  PNG take a time that follows the votes, so it is drawn last
  (:func:`draw_private_figures`): a file written after it would carry those seconds in its
  time. ``name`` (``gap_plot``, ``privacy_plot``) names its record of seconds."""
  name: str
  path: pathlib.Path
  draw: Callable[[pathlib.Path], Any]


def figure_seconds_file(figure: PrivateFigure) -> pathlib.Path:
  """Where :func:`draw_private_figures` records ``figure``'s seconds: ``<name>_seconds.json``
  beside it, owner-only, ``{"figure": file name, "private": {"<name>_seconds": s}}`` (no
  ``disclosure``, no time of its own: it leaves what the run's results.json discloses
  as it is, :func:`pate_jax.experiment.private_as_a_whole`)."""
  return pathlib.Path(figure.path).with_name(f"{figure.name}_seconds.json")


def draw_private_figures(figures: Iterable[PrivateFigure]) -> dict[str, float]:
  """Draws ``figures`` in order, each followed by its record of seconds
  (:func:`figure_seconds_file`), and returns ``{name: seconds}``. A stage calls this as its
  last act, once every publishable file it writes is written, so that no publishable
  file's recorded time or modification time includes a private figure's drawing; a caller
  that runs the stage inside itself (the student, the main job) collects the stage's
  figures instead and draws them after its own files. The directory a figure is written
  in (the nearest that exists) keeps the access and modification times it had before the
  drawing (:func:`pate_jax.io.times_kept`): making the figure and its record there would
  otherwise set them to the drawing's end."""
  seconds = {}
  for figure in figures:
    if not isinstance(figure, PrivateFigure):
      raise ValueError(f"figures must hold PrivateFigure values; got {figure!r}")
    path = pathlib.Path(figure.path).absolute()
    directory = next(p for p in path.parents if p.is_dir())
    with times_kept(directory):
      start = time.perf_counter()
      figure.draw(pathlib.Path(figure.path))
      seconds[figure.name] = time.perf_counter() - start
      record = {"figure": path.name, "private": {f"{figure.name}_seconds": seconds[figure.name]}}
      write_text(figure_seconds_file(figure), json.dumps(record, indent=2) + "\n",
                 private=True)
  return seconds


@contextlib.contextmanager
def private_figures(figures: list[PrivateFigure] | None) -> Iterator[list[PrivateFigure]]:
  """The list a stage hands its private figures to, as a ``with`` block around the stage:
  ``figures``, the caller's list (a caller that runs the stage inside itself and draws
  them after its own files), or with ``None`` a new one, drawn
  (:func:`draw_private_figures`) when the block ends without an error."""
  if figures is not None and not isinstance(figures, list):
    raise ValueError(f"figures must be None or a list; got {type(figures).__name__}")
  drawn = [] if figures is None else figures
  yield drawn
  if figures is None:
    draw_private_figures(drawn)


def read_results(workdir: str | os.PathLike, name: str = "results.json") -> dict[str, Any]:
  """The ``results`` that :func:`write_results` wrote into ``workdir``."""
  return json.loads((pathlib.Path(workdir) / name).read_text())["results"]


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
