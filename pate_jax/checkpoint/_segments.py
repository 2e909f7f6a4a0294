"""The one training loop: compiled segments of steps, a checkpoint and a record after each.

Every trained thing in pate_jax (the teacher ensemble, the students, the KD-GAN) trains
the same way: a jitted segment of ``n`` steps (``lax.scan`` inside, randomness a function
of the step number, so results do not depend on how training is cut), then a checkpoint,
then what the caller records of that segment (held-out accuracy, mean losses), a log line
or a progress bar. :func:`run_segments` is that loop. Restoring the state is the caller's
(:meth:`Checkpointer.restore_or`, which it checks against its own step count); the loop
restores the per-segment records written beside the checkpoints
(:meth:`Checkpointer.restore_history`), so a resumed or rerun fit reports every segment.

The loop starts from :func:`committed_state`: a state orbax restores is committed to its
devices, a fresh one (an initialisation's output) is not, and ``jit`` keys its programs by
that as by shapes and dtypes, so a resumed run would otherwise compile its segment (and
what its records evaluate) again. A caller compiling ahead lowers for the committed state.
"""

from __future__ import annotations

import time
from typing import Any, Callable, NamedTuple

import jax

from pate_jax import _checks
from pate_jax.checkpoint._checkpointer import Checkpointer

PyTree = Any


class Segments(NamedTuple):
  """What :func:`run_segments` returns."""
  state: PyTree          # the final state (ready: blocked on)
  history: list[dict]    # the records of every segment up to the final step
  resumed_from: int      # the step training started from in this call
  seconds: float         # wall seconds of this call's segments
  metrics: Any           # the last segment's metrics (None if no step was left)


def segment_lengths(total: int, segment_steps: int, start: int = 0) -> set[int]:
  """The lengths of the segments :func:`run_segments` runs from ``start`` to ``total``
  (the programs a caller compiles ahead: at most two, the full length and the remainder)."""
  start = _checks.positive_int(start, "start", minimum=0)
  total = _checks.positive_int(total, "total", minimum=0)
  segment_steps = _checks.positive_int(segment_steps, "segment_steps")
  _check_start(start, total)
  return {min(segment_steps, total - s) for s in range(start, total, segment_steps)}


def committed_state(state: PyTree) -> PyTree:
  """``state`` with every ``jax.Array`` leaf committed to the devices that hold it
  (``jax.device_put`` to its own sharding: no copy; other leaves, and arrays committed
  already, as given).

  ``jit`` keys its programs by the placement of their arguments too, and tells an
  uncommitted array (the output of a program whose inputs were all uncommitted: a fresh
  initialisation) from a committed one on the same device (a state restored by orbax):
  :func:`run_segments` starts from this, so that a fresh and a resumed run call the same
  programs, and so does a caller that compiles them ahead from a fresh state.
  """
  leaves, treedef = jax.tree.flatten(state)
  loose = [i for i, a in enumerate(leaves) if isinstance(a, jax.Array) and not a.committed]
  if loose:
    placed = jax.device_put([leaves[i] for i in loose], [leaves[i].sharding for i in loose])
    for i, a in zip(loose, placed, strict=True):
      leaves[i] = a
  return jax.tree.unflatten(treedef, leaves)


def _check_start(start: int, total: int) -> None:
  if start > total:
    raise ValueError(f"start: the state is at step {start}, past the last step {total}")


def run_segments(segment: Callable[[PyTree, int, int], tuple[PyTree, Any]], state: PyTree, *,
                 start: int, total: int, segment_steps: int, ckpt: Checkpointer | None = None,
                 record: Callable[[PyTree, int, Any], dict] | None = None,
                 step_key: str = "step",
                 after_segment: Callable[[int, int, Any, dict | None], None] | None = None,
                 final_keys: tuple[str, ...] = ()) -> Segments:
  """Trains from ``start`` to ``total`` in segments of at most ``segment_steps`` steps.

  Args:
    segment: ``segment(state, step, n) -> (state, metrics)``: steps ``step .. step+n-1``.
    state: the state at ``start`` (restored by the caller, or fresh at 0); the loop
      runs from :func:`committed_state` of it.
    start: the step ``state`` is at.
    total: the last step.
    segment_steps: steps per segment (and per checkpoint and record).
    ckpt: saves the state after each segment (asynchronously) and keeps the records
      beside it; ``None``: neither.
    record: ``record(state, step, metrics) -> dict`` of JSON values, the segment's entry
      in the history (``step_key`` is set to the step); ``None``: no history.
    step_key: the name of the step in a record (``"round"`` for the KD-GAN).
    after_segment: ``after_segment(step, n, metrics, entry)`` after each segment's save
      (a log line, a progress bar, a test's interruption).
    final_keys: after the last segment, save only these entries of a dict ``state`` (a
      run whose checkpoints are deleted once its outputs are written needs, at its last
      step, the trained parameters and not the optimizer's state: a third of the
      device-to-host copy with Adam); ``()``: the whole state. Restore it with
      :meth:`Checkpointer.restore_or`'s ``final_step`` and ``final_keys``.
  """
  start = _checks.positive_int(start, "start", minimum=0)
  total = _checks.positive_int(total, "total", minimum=0)
  segment_steps = _checks.positive_int(segment_steps, "segment_steps")
  _check_start(start, total)
  history = ckpt.restore_history(start, step_key) if ckpt is not None and record else []
  state = committed_state(state)
  step, metrics, t0 = start, None, time.perf_counter()
  while step < total:
    n = min(segment_steps, total - step)
    state, metrics = segment(state, step, n)
    step += n
    entry = None
    # The record is written before the checkpoint is started: a checkpoint is on disk only
    # with its record (a record ahead of the checkpoints is dropped on restore), so a run
    # killed between the two resumes with every segment's record.
    if record is not None:
      entry = {step_key: step, **record(state, step, metrics)}
      entry[step_key] = step  # first, and not a record's own entry of that name
      history.append(entry)
      if ckpt is not None:
        ckpt.save_history(history)
    if ckpt is not None:  # asynchronous: training goes on while it is written
      light = final_keys and step == total
      ckpt.save(step, {k: state[k] for k in final_keys} if light else state)
    if after_segment is not None:
      after_segment(step, n, metrics, entry)
  jax.block_until_ready(state)
  return Segments(state, history, start, time.perf_counter() - t0, metrics)
