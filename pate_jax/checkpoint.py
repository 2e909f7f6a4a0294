"""Orbax checkpoints of a pytree train state, keyed by training step, and what makes a
resume safe: it continues the *same* run, past a corrupted step, in one process at a time.

* **Fingerprint.** :class:`Checkpointer` stores a flat JSON record of everything that
  determines the run (seed, data digest, partition, optimiser, model: see
  :func:`fingerprint`) as ``fingerprint.json`` beside the step directories. A resume
  whose fingerprint differs is refused with :class:`ResumeMismatchError` naming the
  differing fields, unless ``restart=True`` discards the checkpoints and starts over
  (the message names the flag that sets it: ``restart_flag``, ``--config.restart`` by
  default, ``--config.teachers.restart`` in a main job whose stage configs are nested).
  For PATE this protects the privacy analysis: teachers resumed with another seed would
  continue on *another* partition, so one example could end up in two teachers.
* **Fallback.** :meth:`Checkpointer.restore_or` tries the steps newest first; a step
  that does not restore (truncated or garbage files, missing metadata, an empty
  directory) is moved to ``corrupt/`` and named in one warning line, and the newest
  step that restores is used (none: the run starts over, which for a deterministic run
  gives the same result).
* **Lock.** A :class:`DirectoryLock` (an ``flock``-ed ``.lock`` file holding the pid)
  keeps a second run from using the directory at the same time; it fails fast with
  :class:`LockedError` naming the holder. The kernel drops the lock when its process
  dies, so the lock of a killed run is taken over (and said so).
* **Disk.** ``max_to_keep`` steps are kept while a run trains (1 by default: what a resume
  needs). :meth:`Checkpointer.complete` marks a finished run in ``completed.json`` (its
  step and fingerprint) and deletes the step directories unless asked to keep them: a
  stage's outputs (votes, labels, results) are what a rerun reuses
  (:meth:`Checkpointer.completed`; :func:`read_completed` reads the record). orbax's
  "Waiting for previous save" warning is dropped (its time is in
  :attr:`Checkpointer.blocking_seconds`), so it does not break the progress bar.
* **Paths.** orbax globs inside the directory without escaping it, so under a path with
  ``[`` (``runs/run[1]``, a character class to glob) the glob matched nothing and no step
  restored: orbax is given a directory whose path holds ``[``, ``*`` or ``?`` through a
  symlink of a plain name.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import logging
import os
import pathlib
import re
import shutil
import tempfile
import time
from typing import Any, Mapping

import jax
import numpy as np
import orbax.checkpoint as ocp

from pate_jax import _checks

PyTree = Any
LOCK_FILE = ".lock"
FINGERPRINT_FILE = "fingerprint.json"
CORRUPT_DIR = "corrupt"  # not a step name: orbax ignores it
COMPLETED_FILE = "completed.json"
RESTART_FLAG = "--config.restart"  # the flag of a stage run by its own script
_GLOB_CHARS = re.compile(r"[*?\[]")

_log = logging.getLogger(__name__)


class _NoSaveWaitWarnings(logging.Filter):
  """Drops orbax's "Waiting for previous save to complete took …" warnings (absl logger):
  they break the progress bar, and the time is reported in ``blocking_seconds``."""

  def filter(self, record: logging.LogRecord) -> bool:
    return "Waiting for previous save" not in str(record.msg)


logging.getLogger("absl").addFilter(_NoSaveWaitWarnings())


class ResumeMismatchError(ValueError):
  """The checkpoints in a directory were written by a different run configuration."""


class LockedError(RuntimeError):
  """The directory is in use by another run (or another object of this process)."""


# ----------------------------------------------------------------------------- fingerprint


def _jsonable(value: Any) -> Any:
  if isinstance(value, (list, tuple)):
    return [_jsonable(v) for v in value]
  if isinstance(value, np.ndarray):
    return _jsonable(value.tolist())
  if isinstance(value, np.generic):
    return value.item()
  if value is None or isinstance(value, (bool, int, float, str)):
    return value
  raise ValueError(f"fingerprint: value {value!r} of type {type(value).__name__} is not a "
                   "number, string, bool, None, list or mapping")


def fingerprint(fields: Mapping[str, Any]) -> dict[str, Any]:
  """A flat, JSON-stable record of ``fields``: nested mappings become dotted keys
  (``{"model": {"name": "mlp"}}`` → ``{"model.name": "mlp"}``), tuples lists, numpy
  scalars Python numbers. Equal records mean the same run."""
  out = {}
  for key, value in fields.items():
    if hasattr(value, "to_dict"):  # ml_collections.ConfigDict
      value = value.to_dict()
    if isinstance(value, Mapping):
      out.update({f"{key}.{k}": v for k, v in fingerprint(value).items()})
    else:
      out[str(key)] = _jsonable(value)
  return out


def fingerprint_diff(stored: Mapping[str, Any], current: Mapping[str, Any],
                     stored_name: str = "checkpoint") -> list[str]:
  """``"field: old (checkpoint) -> new (now)"`` for every field that differs (values as
  JSON; a field one side lacks shows as ``<absent>``); ``stored_name`` names the old side."""
  show = lambda d, k: json.dumps(d[k]) if k in d else "<absent>"
  return [f"{k}: {show(stored, k)} ({stored_name}) -> {show(current, k)} (now)"
          for k in sorted(set(stored) | set(current)) if show(stored, k) != show(current, k)]


def restart_hint(restart_flag: str = RESTART_FLAG) -> str:
  """How to start over: ``restart_flag`` (``--config.restart``, or the nested stage's
  ``--config.teachers.restart``) set to True, or another workdir."""
  return (f"start over with restart=True ({restart_flag}=True), which deletes these "
          "checkpoints, or use another --workdir")


def check_restart_flag(restart_flag: Any) -> str:
  """``restart_flag`` if it names a config flag (``--config.restart``,
  ``--config.teachers.restart``), else ValueError."""
  if not isinstance(restart_flag, str) or not re.fullmatch(r"--config(\.\w+)+", restart_flag):
    raise ValueError("restart_flag must name a config flag such as '--config.restart' or "
                     f"'--config.teachers.restart'; got {restart_flag!r}")
  return restart_flag


def read_completed(directory: str | os.PathLike) -> dict[str, Any] | None:
  """The completion record :meth:`Checkpointer.complete` left in ``directory``
  (``{"step", "fingerprint", "outputs"}``), or None (none, or unreadable)."""
  try:
    record = json.loads((pathlib.Path(directory) / COMPLETED_FILE).read_text())
  except (OSError, ValueError):
    return None
  return record if isinstance(record, dict) else None


_as_fingerprint = fingerprint  # Checkpointer's argument of the same name shadows it


# ----------------------------------------------------------------------------- lock


def check_directory(directory: str | os.PathLike, name: str = "directory") -> pathlib.Path:
  """``directory`` as an absolute path, which is or can become a writable directory.

  Raises:
    NotADirectoryError: it, or a parent, is a file.
    PermissionError: it exists and is not writable.
  """
  path = pathlib.Path(directory).absolute()
  for p in (path, *path.parents):
    if p.exists():
      if not p.is_dir():
        raise NotADirectoryError(
            f"{name}: {p} is not a directory (a file is in the way of {path}); move or "
            "delete it, or use another --workdir")
      if p == path and not os.access(p, os.W_OK | os.X_OK):
        raise PermissionError(f"{name}: {p} is not writable")
      break
  return path


def _pid_alive(pid: int) -> bool:
  try:
    os.kill(pid, 0)
  except ProcessLookupError:
    return False
  except PermissionError:
    return True
  return True


class DirectoryLock:
  """One process at a time in ``directory``: an ``flock`` on ``<directory>/.lock``.

  The file holds the holder's pid, for the message a second run gets; the kernel
  releases the lock when the holder exits or is killed, so a stale lock (a pid that no
  longer runs) is taken over with a warning. Use as a context manager or call
  :meth:`acquire` / :meth:`release`.
  """

  def __init__(self, directory: str | os.PathLike, name: str = LOCK_FILE):
    self.directory = pathlib.Path(directory).absolute()
    self.path = self.directory / name
    self._fd: int | None = None

  @property
  def held(self) -> bool:
    return self._fd is not None

  def acquire(self) -> "DirectoryLock":
    """Takes the lock or raises :class:`LockedError` at once (never waits)."""
    if self._fd is not None:
      return self
    check_directory(self.directory)
    self.directory.mkdir(parents=True, exist_ok=True)
    fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
      fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as e:
      holder = os.pread(fd, 200, 0).decode(errors="replace").split()
      os.close(fd)
      if e.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
        raise
      pid = holder[0] if holder else "?"
      this = " (this process: close the other user of the directory first)" if (
          pid == str(os.getpid())) else ""
      raise LockedError(
          f"{self.directory} is in use by process {pid}{this} (lock file {self.path}); two "
          "runs in one directory would overwrite each other's checkpoints and results. Wait "
          "for it to end, or use another --workdir") from None
    previous = os.pread(fd, 200, 0).decode(errors="replace").split()
    if previous and previous[0] != str(os.getpid()):
      state = "" if not previous[0].isdigit() or _pid_alive(int(previous[0])) else \
          ", no longer running"
      _log.warning("%s: took over the stale lock of process %s%s", self.directory,
                   previous[0], state)
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
    self._fd = fd
    return self

  def release(self) -> None:
    if self._fd is None:
      return
    fd, self._fd = self._fd, None
    with contextlib.suppress(OSError):
      os.ftruncate(fd, 0)  # the file stays (deleting it would race with a new holder)
    fcntl.flock(fd, fcntl.LOCK_UN)
    os.close(fd)

  def __enter__(self) -> "DirectoryLock":
    return self.acquire()

  def __exit__(self, *exc) -> None:
    self.release()

  def __del__(self):
    try:
      self.release()
    except Exception:  # pylint: disable=broad-except  # at interpreter exit modules are gone
      pass


# ----------------------------------------------------------------------------- checkpoints


def _step_dirs(directory: pathlib.Path) -> list[int]:
  """Steps with a directory under ``directory`` (orbax's default names: the step)."""
  if not directory.is_dir():
    return []
  return sorted(int(p.name) for p in directory.iterdir() if p.is_dir() and p.name.isdigit())


def _orbax_path(directory: pathlib.Path) -> tuple[pathlib.Path, pathlib.Path | None]:
  """``directory`` as orbax may be given it, and the temporary folder to delete at close.

  orbax globs inside the checkpoint directory (``<step>/default/ocdbt.process_*`` when it
  merges a save, array metadata when it restores) with ``glob.glob`` on the joined path,
  unescaped: under ``run[1]`` (``[1]`` is a character class) the glob matches nothing, the
  save is left unmerged and no step restores. A directory whose path holds any glob
  character (``[``, ``*``, ``?``) is handed to orbax as a symlink of a plain name in a
  temporary folder (the files stay where they belong).
  """
  if not _GLOB_CHARS.search(str(directory)):
    return directory, None
  directory.mkdir(parents=True, exist_ok=True)
  folder = pathlib.Path(tempfile.mkdtemp(prefix="pate_jax_checkpoints_"))
  link = folder / "checkpoints"
  link.symlink_to(directory, target_is_directory=True)
  if _GLOB_CHARS.search(str(link)):
    link.unlink()
    folder.rmdir()
    raise ValueError(f"directory: {directory} holds a glob character ([, * or ?), which orbax "
                     f"cannot read back, and so does the temporary folder {folder.parent}; "
                     "use another --workdir (or TMPDIR)")
  return link, folder


def _first_line(error: BaseException) -> str:
  text = str(error).strip().splitlines()
  return f"{type(error).__name__}: {text[0][:300] if text else ''}"


class Checkpointer:
  """Saves a segment's state without stopping training; restores the newest on restart.

  A thin wrapper over ``orbax.checkpoint.CheckpointManager`` so entry scripts
  read as ``state, step = ckpt.restore_or(state)`` / ``ckpt.save(step, state)``.
  Saves are asynchronous: :meth:`save` returns once the arrays have been handed
  to orbax (device-to-host copy started) and the files are written by a
  background thread while training goes on; :meth:`wait` (or :meth:`close`)
  blocks until they are on disk. A save whose predecessor is still writing
  waits for it first. ``blocking_seconds`` adds up the time the caller spent
  inside :meth:`save` and :meth:`wait` — the checkpoints' cost to training.

  Construction checks, before orbax starts a thread: that ``directory`` is (or can
  be) a directory, takes its :class:`DirectoryLock`, and compares ``fingerprint``
  with the one stored there (see the module docstring). Use it as a context manager,
  or call :meth:`close`, so that the lock is released.

  Args:
    directory: where the step directories go.
    max_to_keep: steps kept on disk (>= 1; the older are deleted after a save). One is
      what a resume needs; two also survive a damaged newest step without starting over.
    fingerprint: the fields that determine the run (:func:`fingerprint`); ``None``
      skips the check (and stores nothing).
    restart: discard whatever the directory holds and start over.
    lock: take the directory lock (process 0 of a multi-process run only).
    restart_flag: the flag that sets ``restart`` for the script that runs this stage, named
      in the mismatch message (``--config.teachers.restart`` in a main job whose stage
      configs are nested; default ``--config.restart``).

  Raises:
    NotADirectoryError / PermissionError: ``directory`` cannot be used.
    LockedError: another run holds the directory.
    ResumeMismatchError: the stored checkpoints belong to another configuration.
  """

  def __init__(self, directory: str | os.PathLike, max_to_keep: int = 1, *,
               fingerprint: Mapping[str, Any] | None = None, restart: bool = False,
               lock: bool = True, restart_flag: str = RESTART_FLAG):
    self.directory = check_directory(directory, "checkpoint directory")
    _checks.positive_int(max_to_keep, "max_to_keep")
    _checks.boolean(restart, "restart")
    self.restart_flag = check_restart_flag(restart_flag)
    self._main = jax.process_index() == 0
    self._lock = DirectoryLock(self.directory) if lock and self._main else None
    self._manager = None
    self._alias_folder: pathlib.Path | None = None
    self.bad_steps: tuple[int, ...] = ()
    self.blocking_seconds = 0.0
    self.saves = 0
    if self._lock is not None:
      self._lock.acquire()
    try:
      self.fingerprint = None if fingerprint is None else _as_fingerprint(fingerprint)
      if restart:
        self._discard()
      elif self.fingerprint is not None:
        self._check_fingerprint()
      if self.fingerprint is not None and self._main:
        self._write_fingerprint()
      self._options = ocp.CheckpointManagerOptions(
          max_to_keep=max_to_keep, create=True, enable_async_checkpointing=True)
      self._orbax_directory, self._alias_folder = _orbax_path(self.directory)
      self._manager = self._new_manager()
    except BaseException:
      self._release()
      raise

  # ------------------------------------------------------------------ fingerprint

  @property
  def _fingerprint_path(self) -> pathlib.Path:
    return self.directory / FINGERPRINT_FILE

  def _check_fingerprint(self) -> None:
    steps = _step_dirs(self.directory)
    if not steps:
      return  # nothing to resume: any configuration may start here
    path = self._fingerprint_path
    if not path.is_file():
      raise ResumeMismatchError(
          f"{self.directory} holds checkpoints (steps {steps}) but no fingerprint "
          f"({FINGERPRINT_FILE}), so they cannot be checked against this run's "
          f"configuration; {restart_hint(self.restart_flag)}")
    try:
      stored = json.loads(path.read_text())
    except (OSError, ValueError) as e:
      raise ResumeMismatchError(
          f"{path} is unreadable ({_first_line(e)}); {restart_hint(self.restart_flag)}"
          ) from None
    diff = fingerprint_diff(stored, self.fingerprint)
    if diff:
      raise ResumeMismatchError(
          f"refusing to resume: the checkpoints in {self.directory} (steps {steps}) were "
          "written with another configuration, and continuing them would mix two runs "
          "(for PATE teachers: another partition of the private data). Differing fields: "
          + "; ".join(diff) + f". Rerun with the original values, or "
          f"{restart_hint(self.restart_flag)}.")

  def _write_fingerprint(self) -> None:
    path = self._fingerprint_path
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(self.fingerprint, indent=1, sort_keys=True) + "\n")
    tmp.replace(path)

  def _discard(self) -> None:
    """``restart=True``: removes everything in the directory except the lock."""
    if not self._main or not self.directory.is_dir():
      return
    removed = []
    for p in self.directory.iterdir():
      if p.name == LOCK_FILE:
        continue
      removed.append(p.name)
      shutil.rmtree(p) if p.is_dir() and not p.is_symlink() else p.unlink()
    if removed:
      _log.warning("restart=True: discarded %s from %s", sorted(removed), self.directory)

  # ------------------------------------------------------------------ orbax

  def _new_manager(self) -> ocp.CheckpointManager:
    return ocp.CheckpointManager(self._orbax_directory, options=self._options)

  def latest_step(self) -> int | None:
    return self._manager.latest_step()

  def save(self, step: int, state: PyTree) -> float:
    """Starts writing ``state`` at ``step`` (:meth:`wait` for it to be on disk).

    Returns:
      Seconds this call blocked the caller.

    Raises:
      OSError: the disk holding the directory has less room than the state's size.
    """
    need = sum(int(getattr(a, "nbytes", 0)) for a in jax.tree.leaves(state))
    free = shutil.disk_usage(self.directory).free
    if free < need:
      raise OSError(errno.ENOSPC, f"not enough disk space for a checkpoint in "
                    f"{self.directory}: the state needs ~{need / 2**20:.1f} MiB, "
                    f"{free / 2**20:.1f} MiB are free")
    if self._main:  # training goes on: the run is no longer complete
      (self.directory / COMPLETED_FILE).unlink(missing_ok=True)
    t0 = time.perf_counter()
    self._manager.save(step, args=ocp.args.StandardSave(state))
    spent = time.perf_counter() - t0
    self.blocking_seconds += spent
    self.saves += 1
    return spent

  def wait(self) -> float:
    """Blocks until every started save is on disk; returns the seconds waited."""
    t0 = time.perf_counter()
    self._manager.wait_until_finished()
    spent = time.perf_counter() - t0
    self.blocking_seconds += spent
    return spent

  def complete(self, step: int, *, keep: bool = False,
               outputs: Mapping[str, Any] | None = None) -> int:
    """Marks the run finished at ``step`` and, unless ``keep``, deletes its checkpoints.

    Waits for pending saves, writes ``completed.json`` (``step``, the fingerprint and
    ``outputs``: what else the stage's outputs depend on) and removes every step
    directory (and ``corrupt/``). Call it once the stage's outputs are on disk.

    Returns:
      Bytes deleted.
    """
    self.wait()
    if not self._main:
      return 0
    record = {"step": int(step), "fingerprint": self.fingerprint,
              "outputs": None if outputs is None else _as_fingerprint(outputs)}
    path = self.directory / COMPLETED_FILE
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(record, indent=1, sort_keys=True) + "\n")
    tmp.replace(path)
    if keep:
      return 0
    freed = 0
    for name in [str(s) for s in _step_dirs(self.directory)] + [CORRUPT_DIR]:
      d = self.directory / name
      if d.is_dir():
        freed += sum(f.stat().st_size for f in d.rglob("*") if f.is_file())
        shutil.rmtree(d)
    # orbax caches the steps it saw: let it forget the deleted ones.
    self._manager.close()
    self._manager = self._new_manager()
    return freed

  def completed(self, outputs: Mapping[str, Any] | None = None) -> int | None:
    """The step of a finished run with this fingerprint and ``outputs``
    (:meth:`complete`), else ``None``."""
    record = read_completed(self.directory)
    if record is None:
      return None
    same = (record.get("fingerprint") == self.fingerprint and record.get("outputs") ==
            (None if outputs is None else _as_fingerprint(outputs)))
    return int(record["step"]) if same and "step" in record else None

  def restore_or(self, state: PyTree) -> tuple[PyTree, int]:
    """The newest state that restores (shaped/sharded like ``state``) and its step, else
    ``(state, 0)``.

    Steps that do not restore are moved to ``<directory>/corrupt/`` (listed in
    :attr:`bad_steps`) and named in a warning, so that training can write them again.
    """
    abstract = jax.tree.map(ocp.utils.to_shape_dtype_struct, state)
    bad = []
    try:
      for step in sorted(_step_dirs(self.directory), reverse=True):
        try:
          restored = self._manager.restore(step, args=ocp.args.StandardRestore(abstract))
        except Exception as e:  # pylint: disable=broad-except  # any damage: try older
          bad.append(step)
          self._quarantine(step, e)
          # A failed restore can leave the manager's view of the items wrong: start afresh.
          self._manager.close()
          self._manager = self._new_manager()
          continue
        if bad:
          _log.warning("%s: resuming from step %d, the newest checkpoint that restores",
                       self.directory, step)
        return restored, step
      if bad:
        _log.warning("%s: no checkpoint restores; starting from step 0", self.directory)
      return state, 0
    finally:
      self.bad_steps = tuple(bad)

  def _quarantine(self, step: int, error: BaseException) -> None:
    path = self.directory / str(step)
    if self._main:
      dest = self.directory / CORRUPT_DIR / f"{step}-{time.strftime('%Y%m%dT%H%M%S')}"
      dest.parent.mkdir(exist_ok=True)
      path.rename(dest)
      where = f"moved to {dest}"
    else:
      where = "left for process 0 to move"
    _log.warning("checkpoint step %d at %s does not restore (%s); %s", step, path,
                 _first_line(error), where)

  # ------------------------------------------------------------------ lifetime

  def _release(self) -> None:
    folder, self._alias_folder = self._alias_folder, None
    if folder is not None:  # the symlink only: the checkpoints stay
      with contextlib.suppress(OSError):
        (folder / "checkpoints").unlink()
        folder.rmdir()
    if self._lock is not None:
      self._lock.release()

  def close(self) -> None:
    """Waits for pending saves, then releases the manager and the lock (idempotent)."""
    manager, self._manager = self._manager, None
    try:
      if manager is not None:
        t0 = time.perf_counter()
        manager.wait_until_finished()
        self.blocking_seconds += time.perf_counter() - t0
        manager.close()
    finally:
      self._release()

  def __enter__(self) -> "Checkpointer":
    return self

  def __exit__(self, *exc) -> None:
    self.close()

