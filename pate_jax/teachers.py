"""The teacher ensemble: T networks trained at once on disjoint shards.

One teacher is described by pure functions of its own state (``init``,
``train_segment``, ``predict``); an ensemble applies them across a leading
teacher axis with one of three strategies that give the same result:

* ``"vmap"``: one ``jit(vmap(...))`` over all teachers, the teacher axis
  sharded across local devices (``Mesh`` + ``NamedSharding``). The accelerator
  default: 250 small networks become one large batched computation.
* ``"chunked"``: ``jax.lax.map(..., batch_size=chunk_size)`` — teachers are
  vmapped within chunks and chunks run sequentially, bounding activation memory.
* ``"loop"``: a Python loop over teachers calling one jitted single-teacher
  function, compiled once whatever T is. On a small CPU XLA's batched matmuls
  gain nothing from vmap, so this is the CPU default (see ``bench_teachers``).

A training *segment* is ``lax.scan`` over ``num_steps`` optimisation steps,
so there is no host round trip inside it; step ``s`` of teacher ``t`` draws its
minibatch and augmentation from ``fold_in(key_t, s)``, so results do not depend
on how training is cut into segments (checkpoint/resume is bit-identical) nor
on the strategy.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any, Callable

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import optax
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

STRATEGIES = ("vmap", "chunked", "loop")
TEACHER_AXIS = "teachers"
PyTree = Any


def default_strategy(backend: str | None = None) -> str:
  """``"vmap"`` on GPU/TPU, ``"loop"`` on CPU (measured: experiments/bench_teachers.py)."""
  backend = backend or jax.default_backend()
  return "loop" if backend == "cpu" else "vmap"


def random_shift(key: jax.Array, images: jax.Array, max_shift: int) -> jax.Array:
  """Translates each image ``[B, H, W, C]`` by up to ``max_shift`` pixels (zero fill)."""
  if max_shift == 0:
    return images
  _, h, w, _ = images.shape
  padded = jnp.pad(images, ((0, 0), (max_shift, max_shift), (max_shift, max_shift), (0, 0)))
  offsets = jax.random.randint(key, (images.shape[0], 2), 0, 2 * max_shift + 1)

  def crop(img, off):
    return jax.lax.dynamic_slice(img, (off[0], off[1], 0), (h, w, img.shape[-1]))

  return jax.vmap(crop)(padded, offsets)


@dataclasses.dataclass(frozen=True)
class TeacherFns:
  """Pure single-teacher functions (no teacher axis)."""
  model: nn.Module
  tx: optax.GradientTransformation
  batch_size: int | None  # None: full batch (the whole shard every step).
  max_shift: int = 0       # random-translation augmentation, pixels.

  def init(self, key: jax.Array, sample: jax.Array) -> PyTree:
    params = self.model.init(key, sample[:1])
    return {"params": params, "opt_state": self.tx.init(params)}

  def loss(self, params: PyTree, images: jax.Array, labels: jax.Array) -> jax.Array:
    logits = self.model.apply(params, images)
    return optax.softmax_cross_entropy_with_integer_labels(logits, labels).mean()

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
    state, losses = jax.lax.scan(body, state, start + jnp.arange(num_steps))
    return state, losses.mean()

  def predict(self, params: PyTree, images: jax.Array) -> jax.Array:
    return jnp.argmax(self.model.apply(params, images), axis=-1).astype(jnp.int32)


def teacher_mesh(devices: list | None = None) -> Mesh:
  """A 1-D mesh over all local devices whose axis carries the teachers."""
  devices = jax.local_devices() if devices is None else devices
  return Mesh(np.asarray(devices), (TEACHER_AXIS,))


def _pad_teachers(tree: PyTree, multiple: int) -> tuple[PyTree, int]:
  """Pads the leading (teacher) axis to a multiple by repeating teacher 0."""
  t = jax.tree.leaves(tree)[0].shape[0]
  pad = (-t) % multiple
  if pad == 0:
    return tree, t
  return jax.tree.map(lambda a: jnp.concatenate([a, jnp.repeat(a[:1], pad, axis=0)]),
                      tree), t


@dataclasses.dataclass(frozen=True)
class Ensemble:
  """T copies of :class:`TeacherFns` applied with a strategy.

  ``keys``, ``images`` and ``labels`` carry a leading teacher axis ``[T, ...]``.
  """
  fns: TeacherFns
  strategy: str = "vmap"
  chunk_size: int = 25
  mesh: Mesh | None = None

  def __post_init__(self):
    if self.strategy not in STRATEGIES:
      raise ValueError(f"strategy: unknown strategy {self.strategy!r}; known: {STRATEGIES}")
    if self.chunk_size <= 0:
      raise ValueError(f"chunk_size must be positive, got {self.chunk_size}")

  # Compiled functions, cached per Ensemble (hashable frozen dataclass).
  @functools.cached_property
  def _segment_one(self) -> Callable:
    return jax.jit(self.fns.train_segment, static_argnames="num_steps")

  @functools.cached_property
  def _segment_vmap(self) -> Callable:
    def run(state, keys, images, labels, start, num_steps):
      return jax.vmap(lambda *a: self.fns.train_segment(*a, start, num_steps))(
          state, keys, images, labels)
    return jax.jit(run, static_argnames="num_steps")

  @functools.cached_property
  def _segment_chunked(self) -> Callable:
    def run(state, keys, images, labels, start, num_steps):
      def one(args):
        return self.fns.train_segment(*args, start, num_steps)
      return jax.lax.map(one, (state, keys, images, labels), batch_size=self.chunk_size)
    return jax.jit(run, static_argnames="num_steps")

  @functools.cached_property
  def _init_vmap(self) -> Callable:
    return jax.jit(jax.vmap(self.fns.init, in_axes=(0, None)))

  @functools.cached_property
  def _predict_one(self) -> Callable:
    return jax.jit(self.fns.predict)

  @functools.cached_property
  def _predict_vmap(self) -> Callable:
    return jax.jit(jax.vmap(self.fns.predict, in_axes=(0, None)))

  def _shard(self, tree: PyTree) -> PyTree:
    if self.mesh is None:
      return tree
    return jax.device_put(tree, NamedSharding(self.mesh, P(TEACHER_AXIS)))

  def init(self, keys: jax.Array, sample: jax.Array) -> PyTree:
    """Stacked initial state ``{"params", "opt_state"}`` for ``len(keys)`` teachers."""
    return self._init_vmap(keys, sample)

  def train(self, state: PyTree, keys: jax.Array, images: jax.Array, labels: jax.Array,
            start: int, num_steps: int) -> tuple[PyTree, jax.Array]:
    """Runs steps ``[start, start + num_steps)`` for every teacher.

    Returns:
      The new stacked state and the per-teacher mean loss ``[T]``.
    """
    start = jnp.asarray(start, jnp.int32)
    if self.strategy == "loop":
      outs = [self._segment_one(jax.tree.map(lambda a: a[t], state), keys[t], images[t],
                                labels[t], start, num_steps=num_steps)
              for t in range(keys.shape[0])]
      return jax.tree.map(lambda *a: jnp.stack(a), *[o[0] for o in outs]), jnp.stack(
          [o[1] for o in outs])
    args = (state, keys, images, labels)
    if self.strategy == "chunked":  # lax.map pads the last chunk itself.
      return self._segment_chunked(*args, start, num_steps=num_steps)
    args, t = _pad_teachers(args, self.mesh.size if self.mesh is not None else 1)
    new_state, loss = self._segment_vmap(*self._shard(args), start, num_steps=num_steps)
    return jax.tree.map(lambda a: a[:t], (new_state, loss))

  def predict(self, params: PyTree, images: jax.Array, query_chunk: int = 2_000
              ) -> jax.Array:
    """Every teacher's predicted class on ``images [Q, ...]``: int32 ``[T, Q]``."""
    outs = []
    for lo in range(0, images.shape[0], query_chunk):
      x = images[lo:lo + query_chunk]
      if self.strategy == "loop":
        t = jax.tree.leaves(params)[0].shape[0]
        outs.append(jnp.stack([self._predict_one(jax.tree.map(lambda a: a[i], params), x)
                               for i in range(t)]))
      else:
        padded, t = _pad_teachers(params, self.mesh.size if self.mesh is not None else 1)
        outs.append(self._predict_vmap(self._shard(padded), x)[:t])
    return jnp.concatenate(outs, axis=1)
