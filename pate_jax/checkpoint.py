"""Orbax checkpoints of a pytree train state, keyed by training step."""

from __future__ import annotations

import os
import pathlib
import time
from typing import Any

import jax
import orbax.checkpoint as ocp

PyTree = Any


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
  """

  def __init__(self, directory: str | os.PathLike, max_to_keep: int = 2):
    self.directory = pathlib.Path(directory).absolute()
    self._manager = ocp.CheckpointManager(
        self.directory, options=ocp.CheckpointManagerOptions(
            max_to_keep=max_to_keep, create=True, enable_async_checkpointing=True))
    self.blocking_seconds = 0.0
    self.saves = 0

  def latest_step(self) -> int | None:
    return self._manager.latest_step()

  def save(self, step: int, state: PyTree) -> float:
    """Starts writing ``state`` at ``step`` (:meth:`wait` for it to be on disk).

    Returns:
      Seconds this call blocked the caller.
    """
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

  def restore_or(self, state: PyTree) -> tuple[PyTree, int]:
    """The newest saved state (shaped/sharded like ``state``) and its step, else ``(state, 0)``."""
    step = self._manager.latest_step()
    if step is None:
      return state, 0
    abstract = jax.tree.map(ocp.utils.to_shape_dtype_struct, state)
    return self._manager.restore(step, args=ocp.args.StandardRestore(abstract)), step

  def close(self) -> None:
    """Waits for pending saves, then releases the manager."""
    self.wait()
    self._manager.close()
