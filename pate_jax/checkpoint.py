"""Orbax checkpoints of a pytree train state, keyed by training step."""

from __future__ import annotations

import os
import pathlib
from typing import Any

import jax
import orbax.checkpoint as ocp

PyTree = Any


class Checkpointer:
  """Saves every segment's state; restores the newest one on restart.

  A thin wrapper over ``orbax.checkpoint.CheckpointManager`` so entry scripts
  read as ``state, step = ckpt.restore_or(state)`` / ``ckpt.save(step, state)``.
  """

  def __init__(self, directory: str | os.PathLike, max_to_keep: int = 2):
    self.directory = pathlib.Path(directory).absolute()
    self._manager = ocp.CheckpointManager(
        self.directory, options=ocp.CheckpointManagerOptions(max_to_keep=max_to_keep,
                                                             create=True))

  def latest_step(self) -> int | None:
    return self._manager.latest_step()

  def save(self, step: int, state: PyTree) -> None:
    """Writes ``state`` at ``step`` and blocks until it is on disk."""
    self._manager.save(step, args=ocp.args.StandardSave(state))
    self._manager.wait_until_finished()

  def restore_or(self, state: PyTree) -> tuple[PyTree, int]:
    """The newest saved state (shaped/sharded like ``state``) and its step, else ``(state, 0)``."""
    step = self._manager.latest_step()
    if step is None:
      return state, 0
    abstract = jax.tree.map(ocp.utils.to_shape_dtype_struct, state)
    return self._manager.restore(step, args=ocp.args.StandardRestore(abstract)), step

  def close(self) -> None:
    self._manager.close()
