"""Orbax checkpoints of a pytree train state, keyed by step: :class:`Checkpointer`.

Owns saving without stopping training, restoring the newest step that restores (a
damaged one is moved to :data:`CORRUPT_DIR`), the fingerprint check and the restart
on construction, marking a finished run complete, and the path handed to orbax (a
symlink where the directory's path holds a glob character). The module docstring of
:mod:`pate_jax.checkpoint` describes each.
"""

from __future__ import annotations

import contextlib
import errno
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
import orbax.checkpoint as ocp

from pate_jax import _checks
from pate_jax import io
from pate_jax.checkpoint._fingerprint import (
    COMPLETED_FILE,
    FINGERPRINT_FILE,
    ResumeMismatchError,
    _as_fingerprint,
    check_restart_hint,
    fingerprint_diff,
    how_to_restart,
    read_completed,
)
from pate_jax.checkpoint._lock import LOCK_FILE, DirectoryLock, check_directory

PyTree = Any
CORRUPT_DIR = "corrupt"  # not a step name: orbax ignores it
_GLOB_CHARS = re.compile(r"[*?\[]")

_log = logging.getLogger("pate_jax.checkpoint")  # the package's logger


class _NoSaveWaitWarnings(logging.Filter):
  """Drops orbax's "Waiting for previous save to complete took …" warnings (absl logger):
  they break the progress bar, and the time is reported in ``blocking_seconds``."""

  def filter(self, record: logging.LogRecord) -> bool:
    return "Waiting for previous save" not in str(record.msg)


logging.getLogger("absl").addFilter(_NoSaveWaitWarnings())


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


# The per-segment records of a loop (:meth:`Checkpointer.save_history`).
HISTORY_FILE = "history.json"


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
    restart_hint: how the caller's user asks for ``restart=True``, named in a refusal (a
      script's ``--config.restart=True``; None: only ``restart=True`` is named).
    private: the saved state is private (parameters trained on the private data, or on
      labels that are no release): every file orbax writes here is made owner-only (0600,
      its directories 0700) by orbax's thread as its save is finalised, before the step
      is renamed into place (the commit marker orbax writes after it, a fixed sentence,
      at :meth:`save`, :meth:`wait` or :meth:`close`), and those an earlier run left
      wider when the directory is opened, so that a copy taken out of the directory (``cp -r`` keeps
      modes) stays its owner's alone. False (a released student's): orbax's modes, inside
      the owner-only directory. The caller knows which (a stage; the core cannot tell).

  Raises:
    NotADirectoryError / PermissionError: ``directory`` cannot be used.
    LockedError: another run holds the directory.
    ResumeMismatchError: the stored checkpoints belong to another configuration.
  """

  def __init__(self, directory: str | os.PathLike, max_to_keep: int = 1, *,
               fingerprint: Mapping[str, Any] | None = None, restart: bool = False,
               lock: bool = True, restart_hint: str | None = None, private: bool = False):
    self.directory = check_directory(directory, "checkpoint directory")
    _checks.positive_int(max_to_keep, "max_to_keep")
    _checks.boolean(restart, "restart")
    self.private = _checks.boolean(private, "private")
    self.restart_hint = check_restart_hint(restart_hint)
    self._main = jax.process_index() == 0
    self._lock = DirectoryLock(self.directory) if lock and self._main else None
    self._manager = None
    self._alias_folder: pathlib.Path | None = None
    self.bad_steps: tuple[int, ...] = ()
    self.blocking_seconds = 0.0
    self.saves = 0
    if self._main:  # orbax writes its files world-readable: no one else may enter
      io.private_directory(self.directory)
      for name in (FINGERPRINT_FILE, COMPLETED_FILE, HISTORY_FILE):  # an older version's,
        io.narrow(self.directory / name)  # 0644: narrowed first, even if the resume is refused
      self._narrow()  # an earlier run's steps, saved before it was killed or by an older version
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
      # A private save is narrowed by orbax's background thread once its files are
      # written, before the step is renamed into place, not at the caller's next save.
      self._options = ocp.CheckpointManagerOptions(
          max_to_keep=max_to_keep, create=True, enable_async_checkpointing=True,
          async_options=(ocp.AsyncOptions(post_finalization_callback=self._narrow)
                         if self.private else None))
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
          f"configuration; {how_to_restart(self.restart_hint)}")
    try:
      stored = json.loads(path.read_text())
    except (OSError, ValueError) as e:
      raise ResumeMismatchError(
          f"{path} is unreadable ({_first_line(e)}); {how_to_restart(self.restart_hint)}"
          ) from None
    diff = fingerprint_diff(stored, self.fingerprint)
    if diff:
      raise ResumeMismatchError(
          f"refusing to resume: the checkpoints in {self.directory} (steps {steps}) were "
          "written with another configuration, and continuing them would mix two runs "
          "(for PATE teachers: another partition of the private data). Differing fields: "
          + "; ".join(diff) + f". Rerun with the original values, or "
          f"{how_to_restart(self.restart_hint)}.")

  def _write_fingerprint(self) -> None:
    # Owner-only, as every record here: the fingerprint holds the training rows' SHA-256
    # (a test of any guess at a private row), the history the segments' accuracies.
    io.write_text(self._fingerprint_path,
                  json.dumps(self.fingerprint, indent=1, sort_keys=True) + "\n", private=True)

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
    self._narrow()  # orbax waited for the save before this one: it is complete
    return spent

  def _narrow(self) -> None:
    """``private``: everything in the directory owner-only (:func:`pate_jax.io.narrow_tree`),
    by process 0 (orbax finalises a save there, after every process has written)."""
    if self.private and self._main:
      io.narrow_tree(self.directory)

  # ------------------------------------------------------------------ history

  def restore_history(self, step: int, key: str = "step") -> list[dict]:
    """The per-segment records written with the checkpoints up to ``step`` (the step
    :meth:`restore_or` returned), so that a resumed or rerun loop reports every segment,
    not only those it trains; ``[]`` without a record (an older run, or ``restart``)."""
    path = self.directory / HISTORY_FILE
    if not path.exists():
      return []
    try:
      entries = json.loads(path.read_text())
    except (OSError, ValueError):
      return []
    return [e for e in entries if isinstance(e, dict) and e.get(key, step + 1) <= step]

  def save_history(self, entries: list[dict]) -> None:
    """Writes the loop's per-segment records (JSON values) beside its checkpoints."""
    if not self._main:
      return
    io.write_text(self.directory / HISTORY_FILE, json.dumps(entries) + "\n", private=True)

  def wait(self) -> float:
    """Blocks until every started save is on disk; returns the seconds waited."""
    t0 = time.perf_counter()
    self._manager.wait_until_finished()
    spent = time.perf_counter() - t0
    self.blocking_seconds += spent
    self._narrow()
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
    io.write_text(self.directory / COMPLETED_FILE,
                  json.dumps(record, indent=1, sort_keys=True) + "\n", private=True)
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

  def _saved_keys(self, step: int) -> frozenset[str] | None:
    """The top-level keys of the dict saved at ``step`` (None: not a dict, or unreadable)."""
    try:  # read from the files: a manager that did not write the step has no handler yet
      path = pathlib.Path(self._orbax_directory) / str(step) / "default"
      return frozenset(ocp.StandardCheckpointHandler().metadata(path).keys())
    except Exception:  # pylint: disable=broad-except  # damaged: the restore says why
      return None

  def restore_or(self, state: PyTree, *, final_step: int | None = None,
                 final_keys: tuple[str, ...] = ()) -> tuple[PyTree, int]:
    """The newest state that restores (shaped/sharded like ``state``) and its step, else
    ``(state, 0)``.

    A checkpoint holding only ``final_keys`` of a dict ``state`` (a finished run's last
    save, :func:`run_segments`'s ``final_keys``) restores at ``final_step``, the other
    entries taken from ``state``; at another step it cannot go on training.

    Steps that do not restore are moved to ``<directory>/corrupt/`` (listed in
    :attr:`bad_steps`) and named in a warning, so that training can write them again.

    Raises:
      ResumeMismatchError: the newest checkpoint holds only ``final_keys`` (no optimizer
        state) at a step other than ``final_step``.
    """
    abstract = jax.tree.map(ocp.utils.to_shape_dtype_struct, state)
    light = frozenset(final_keys)
    bad = []
    try:
      for step in sorted(_step_dirs(self.directory), reverse=True):
        template = abstract
        if light and light != frozenset(abstract) and self._saved_keys(step) == light:
          if step != final_step:
            raise ResumeMismatchError(
                f"{self.directory}/{step} holds only {sorted(light)} of a run that ended "
                f"at step {step} (its last save keeps no optimizer state): ask for {step} "
                f"steps, or {how_to_restart(self.restart_hint)}")
          template = {k: abstract[k] for k in final_keys}
        try:
          restored = self._manager.restore(step, args=ocp.args.StandardRestore(template))
          if template is not abstract:
            restored = {**state, **restored}
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
        self._drop_older(step)
        return restored, step
      if bad:
        _log.warning("%s: no checkpoint restores; starting from step 0", self.directory)
      return state, 0
    finally:
      self.bad_steps = tuple(bad)

  def _drop_older(self, step: int) -> None:
    """Deletes the step directories below the restored ``step`` that ``max_to_keep`` would
    not keep: what orbax's next save deletes, done now, since a run killed while orbax was
    deleting one leaves it half-deleted, and a resumed run with nothing left to train
    saves no more."""
    if not self._main:
      return
    older = [s for s in _step_dirs(self.directory) if s < step]
    dropped = older[:max(len(older) - (self._options.max_to_keep - 1), 0)]
    for s in dropped:
      shutil.rmtree(self.directory / str(s), ignore_errors=True)
    if dropped:  # The manager listed them when it was made: a fresh one, as after a quarantine.
      self._manager.close()
      self._manager = self._new_manager()

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
        self._narrow()
    finally:
      self._release()

  def __enter__(self) -> "Checkpointer":
    return self

  def __exit__(self, *exc) -> None:
    self.close()
