"""Building an ensemble from a model name, and training it in checkpointed segments.

:func:`build_ensemble` turns explicit arguments (network name, AdamW settings,
strategy) into an :class:`pate_jax.teachers.Ensemble`; :func:`train_with_checkpoints`
runs its training segments through the one training loop
(:func:`pate_jax.checkpoint.run_segments`), saving the state after each.
"""

from __future__ import annotations

from typing import Any, Callable

import jax
import optax

from pate_jax import _checks, checkpoint, io, memory, models
from pate_jax.teachers._ensemble import Ensemble, default_strategy
from pate_jax.teachers._sharding import PyTree, teacher_mesh
from pate_jax.teachers._single import TeacherFns


def build_ensemble(model_name: str, num_classes: int, *, learning_rate: float,
                   weight_decay: float, model_kwargs: dict[str, Any] | None = None,
                   batch_size: int | None = None, max_shift: int = 0, strategy: str = "auto",
                   chunk_size: int | None = None, memory_fraction: float = 0.6,
                   compute_dtype: str = "float32", unroll_segments: bool = False) -> Ensemble:
  """An ensemble of ``model_name`` teachers (:func:`pate_jax.models.get_model`) trained
  with AdamW.

  Args:
    model_name: the teachers' network, by name.
    num_classes: classes of the task.
    learning_rate: AdamW's step size (> 0).
    weight_decay: AdamW's decoupled weight decay (>= 0).
    model_kwargs: keyword arguments of the network.
    batch_size: examples per step (``None``: the whole shard every step).
    max_shift: random-translation augmentation, pixels.
    strategy: ``"vmap"``, ``"chunked"``, ``"loop"`` or ``"auto"``
      (:func:`default_strategy`); the sharded ones use :func:`teacher_mesh`.
    chunk_size: see :class:`Ensemble` (``None``: planned).
    memory_fraction: see :class:`Ensemble`.
    compute_dtype: the networks' compute dtype.
    unroll_segments: compile each training segment unrolled (:class:`TeacherFns`): CNNs on
      a CPU train several times faster; the same steps and results.
  """
  _checks.positive(learning_rate, "learning_rate")
  if not _checks.scalar(weight_decay, "weight_decay") >= 0:
    raise ValueError(f"weight_decay must be >= 0; got {weight_decay}")
  model = models.get_model(model_name, num_classes, compute_dtype=compute_dtype,
                           **(model_kwargs or {}))
  tx = optax.adamw(learning_rate, weight_decay=weight_decay)
  fns = TeacherFns(model, tx, batch_size, max_shift, unroll_segments)
  strategy = default_strategy() if strategy == "auto" else strategy
  mesh = teacher_mesh() if strategy != "loop" else None
  return Ensemble(fns, strategy, chunk_size, mesh, memory_fraction)


def train_with_checkpoints(ensemble: Ensemble, state: PyTree, keys: jax.Array,
                           images: jax.Array, labels: jax.Array, ckpt: Any, *, step: int,
                           num_steps: int, checkpoint_every: int, num_teachers: int,
                           plan: memory.ChunkPlan | None = None,
                           after_save: Callable[[int], None] | None = None,
                           final_keys: tuple[str, ...] = ()
                           ) -> tuple[PyTree, float | None]:
  """Trains from ``step`` to ``num_steps`` in segments of ``checkpoint_every`` steps,
  saving ``state`` to ``ckpt`` (a :class:`pate_jax.checkpoint.Checkpointer`, asynchronous)
  after each, with a progress bar (mean loss of the first ``num_teachers``, the padding
  left out). Returns the state (ready) and the last segment's mean loss over the first
  ``num_teachers`` (a private value): kept beside the checkpoints with each (their
  history), so a run killed after its last save and rerun reports it too; ``None`` where
  no segment has a record (checkpoints of an older version). ``after_save(step)`` is
  called after each save is started. ``final_keys``: the entries of the state saved at
  ``num_steps`` (``("params",)``: the trained teachers without the optimizer's state;
  ``()``: all), as :func:`pate_jax.checkpoint.run_segments`."""
  bar = io.progress(total=num_steps, initial=step, desc="training steps", unit="step")

  def segment(state, start, n):
    return ensemble.train(state, keys, images, labels, start, n, plan=plan)

  def record(state, step, loss):
    del state, step
    return {"mean_loss": float(loss[:num_teachers].mean())}

  def progress(step, n, loss, entry):
    del loss
    bar.update(n)
    # The teachers' loss on their private data: a private value, said so on the bar.
    bar.set_postfix_str(f"private: mean loss {entry['mean_loss']:.3f}")
    if after_save is not None:
      after_save(step)

  try:
    out = checkpoint.run_segments(segment, state, start=step, total=num_steps,
                                  segment_steps=checkpoint_every, ckpt=ckpt, record=record,
                                  after_segment=progress, final_keys=final_keys)
  finally:
    bar.close()
  last = out.history[-1] if out.history else {}
  return out.state, last.get("mean_loss") if last.get("step") == num_steps else None
