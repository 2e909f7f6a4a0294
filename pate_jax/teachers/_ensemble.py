"""The ensemble strategies: T copies of one teacher's functions over a teacher axis.

:class:`Ensemble` applies :class:`pate_jax.teachers.TeacherFns` to stacked state
with ``"vmap"`` (sharded over the teacher mesh, chunks planned from a memory
budget), ``"chunked"`` (a fixed chunk size) or ``"loop"`` (one jitted
single-teacher call per teacher); it owns the padded, sharded layout, the
training and prediction programs and their memory plans (cached by shapes and
agreed between processes).
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Callable

import jax
import jax.numpy as jnp
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

from pate_jax import _checks, distributed, memory
from pate_jax import votes as votes_lib
from pate_jax.teachers._sharding import (TEACHER_AXIS, PyTree, _probe, _slice,
                                         chunked_over_teachers, pad_leading)
from pate_jax.teachers._single import TeacherFns

STRATEGIES = ("vmap", "chunked", "loop")
DEFAULT_CHUNK = 25


def default_strategy(backend: str | None = None) -> str:
  """``"vmap"`` on GPU/TPU, ``"loop"`` on CPU (measured: experiments/bench_teachers.py)."""
  backend = backend or jax.default_backend()
  return "loop" if backend == "cpu" else "vmap"


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
