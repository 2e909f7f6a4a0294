"""The teacher ensemble: T networks trained at once on disjoint shards.

One teacher is described by pure functions of its own state (``init``,
``train_segment``, ``predict``); an ensemble applies them across a leading
teacher axis with one of three strategies that give the same result:

* ``"vmap"``: one jitted program over all teachers, the teacher axis sharded
  across devices (``Mesh`` + ``NamedSharding``, partitioned by XLA; every
  process's devices when run with ``jax.distributed``). On each device the
  local teachers are vmapped in chunks whose size comes from a memory budget
  (:mod:`pate_jax.memory`): all of them at once when they fit, else the
  largest chunk that fits, run one after another inside the program
  (``fori_loop`` updating the donated state in place; the teacher axis is
  viewed as ``[devices, local]`` and vmapped over devices, so every device
  loops over its own teachers). The accelerator default.
* ``"chunked"``: the same with a fixed ``chunk_size`` teachers per chunk.
* ``"loop"``: a Python loop over teachers calling one jitted single-teacher
  function, compiled once whatever T is. On a small CPU XLA's batched matmuls
  gain nothing from vmap, so this is the CPU default (see ``bench_teachers``).

For the sharded strategies the stacked state is *padded* to a multiple of the
device count (by copies of teacher 0, trained with teacher 0's key) and kept
padded and sharded between segments; :meth:`Ensemble.trim` drops the padding.
Prediction is planned the same way, over teachers and query chunks, and the
vote histogram is reduced on the devices, so only ``[Q, C]`` counts leave them.

A training *segment* is ``lax.scan`` over ``num_steps`` optimisation steps,
so there is no host round trip inside it; step ``s`` of teacher ``t`` draws its
minibatch and augmentation from ``fold_in(key_t, s)``, so results do not depend
on how training is cut into segments (checkpoint/resume is bit-identical) nor
on the strategy.

Everything here takes explicit arguments (:func:`build_ensemble`,
:func:`train_with_checkpoints`, :func:`compute_votes`, :func:`memory_plan`): reading
the config, the work directory's files (``votes.npz`` and the record that protects it)
and the resume tests' kill belong to the stage, :mod:`pate_jax.stages.teachers`.
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

from pate_jax import _checks, data, distributed, io, memory, models
from pate_jax import votes as votes_lib

STRATEGIES = ("vmap", "chunked", "loop")
DEFAULT_CHUNK = 25
TEACHER_AXIS = "teachers"
PyTree = Any


def default_strategy(backend: str | None = None) -> str:
  """``"vmap"`` on GPU/TPU, ``"loop"`` on CPU (measured: experiments/bench_teachers.py)."""
  backend = backend or jax.default_backend()
  return "loop" if backend == "cpu" else "vmap"


def random_shift(key: jax.Array, images: jax.Array, max_shift: int) -> jax.Array:
  """Translates each image ``[B, H, W, C]`` by up to ``max_shift`` pixels (zero fill).

  Raises:
    ValueError: ``max_shift`` is negative or not smaller than the images.
  """
  _checks.positive_int(max_shift, "max_shift", minimum=0)
  if max_shift == 0:
    return images
  _, h, w, _ = images.shape
  if max_shift >= min(h, w):
    raise ValueError(f"max_shift must be smaller than the images ({h}×{w}); got {max_shift}")
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

  def __post_init__(self):
    if self.batch_size is not None:
      _checks.positive_int(self.batch_size, "batch_size")
    _checks.positive_int(self.max_shift, "max_shift", minimum=0)

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
  """A 1-D mesh whose axis carries the teachers: all devices of all processes by default
  (the local ones when there is one process)."""
  devices = jax.devices() if devices is None else devices
  return Mesh(np.asarray(devices), (TEACHER_AXIS,))


def pad_leading(tree: PyTree, multiple: int) -> tuple[PyTree, int]:
  """Pads each leaf's leading (teacher or query) axis to a multiple by repeating row 0.

  Leaves already padded are left alone. Returns the padded tree and the first
  leaf's original leading size.
  """
  def pad_leaf(a):
    pad = (-a.shape[0]) % multiple
    if pad == 0:
      return a
    xp = np if isinstance(a, np.ndarray) else jnp
    return xp.concatenate([a, xp.repeat(a[:1], pad, axis=0)])
  return jax.tree.map(pad_leaf, tree), jax.tree.leaves(tree)[0].shape[0]


def _probe(tree: PyTree, size: int) -> PyTree:
  """Abstract ``tree`` with its leading axis cut to ``size`` (for memory probes)."""
  return jax.tree.map(lambda a: jax.ShapeDtypeStruct((size, *a.shape[1:]), a.dtype), tree)


def _slice(tree: PyTree, start, size: int) -> PyTree:
  return jax.tree.map(lambda a: jax.lax.dynamic_slice_in_dim(a, start, size), tree)


def _update(tree: PyTree, part: PyTree, start) -> PyTree:
  return jax.tree.map(lambda a, b: jax.lax.dynamic_update_slice_in_dim(a, b, start, 0),
                      tree, part)


def chunked_over_teachers(fn: Callable, chunk: int) -> Callable:
  """``fn(tree, *rest) -> (tree', out)`` vmapped over chunks of ``chunk`` teachers.

  ``fn`` maps a stacked tree (leading teacher axis) to a new tree of the same
  structure and a per-teacher output ``[n]``. With ``chunk`` teachers at a time the
  chunks run one after another in a ``fori_loop`` whose carry is the whole
  stacked tree, updated in place (with a donated input, no second copy of the
  state is ever allocated); a last, smaller chunk takes the remainder.
  """
  def run(tree, *rest):
    n = jax.tree.leaves(tree)[0].shape[0]
    if chunk >= n:
      return fn(tree, *rest)
    out_shape = jax.eval_shape(fn, _slice(tree, 0, chunk), *_slice(rest, 0, chunk))[1]
    out = jnp.zeros((n, *out_shape.shape[1:]), out_shape.dtype)
    def body(i, carry):
      tree, out = carry
      lo = i * chunk
      new, o = fn(_slice(tree, lo, chunk), *_slice(rest, lo, chunk))
      return _update(tree, new, lo), _update(out, o, lo)
    full, rem = divmod(n, chunk)
    tree, out = jax.lax.fori_loop(0, full, body, (tree, out))
    if rem:  # the last, smaller chunk
      lo = full * chunk
      new, o = fn(_slice(tree, lo, rem), *_slice(rest, lo, rem))
      tree, out = _update(tree, new, lo), _update(out, o, lo)
    return tree, out
  return run


_PLANS: dict = {}  # (kind, ensemble, shapes, ...) -> ChunkPlan


def _agreed(plan: memory.ChunkPlan) -> memory.ChunkPlan:
  """The smallest chunks any process planned: every process must compile the same
  program, and a plan comes from local facts (a device's memory, a host's RAM)."""
  if jax.process_count() == 1:
    return plan
  queries = None if plan.queries is None else distributed.process_min(plan.queries)
  return dataclasses.replace(plan, teachers=distributed.process_min(plan.teachers),
                             queries=queries)


@dataclasses.dataclass(frozen=True)
class Ensemble:
  """T copies of :class:`TeacherFns` applied with a strategy.

  ``keys``, ``images`` and ``labels`` carry a leading teacher axis ``[T, ...]``.
  For the sharded strategies (``vmap``, ``chunked``) the state returned by
  :meth:`init` and :meth:`train` is padded to :meth:`padded_size` teachers and
  sharded; :meth:`prepare` pads and shards the per-teacher inputs once.

  Attributes:
    fns: the single-teacher functions.
    strategy: ``"vmap"``, ``"chunked"`` or ``"loop"``.
    chunk_size: teachers per vmapped chunk on each device for ``"chunked"`` (default
      25); for ``"vmap"`` ``None`` plans it from ``memory_fraction``, an int fixes it.
    mesh: device mesh for the teacher axis (``None``: the default device).
    memory_fraction: share of each device's memory the planner may count on.
    memory_bytes: an absolute per-device budget instead (tests, shared devices).
  """
  fns: TeacherFns
  strategy: str = "vmap"
  chunk_size: int | None = None
  mesh: Mesh | None = None
  memory_fraction: float = 0.6
  memory_bytes: int | None = None

  def _budget(self) -> int:
    if self.memory_bytes is not None:
      return int(self.memory_bytes)
    return memory.memory_budget(self.memory_fraction)

  def __post_init__(self):
    if self.strategy not in STRATEGIES:
      raise ValueError(f"strategy: unknown strategy {self.strategy!r}; known: {STRATEGIES}")
    if self.chunk_size is not None and self.chunk_size <= 0:
      raise ValueError(f"chunk_size must be positive, got {self.chunk_size}")
    memory.memory_budget(self.memory_fraction)  # validates the fraction

  # --------------------------------------------------------------------------- layout

  @property
  def num_shards(self) -> int:
    return 1 if self.mesh is None or self.strategy == "loop" else self.mesh.size

  def padded_size(self, num_teachers: int) -> int:
    return num_teachers + (-num_teachers) % self.num_shards

  @property
  def _sharding(self) -> NamedSharding | None:
    if self.mesh is None or self.strategy == "loop":
      return None
    return NamedSharding(self.mesh, P(TEACHER_AXIS))

  def prepare(self, tree: PyTree) -> PyTree:
    """Pads the teacher axis to :meth:`padded_size` and shards it over the mesh.

    Host (numpy) inputs are placed slice by slice: in a multi-process run each
    process transfers only the teachers its own devices hold.
    """
    if self.strategy == "loop":
      return jax.tree.map(jnp.asarray, tree)
    tree, _ = pad_leading(tree, self.num_shards)
    sharding = self._sharding
    if sharding is None:
      return jax.tree.map(jnp.asarray, tree)
    return distributed.put_teacher_axis(tree, sharding)

  @staticmethod
  def trim(tree: PyTree, num_teachers: int) -> PyTree:
    """The first ``num_teachers`` teachers of a (padded) stacked tree."""
    return jax.tree.map(lambda a: a[:num_teachers], tree)

  def _local_count(self, padded: int) -> int:
    return padded // self.num_shards

  def _per_device(self, fn: Callable, single: bool) -> Callable:
    """Applies ``fn`` (a function of stacked trees with leading local-teacher axis) to
    each device's teachers.

    ``single``: ``fn`` is a plain vmap over all teachers, which XLA partitions over
    the sharded teacher axis by itself. Otherwise ``fn`` loops over chunks, and each
    device must loop over its own teachers: the axis is viewed as ``[devices,
    local]`` (sharded on devices) and ``fn`` vmapped over devices.
    """
    d = self.num_shards
    if single or d == 1:
      return fn
    sharding = NamedSharding(self.mesh, P(TEACHER_AXIS))

    def split(a):
      a = a.reshape(d, a.shape[0] // d, *a.shape[1:])
      return jax.lax.with_sharding_constraint(a, sharding)

    def merge(a):
      return jax.lax.with_sharding_constraint(a.reshape(-1, *a.shape[2:]), sharding)

    def run(tree, *shared):
      out = jax.vmap(lambda t: fn(t, *shared))(jax.tree.map(split, tree))
      return jax.tree.map(merge, out)
    return run

  # --------------------------------------------------------------------------- init

  @functools.cached_property
  def _init_fn(self) -> Callable:
    return jax.jit(jax.vmap(self.fns.init, in_axes=(0, None)), out_shardings=self._sharding)

  def init(self, keys: jax.Array, sample: jax.Array) -> PyTree:
    """Stacked initial state ``{"params", "opt_state"}`` (padded and sharded when sharded)."""
    return self._init_fn(self.prepare(keys), sample)

  # --------------------------------------------------------------------------- training

  @functools.cached_property
  def _segment_one(self) -> Callable:
    return jax.jit(self.fns.train_segment, static_argnames="num_steps")

  def _local_segment(self, num_steps: int) -> Callable:
    """Per-device segment over a chunk of teachers: ``(state, keys, x, y, start)``."""
    def seg(state, keys, images, labels, start):
      return jax.vmap(lambda s, k, x, y: self.fns.train_segment(s, k, x, y, start, num_steps))(
          state, keys, images, labels)
    return seg

  def plan_train(self, state: PyTree, keys, images, labels, resident_bytes: int = 0
                 ) -> memory.ChunkPlan:
    """Teachers per vmapped training chunk on each device, from the memory budget.

    One probe chunk (up to 8 teachers, one step) is compiled for XLA's memory
    analysis; its temporary bytes, scaled per teacher, must fit the budget left
    after the resident per-device state and data (``resident_bytes`` adds more).
    Plans are cached by shapes.
    """
    return self._cached_plan(("train", resident_bytes), (state, keys, images, labels),
                             lambda: self._plan_train(state, keys, images, labels,
                                                      resident_bytes))

  def _cached_plan(self, kind: tuple, tree: PyTree, compute: Callable) -> memory.ChunkPlan:
    shapes = tuple((a.shape, str(a.dtype)) for a in jax.tree.leaves(tree))
    key = (kind, self, shapes)
    if key not in _PLANS:
      _PLANS[key] = _agreed(compute())
    return _PLANS[key]

  def _plan_train(self, state, keys, images, labels, resident_bytes):
    local = self._local_count(jax.tree.leaves(state)[0].shape[0])
    if self.strategy == "chunked":
      return memory.ChunkPlan(min(self.chunk_size or DEFAULT_CHUNK, local))
    if self.chunk_size is not None:
      return memory.ChunkPlan(min(self.chunk_size, local))
    budget = self._budget()
    resident = (memory.tree_bytes((state, images, labels)) // self.num_shards
                + resident_bytes)
    probe = min(local, 8)
    seg = self._local_segment(1)
    temp = memory.temp_bytes(lambda s, k, x, y: seg(s, k, x, y, jnp.int32(0)),
                             *_probe((state, keys, images, labels), probe))
    if temp is None:
      return memory.ChunkPlan(local)
    per_teacher = temp / probe
    available = budget - resident
    chunk = memory.plan_teacher_chunk(local, per_teacher, available)
    return memory.ChunkPlan(chunk, estimate_bytes=int(per_teacher * chunk),
                            budget_bytes=int(available))

  @functools.lru_cache(maxsize=16)
  def _train_fn(self, chunk: int, num_local: int, num_steps: int) -> Callable:
    seg = self._local_segment(num_steps)
    single = chunk >= num_local  # all local teachers in one vmap: no loop

    def run(state, keys, images, labels, start):
      def local(tree):
        fn = lambda st, k, x, y: seg(st, k, x, y, start)
        return fn(*tree) if single else chunked_over_teachers(fn, chunk)(*tree)
      return self._per_device(local, single)((state, keys, images, labels))
    return jax.jit(run, donate_argnums=0)

  def train(self, state: PyTree, keys: jax.Array, images: jax.Array, labels: jax.Array,
            start: int, num_steps: int, plan: memory.ChunkPlan | None = None
            ) -> tuple[PyTree, jax.Array]:
    """Runs steps ``[start, start + num_steps)`` for every teacher.

    The sharded strategies *donate* ``state``: do not use it after the call. Inputs
    not yet padded and sharded are prepared here (pass :meth:`prepare`'d ones to
    skip that per call).

    Returns:
      The new stacked state and the per-teacher mean loss (padded length for the
      sharded strategies).
    """
    _checks.positive_int(num_steps, "num_steps")
    if not _checks.is_traced(start) and int(start) < 0:
      raise ValueError(f"start must be >= 0; got {start}")
    start = jnp.asarray(start, jnp.int32)
    if self.strategy == "loop":
      outs = [self._segment_one(jax.tree.map(lambda a: a[t], state), keys[t], images[t],
                                labels[t], start, num_steps=num_steps)
              for t in range(keys.shape[0])]
      return jax.tree.map(lambda *a: jnp.stack(a), *[o[0] for o in outs]), jnp.stack(
          [o[1] for o in outs])
    state, keys, images, labels = self.prepare((state, keys, images, labels))
    if plan is None:
      plan = self.plan_train(state, keys, images, labels)
    local = self._local_count(keys.shape[0])
    return self._train_fn(plan.teachers, local, num_steps)(state, keys, images, labels, start)

  # --------------------------------------------------------------------------- prediction

  @functools.cached_property
  def _predict_one(self) -> Callable:
    return jax.jit(self.fns.predict)

  def plan_predict(self, params: PyTree, images: jax.Array,
                   query_chunk: int | None = None, resident_bytes: int = 0
                   ) -> memory.ChunkPlan:
    """(teachers, queries) per prediction chunk on each device, from the memory budget
    (cached by shapes).

    ``resident_bytes``: per-device memory that stays allocated meanwhile besides
    ``params`` and ``images`` (e.g. the optimizer state of a just-trained ensemble).
    """
    if query_chunk is not None:
      _checks.positive_int(query_chunk, "query_chunk")
    return self._cached_plan(("predict", query_chunk, resident_bytes), (params, images),
                             lambda: self._plan_predict(params, images, query_chunk,
                                                        resident_bytes))

  def _plan_predict(self, params, images, query_chunk, resident_bytes):
    local = self._local_count(jax.tree.leaves(params)[0].shape[0])
    q = images.shape[0]
    if query_chunk is not None or self.strategy == "chunked":
      chunk = self.chunk_size or (DEFAULT_CHUNK if self.strategy == "chunked" else local)
      return memory.ChunkPlan(min(chunk, local), min(query_chunk or 1024, q))
    budget = self._budget()
    resident = (memory.tree_bytes(params) // self.num_shards + memory.tree_bytes(images)
                + resident_bytes)
    probe_t, probe_q = min(local, 8), min(q, 128)
    temp = memory.temp_bytes(jax.vmap(self.fns.predict, in_axes=(0, None)),
                             _probe(params, probe_t), _probe(images, probe_q))
    if temp is None:
      return memory.ChunkPlan(local, min(q, 1024))
    per_pair = temp / (probe_t * probe_q)
    available = budget - resident
    t, qc = memory.plan_predict_chunks(local, q, per_pair, available)
    return memory.ChunkPlan(t, qc, estimate_bytes=int(per_pair * t * qc),
                            budget_bytes=int(available))

  @functools.lru_cache(maxsize=16)
  def _predict_fn(self, t_chunk: int, q_chunk: int, num_local: int, num_queries: int
                  ) -> Callable:
    pred = jax.vmap(self.fns.predict, in_axes=(0, None))
    nt, nq = -(-num_local // t_chunk), num_queries // q_chunk
    single = nt * nq == 1

    def local(params, images):  # params [L, ...], images [Qp, ...] with Qp % q_chunk == 0
      if single:
        return pred(params, images)
      def body(j, out):
        ti, qi = j // nq, j % nq
        lo = jnp.minimum(ti * t_chunk, num_local - t_chunk)  # last chunk overlaps: same values
        p = _slice(params, lo, t_chunk)
        x = jax.lax.dynamic_slice_in_dim(images, qi * q_chunk, q_chunk)
        return jax.lax.dynamic_update_slice(out, pred(p, x), (lo, qi * q_chunk))
      out = jnp.zeros((num_local, images.shape[0]), jnp.int32)
      return jax.lax.fori_loop(0, nt * nq, body, out)

    return jax.jit(lambda params, images: self._per_device(local, single)(params, images))

  def predict(self, params: PyTree, images: jax.Array, query_chunk: int | None = None,
              plan: memory.ChunkPlan | None = None) -> jax.Array:
    """Every teacher's predicted class on ``images [Q, ...]``: int32 ``[T, Q]``.

    ``T`` is the teacher count of ``params`` as given (already padded params stay
    padded); for the sharded strategies the result stays sharded over teachers.
    ``query_chunk=None`` and no ``plan`` plan the chunks from the memory budget
    (:meth:`plan_predict`).
    """
    if query_chunk is not None:
      _checks.positive_int(query_chunk, "query_chunk")
    t = jax.tree.leaves(params)[0].shape[0]
    if self.strategy == "loop":
      qc = query_chunk or 2_000
      outs = []
      for lo in range(0, images.shape[0], qc):
        x = images[lo:lo + qc]
        outs.append(jnp.stack([self._predict_one(jax.tree.map(lambda a: a[i], params), x)
                               for i in range(t)]))
      return jnp.concatenate(outs, axis=1)
    params = self.prepare(params)
    plan = plan or self.plan_predict(params, images, query_chunk)
    q = images.shape[0]
    images, _ = pad_leading(jnp.asarray(images), plan.queries)
    local = self._local_count(jax.tree.leaves(params)[0].shape[0])
    out = self._predict_fn(plan.teachers, plan.queries, local, images.shape[0])(params, images)
    if out.shape != (t, q):  # drop the padding this call added (teachers) and the query padding
      out = out[:t, :q]
    return out

  def votes(self, params: PyTree, images: jax.Array, num_classes: int, num_teachers: int,
            query_chunk: int | None = None) -> jax.Array:
    """Vote histograms ``[Q, C]`` of the first ``num_teachers`` (padding excluded),
    reduced on the devices."""
    return votes_lib.histogram(self.predict(params, images, query_chunk), num_classes,
                               num_teachers)


def mean_probabilities(fns: TeacherFns, params: PyTree, images: jax.Array,
                       temperatures: tuple[float, ...], num_teachers: int,
                       query_chunk: int = 1000) -> jax.Array:
  """The ensemble's averaged class probabilities at each temperature (distillation).

  ``mean_t softmax(logits_t(x) / T)`` over the first ``num_teachers`` teachers of
  ``params`` (padding excluded): float32 ``[len(temperatures), Q, C]``. One teacher
  and ``query_chunk`` queries at a time, so memory stays that of one prediction.
  """
  if not temperatures or min(temperatures) <= 0:
    raise ValueError(f"temperatures must be positive, got {temperatures}")
  _checks.positive_int(query_chunk, "query_chunk")
  params = jax.tree.map(lambda a: a[:num_teachers], params)
  images = jnp.asarray(images)
  padded, _ = pad_leading(images, query_chunk)
  chunks = padded.reshape(-1, query_chunk, *images.shape[1:])
  return _mean_probabilities(fns, tuple(float(t) for t in temperatures), params,
                             chunks)[:, :images.shape[0]]


@functools.partial(jax.jit, static_argnums=(0, 1))
def _mean_probabilities(fns: TeacherFns, temperatures: tuple[float, ...], params: PyTree,
                        chunks: jax.Array) -> jax.Array:
  temps = jnp.asarray(temperatures, jnp.float32)[:, None, None]

  def probs(p):
    logits = jax.lax.map(lambda x: fns.model.apply(p, x), chunks)  # [n, chunk, C]
    return jax.nn.softmax(logits.reshape(-1, logits.shape[-1])[None] / temps, axis=-1)

  first = jax.tree.map(lambda a: a[0], params)
  total, _ = jax.lax.scan(lambda acc, p: (acc + probs(p), None),
                          jnp.zeros(jax.eval_shape(probs, first).shape, jnp.float32), params)
  return total / jax.tree.leaves(params)[0].shape[0]


@jax.jit
def accuracy_of(predictions: jax.Array, labels: jax.Array) -> jax.Array:
  """Per-teacher accuracy ``[T']`` of ``predictions [T', Q]`` against ``labels [Q]``."""
  return (predictions == labels[None]).mean(axis=1)


# ------------------------------------------------------------------ building and running


def build_ensemble(model_name: str, num_classes: int, *, learning_rate: float,
                   weight_decay: float, model_kwargs: dict[str, Any] | None = None,
                   batch_size: int | None = None, max_shift: int = 0, strategy: str = "auto",
                   chunk_size: int | None = None, memory_fraction: float = 0.6,
                   compute_dtype: str = "float32") -> Ensemble:
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
  """
  _checks.positive(learning_rate, "learning_rate")
  if not _checks.scalar(weight_decay, "weight_decay") >= 0:
    raise ValueError(f"weight_decay must be >= 0; got {weight_decay}")
  model = models.get_model(model_name, num_classes, compute_dtype=compute_dtype,
                           **(model_kwargs or {}))
  tx = optax.adamw(learning_rate, weight_decay=weight_decay)
  fns = TeacherFns(model, tx, batch_size, max_shift)
  strategy = default_strategy() if strategy == "auto" else strategy
  mesh = teacher_mesh() if strategy != "loop" else None
  return Ensemble(fns, strategy, chunk_size, mesh, memory_fraction)


def query_set(ds: data.ImageDataset) -> tuple[np.ndarray, int]:
  """Rows of the test split of ``ds`` (a :class:`pate_jax.data.ImageDataset`) in
  student-split order (public pool, then evaluation), and the pool's size."""
  split = data.student_split(ds.name, len(ds.test_labels))
  return np.concatenate([split.pool_index, split.eval_index]), len(split.pool_index)


def train_with_checkpoints(ensemble: Ensemble, state: PyTree, keys: jax.Array,
                           images: jax.Array, labels: jax.Array, ckpt: Any, *, step: int,
                           num_steps: int, checkpoint_every: int, num_teachers: int,
                           plan: memory.ChunkPlan | None = None,
                           after_save: Callable[[int], None] | None = None
                           ) -> tuple[PyTree, jax.Array | None]:
  """Trains from ``step`` to ``num_steps`` in segments of ``checkpoint_every`` steps,
  saving ``state`` to ``ckpt`` (a :class:`pate_jax.checkpoint.Checkpointer`, asynchronous)
  after each, with a progress bar (mean loss of the first ``num_teachers``, the padding
  left out). Returns the state (ready) and the last segment's loss (None if no step was
  left). ``after_save(step)`` is called after each save is started."""
  bar = io.progress(total=num_steps, initial=step, desc="training steps", unit="step")
  loss = None
  while step < num_steps:
    n = min(checkpoint_every, num_steps - step)
    state, loss = ensemble.train(state, keys, images, labels, step, n, plan=plan)
    step += n
    ckpt.save(step, state)  # asynchronous: training goes on while it is written
    bar.update(n)
    bar.set_postfix(loss=f"{float(loss[:num_teachers].mean()):.3f}")
    if after_save is not None:
      after_save(step)
  bar.close()
  jax.block_until_ready(state)
  return state, loss


def compute_votes(ensemble: Ensemble, state: PyTree, queries: jax.Array, labels: Any, *,
                  num_classes: int, num_teachers: int, query_chunk: int | None = None,
                  temperatures: tuple[float, ...] = (), return_predictions: bool = False
                  ) -> tuple[Any, ...]:
  """The trained ensemble's votes on ``queries [Q, H, W, C]``, on the host.

  Returns ``votes [Q, num_classes]`` (histogram of the first ``num_teachers``),
  each teacher's accuracy ``[num_teachers]`` against ``labels [Q]``, the averaged
  teacher probabilities ``[len(temperatures), Q, num_classes]`` at each distillation
  temperature (None without temperatures; not private), the prediction plan (None for
  the ``"loop"`` strategy; planned with ``state``'s optimizer state still allocated, and
  printed); with ``return_predictions``, fifth, each teacher's predicted class
  ``[num_teachers, Q]`` (uint8, padding excluded; checked to give ``votes``), which
  ``votes.npz`` stores for ablations over teacher subsets (pate_jax.ablation).
  """
  plan = None
  if ensemble.strategy != "loop":
    plan = ensemble.plan_predict(  # the optimizer state stays allocated meanwhile
        state["params"], queries, query_chunk,
        resident_bytes=memory.tree_bytes(state["opt_state"]) // ensemble.num_shards)
    print(f"prediction plan per device: {memory.fits_description(plan)}")
  preds = ensemble.predict(state["params"], queries, query_chunk, plan=plan)
  votes = distributed.to_host(votes_lib.histogram(preds, num_classes, num_teachers))
  if return_predictions:
    predictions = np.asarray(distributed.to_host(preds))[:num_teachers].astype(np.uint8)
    if num_classes > 256 or not np.array_equal(  # the stored predictions give these votes
        np.asarray(votes_lib.histogram(predictions, num_classes)), votes):
      raise AssertionError("the host predictions' histogram differs from the votes")
  accuracy = distributed.to_host(accuracy_of(preds, jnp.asarray(labels)))[:num_teachers]
  probs = None
  if temperatures:  # distillation targets: averaged teacher probabilities (not private)
    probs = distributed.to_host(mean_probabilities(
        ensemble.fns, state["params"], queries, temperatures, num_teachers))
  if return_predictions:
    return votes, accuracy, probs, plan, predictions
  return votes, accuracy, probs, plan


def memory_plan(ensemble: "Ensemble", num_teachers: int, shard_x: Any, shard_y: Any,
                num_queries: int, query_chunk: int | None, init_key: jax.Array) -> dict[str, Any]:
  """What a dry run reports of an ensemble's memory: the stacked state's bytes and the
  planner's training and prediction chunks (:meth:`Ensemble.plan_train` /
  :meth:`Ensemble.plan_predict` on abstract inputs of the run's padded shapes, so the plans
  the run would make). With the ``loop`` strategy (unchunked, one teacher at a time) the
  plans are those of ``vmap`` on the teacher mesh, for comparison. A plan that does not fit
  is reported (``"DOES NOT FIT: ..."``), not raised.

  Args:
    ensemble: from :func:`build_ensemble`.
    num_teachers: ``T``.
    shard_x, shard_y: the teachers' shards ``[T, n, ...]`` and ``[T, n]`` (only shapes and
      dtypes are used).
    num_queries: query images to vote on.
    query_chunk: a fixed query chunk (``None`` or 0: planned).
    init_key: the key the run splits into the teachers' init keys.
  """
  out: dict[str, Any] = {}
  planner = ensemble
  if ensemble.strategy == "loop":
    planner = dataclasses.replace(ensemble, strategy="vmap", mesh=teacher_mesh())
    out["plans_for"] = ("vmap on the teacher mesh (this run's loop strategy trains one "
                        "teacher at a time, unchunked)")
  padded, shards = planner.padded_size(num_teachers), planner.num_shards
  n = int(shard_y.shape[1])
  keys = jax.eval_shape(lambda: jax.random.split(init_key, padded))
  dtype = data.to_float(shard_x[:1, :1]).dtype  # what the run trains on
  images = jax.ShapeDtypeStruct((padded, *shard_x.shape[1:]), dtype)
  labels = jax.ShapeDtypeStruct((padded, n), jnp.asarray(shard_y[:1, :1]).dtype)
  sample = jax.ShapeDtypeStruct(shard_x.shape[1:], dtype)  # one shard, as the run
  state = jax.eval_shape(jax.vmap(planner.fns.init, in_axes=(0, None)), keys, sample)
  queries = jax.ShapeDtypeStruct((num_queries, *shard_x.shape[2:]), dtype)
  local = padded // shards
  out.update({
      "padded_teachers": padded, "devices": shards, "teachers_per_device": local,
      "state_bytes": memory.tree_bytes(state),
      "state_bytes_per_device": memory.tree_bytes(state) // shards,
      "params_bytes_per_teacher": memory.tree_bytes(state["params"]) // padded,
      "data_bytes_per_device": memory.tree_bytes((images, labels)) // shards,
      "memory_fraction": planner.memory_fraction,
      "budget_bytes_per_device": planner._budget(),  # pylint: disable=protected-access
  })
  for name, make in (
      ("train_plan", lambda: planner.plan_train(state, keys, images, labels)),
      ("predict_plan", lambda: planner.plan_predict(
          state["params"], queries, query_chunk or None,
          resident_bytes=memory.tree_bytes(state["opt_state"]) // shards))):
    try:
      plan = make()
    except MemoryError as e:  # what the run would raise: the dry run reports it
      out[name] = f"DOES NOT FIT: {e}"
      continue
    out[name] = {"teachers_per_chunk": plan.teachers,
                 "teacher_chunks": -(-local // plan.teachers),
                 "estimate_bytes_per_chunk": plan.estimate_bytes,
                 "budget_bytes_left_for_chunks": plan.budget_bytes,
                 "description": memory.fits_description(
                     plan, ("teachers",) if plan.queries is None else ("teachers", "queries"))}
    if plan.queries is not None:
      out[name].update({"queries_per_chunk": plan.queries,
                        "query_chunks": -(-num_queries // plan.queries)})
  return out
