"""One teacher: pure functions of its own state, with no teacher axis.

:class:`TeacherFns` holds the network and the optimiser and gives ``init``,
``train_step``, ``train_segment`` (``lax.scan`` over steps: step ``s`` draws its
minibatch and augmentation from ``fold_in(key, s)``) and ``predict``; the
ensemble strategies of :mod:`pate_jax.teachers._ensemble` apply them across a
leading teacher axis. :func:`pate_jax.augment.random_shift` is the translation augmentation.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp
import optax

from pate_jax import _checks
from pate_jax.augment import random_shift

PyTree = Any


@dataclasses.dataclass(frozen=True)
class TeacherFns:
  """Pure single-teacher functions (no teacher axis)."""
  model: nn.Module
  tx: optax.GradientTransformation
  batch_size: int | None  # None: full batch (the whole shard every step).
  max_shift: int = 0       # random-translation augmentation, pixels.
  # Unroll each segment's steps (no loop in the compiled segment). XLA on a CPU runs
  # convolutions inside a loop several times slower (a CNN step on 240 images: 776 ms in
  # ``lax.scan``, 87 ms unrolled); matmuls are not affected. Compile time grows with the steps.
  unroll_segments: bool = False

  def __post_init__(self):
    if self.batch_size is not None:
      _checks.positive_int(self.batch_size, "batch_size")
    _checks.positive_int(self.max_shift, "max_shift", minimum=0)

  def init(self, key: jax.Array, sample: jax.Array) -> PyTree:
    params = self.model.init(key, sample[:1])
    return {"params": params, "opt_state": self.tx.init(params)}

  def loss(self, params: PyTree, images: jax.Array, labels: jax.Array) -> jax.Array:
    """Mean softmax cross-entropy against one-hot labels: the values of
    ``optax.softmax_cross_entropy_with_integer_labels`` without its gather, whose gradient
    is a scatter-add: with ``pool="views"`` the paper CNN's training step has no scatter
    for ``--xla_gpu_deterministic_ops`` to replace by its deterministic form."""
    logits = self.model.apply(params, images)
    one_hot = jax.nn.one_hot(labels, logits.shape[-1], dtype=logits.dtype)
    return optax.softmax_cross_entropy(logits, one_hot).mean()

  def train_step(self, state: PyTree, key: jax.Array, images: jax.Array, labels: jax.Array,
                 step: jax.Array) -> tuple[PyTree, jax.Array]:
    step_key = jax.random.fold_in(key, step)
    batch_key, aug_key = jax.random.split(step_key)
    if self.batch_size is not None and self.batch_size < images.shape[0]:
      idx = jax.random.randint(batch_key, (self.batch_size,), 0, images.shape[0])
      images, labels = images[idx], labels[idx]
    images = random_shift(aug_key, images, self.max_shift)
    loss, grads = jax.value_and_grad(self.loss)(state["params"], images, labels)
    updates, opt_state = self.tx.update(grads, state["opt_state"], state["params"])
    return {"params": optax.apply_updates(state["params"], updates),
            "opt_state": opt_state}, loss

  def train_segment(self, state: PyTree, key: jax.Array, images: jax.Array,
                    labels: jax.Array, start: jax.Array, num_steps: int
                    ) -> tuple[PyTree, jax.Array]:
    """``num_steps`` steps from global step ``start``; returns state and mean loss."""
    def body(s, step):
      return self.train_step(s, key, images, labels, step)
    state, losses = jax.lax.scan(body, state, start + jnp.arange(num_steps),
                                 unroll=self.unroll_segments)
    return state, losses.mean()

  def predict(self, params: PyTree, images: jax.Array) -> jax.Array:
    return jnp.argmax(self.model.apply(params, images), axis=-1).astype(jnp.int32)
