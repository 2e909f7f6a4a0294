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
from typing import Callable, Sequence

import jax
import jax.numpy as jnp
import numpy as np
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


def _temperatures(temperatures) -> tuple[float, ...]:
  """Distillation temperatures as a hashable tuple of positive, finite floats."""
  temperatures = tuple(float(x) for x in temperatures or ())
  if not all(0 < t < float("inf") for t in temperatures):  # NaN too
    raise ValueError(f"temperatures must be positive and finite, got {temperatures}")
  return temperatures


def _outputs(fns: TeacherFns, temperatures: tuple[float, ...], params: PyTree,
             weights: jax.Array, images: jax.Array) -> tuple[jax.Array, jax.Array]:
  """Stacked teachers ``params [t, ...]`` on ``images [q, ...]``: their predicted classes
  ``[t, q]`` (:meth:`TeacherFns.predict`'s) and the soft counts
  ``sum_{i: weights_i > 0} soft_counts(softmax(logits_i / T))`` ``[K, q, C]`` (int32,
  :func:`pate_jax.votes.soft_counts`: exact sums, whatever the order of the teachers) at
  each temperature ``T`` (``K`` may be 0)."""
  logits = jax.vmap(fns.model.apply, in_axes=(0, None))(params, images)  # [t, q, C]
  preds = jnp.argmax(logits, axis=-1).astype(jnp.int32)
  temps = jnp.asarray(temperatures, jnp.float32).reshape(-1, 1, 1, 1)
  probs = jax.nn.softmax(logits.astype(jnp.float32)[None] / temps, axis=-1)  # [K, t, q, C]
  counts = votes_lib.soft_counts(probs) * (weights > 0).astype(jnp.int32)[None, :, None, None]
  return preds, counts.sum(axis=1)


def check_soft_count_total(num_teachers: int) -> None:
  """A ``ValueError`` naming ``num_teachers`` where their soft counts' sums could pass
  int32 (``T S >= 2^31``, :data:`pate_jax.votes.SOFT_COUNT_SCALE`)."""
  if num_teachers * votes_lib.SOFT_COUNT_SCALE >= 2**31:
    raise ValueError(f"num_teachers={num_teachers}: soft counts of more than "
                     f"{(2**31 - 1) // votes_lib.SOFT_COUNT_SCALE} teachers overflow int32")


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

  def budget_bytes(self) -> int:
    """The per-device bytes the planner counts on: ``memory_bytes``, or ``memory_fraction``
    of the default device's memory (:func:`pate_jax.memory.memory_budget`)."""
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

  def _placed(self, tree: PyTree) -> PyTree:
    """Abstract ``tree`` (arrays or shapes of the padded teacher axis) placed as
    :meth:`prepare` places it: what a program is lowered for ahead of its call."""
    sharding = self._sharding
    return jax.tree.map(lambda a: jax.ShapeDtypeStruct(a.shape, a.dtype, sharding=sharding),
                        tree)

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
      return jax.lax.with_sharding_constraint(a.reshape(a.shape[0] * a.shape[1], *a.shape[2:]),
                                              sharding)

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

  def init_shapes(self, keys: jax.Array | jax.ShapeDtypeStruct,
                  sample: jax.Array | jax.ShapeDtypeStruct) -> PyTree:
    """The shapes and dtypes of :meth:`init`'s state (``jax.ShapeDtypeStruct``s), computed
    without initialising. ``keys``: the teachers' keys, or their shape already padded to
    :meth:`padded_size` (placed as :meth:`prepare` would place them)."""
    keys = self._placed(keys) if isinstance(keys, jax.ShapeDtypeStruct) else self.prepare(keys)
    return jax.eval_shape(self._init_fn, keys, sample)

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

  def plan_train(self, state: PyTree, keys, images, labels, resident_bytes: int = 0,
                 num_steps: int | None = None) -> memory.ChunkPlan:
    """Teachers per vmapped training chunk on each device, from the memory budget.

    The chunk's temporary bytes, from XLA's memory analysis of a compiled program scaled
    per teacher (and by :func:`pate_jax.memory.analysis_factor`, 8 on a CPU), must fit
    the budget left after the resident per-device state and data (``resident_bytes``
    adds more). With ``num_steps`` (the segment length the training
    runs) that program is the training itself with all local teachers in one vmap:
    where it fits, the training finds it compiled (the same jit) and nothing else is
    compiled for it; otherwise its bytes per teacher plan the chunks. Without
    ``num_steps``, one probe chunk (up to 8 teachers, one step) is compiled instead
    (it undercounts: a segment's loop holds more than one step's buffers). Plans are
    cached by shapes.
    """
    if num_steps is not None:
      num_steps = _checks.positive_int(num_steps, "num_steps")
    return self._cached_plan(("train", resident_bytes, num_steps),
                             (state, keys, images, labels),
                             lambda: self._plan_train(state, keys, images, labels,
                                                      resident_bytes, num_steps))

  def _cached_plan(self, kind: tuple, tree: PyTree, compute: Callable) -> memory.ChunkPlan:
    shapes = tuple((a.shape, str(a.dtype)) for a in jax.tree.leaves(tree))
    key = (kind, self, shapes)
    if key not in _PLANS:
      _PLANS[key] = _agreed(compute())
    return _PLANS[key]

  def _plan_train(self, state, keys, images, labels, resident_bytes, num_steps=None):
    local = self._local_count(jax.tree.leaves(state)[0].shape[0])
    if self.strategy == "chunked":
      return memory.ChunkPlan(min(self.chunk_size or DEFAULT_CHUNK, local))
    if self.chunk_size is not None:
      return memory.ChunkPlan(min(self.chunk_size, local))
    budget = self.budget_bytes()
    resident = (memory.tree_bytes((state, images, labels)) // self.num_shards
                + resident_bytes)
    available = budget - resident
    if num_steps is not None:  # the program itself: no probe to compile
      whole = memory.executable_temp_bytes(self._train_fn(local, local, num_steps).lower(
          *self._placed((state, keys, images, labels)),
          jax.ShapeDtypeStruct((), jnp.int32)).compile())
      if whole is None:
        return memory.ChunkPlan(local)
      whole = int(whole * memory.analysis_factor())
      if whole <= available:
        return memory.ChunkPlan(local, estimate_bytes=whole, budget_bytes=int(available))
      per_teacher = whole / local
    else:
      probe = min(local, 8)
      seg = self._local_segment(1)
      temp = memory.temp_bytes(lambda s, k, x, y: seg(s, k, x, y, jnp.int32(0)),
                               *_probe((state, keys, images, labels), probe))
      if temp is None:
        return memory.ChunkPlan(local)
      per_teacher = temp * memory.analysis_factor() / probe
    chunk = memory.plan_teacher_chunk(local, per_teacher, available)
    return memory.ChunkPlan(chunk, estimate_bytes=int(per_teacher * chunk),
                            budget_bytes=int(available))

  def compile_train(self, state: PyTree, keys: jax.Array, images: jax.Array,
                    labels: jax.Array, num_steps: Sequence[int], resident_bytes: int = 0
                    ) -> memory.ChunkPlan | None:
    """Plans (:meth:`plan_train`) and compiles, without running, the training segments of
    each length in ``num_steps`` that :meth:`train` will run on arrays of these shapes.

    ``state``: :meth:`init`'s state or its :meth:`init_shapes`; ``keys``, ``images``,
    ``labels``: the padded training inputs, as arrays or ``jax.ShapeDtypeStruct``s (their
    placement is :meth:`init`'s and :meth:`prepare`'s). A later :meth:`train` on arrays of
    those shapes, with this plan and ``resident_bytes`` for it, finds the plan and the
    programs cached: nothing runs on the devices here, so this may run in a thread while
    the state is initialised. Returns the plan; None for the ``loop`` strategy (its
    programs are per teacher, and not compiled ahead).
    """
    if self.strategy == "loop":
      return None
    args = self._placed((state, keys, images, labels))
    lengths = {_checks.positive_int(n, "num_steps") for n in num_steps}
    plan = self.plan_train(*args, resident_bytes=resident_bytes, num_steps=max(lengths))
    local = self._local_count(keys.shape[0])
    for n in sorted(lengths):
      self._train_fn(plan.teachers, local, n).lower(
          *args, jax.ShapeDtypeStruct((), jnp.int32)).compile()
    return plan

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

  def plan_predict(self, params: PyTree, images: jax.Array,
                   query_chunk: int | None = None, resident_bytes: int = 0,
                   temperatures: tuple[float, ...] = ()) -> memory.ChunkPlan:
    """(teachers, queries) per prediction chunk on each device, from the memory budget
    (cached by shapes).

    ``resident_bytes``: per-device memory that stays allocated meanwhile besides
    ``params`` and ``images`` (e.g. the optimizer state of a just-trained ensemble).
    ``temperatures``: plan the prediction that also sums soft counts at these temperatures
    (:meth:`predict_with_soft_counts`).
    """
    if query_chunk is not None:
      _checks.positive_int(query_chunk, "query_chunk")
    temperatures = _temperatures(temperatures)
    return self._cached_plan(("predict", query_chunk, resident_bytes, temperatures),
                             (params, images),
                             lambda: self._plan_predict(params, images, query_chunk,
                                                        resident_bytes, temperatures))

  def _plan_predict(self, params, images, query_chunk, resident_bytes, temperatures=()):
    local = self._local_count(jax.tree.leaves(params)[0].shape[0])
    q = images.shape[0]
    if query_chunk is not None or self.strategy == "chunked":
      chunk = self.chunk_size or (DEFAULT_CHUNK if self.strategy == "chunked" else local)
      return memory.ChunkPlan(min(chunk, local), min(query_chunk or 1024, q))
    budget = self.budget_bytes()
    resident = (memory.tree_bytes(params) // self.num_shards + memory.tree_bytes(images)
                + resident_bytes)
    probe_t, probe_q = min(local, 8), min(q, 128)
    probe = functools.partial(_outputs, self.fns, temperatures)
    temp = memory.temp_bytes(lambda p, x: probe(p, jnp.ones(probe_t), x),
                             _probe(params, probe_t), _probe(images, probe_q))
    if temp is None:
      return memory.ChunkPlan(local, min(q, 1024))
    per_pair = temp * memory.analysis_factor() / (probe_t * probe_q)
    available = budget - resident
    t, qc = memory.plan_predict_chunks(local, q, per_pair, available)
    return memory.ChunkPlan(t, qc, estimate_bytes=int(per_pair * t * qc),
                            budget_bytes=int(available))

  @functools.lru_cache(maxsize=16)
  def _predict_fn(self, t_chunk: int, q_chunk: int, num_local: int, num_queries: int,
                  temperatures: tuple[float, ...] = ()) -> Callable:
    """``(params, weights, images) -> (predictions [T, Qp], sums [K, Qp, C])``: ``sums``
    is the int32 sum over the teachers of positive ``weights`` of their soft counts at
    ``temperatures`` (``K = len(temperatures)``; ``[0, Qp, C]`` without them)."""
    out = functools.partial(_outputs, self.fns, temperatures)
    nt, nq = -(-num_local // t_chunk), num_queries // q_chunk
    single = nt * nq == 1

    def local(tree, images):  # params [L, ...], weights [L]; images [Qp, ...], q_chunk | Qp
      params, weights = tree
      if single:
        preds, sums = out(params, weights, images)
        return preds, sums[None]
      shape = jax.eval_shape(out, _slice(params, 0, t_chunk), weights[:t_chunk],
                             images[:q_chunk])[1].shape
      def body(j, carry):
        preds, sums = carry
        ti, qi = j // nq, j % nq
        lo = jnp.minimum(ti * t_chunk, num_local - t_chunk)  # last chunk overlaps: same values
        fresh = lo + jnp.arange(t_chunk) >= ti * t_chunk     # ... counted once in the sums
        x = jax.lax.dynamic_slice_in_dim(images, qi * q_chunk, q_chunk)
        p, s = out(_slice(params, lo, t_chunk),
                   jax.lax.dynamic_slice_in_dim(weights, lo, t_chunk) * fresh, x)
        at = (0, qi * q_chunk, 0)
        part = jax.lax.dynamic_slice(sums, at, s.shape)
        return (jax.lax.dynamic_update_slice(preds, p, (lo, qi * q_chunk)),
                jax.lax.dynamic_update_slice(sums, part + s, at))
      init = (jnp.zeros((num_local, images.shape[0]), jnp.int32),
              jnp.zeros((shape[0], images.shape[0], shape[2]), jnp.int32))
      preds, sums = jax.lax.fori_loop(0, nt * nq, body, init)
      return preds, sums[None]

    def run(params, weights, images):
      preds, sums = self._per_device(local, single)((params, weights), images)
      return preds, sums.sum(axis=0)  # each device's teachers' sums, added up
    return jax.jit(run)

  def predict(self, params: PyTree, images: jax.Array, query_chunk: int | None = None,
              plan: memory.ChunkPlan | None = None) -> jax.Array:
    """Every teacher's predicted class on ``images [Q, ...]``: int32 ``[T, Q]``.

    ``T`` is the teacher count of ``params`` as given (already padded params stay
    padded); for the sharded strategies the result stays sharded over teachers.
    ``query_chunk=None`` and no ``plan`` plan the chunks from the memory budget
    (:meth:`plan_predict`).
    """
    if query_chunk is not None:  # before params are looked at
      _checks.positive_int(query_chunk, "query_chunk")
    t = jax.tree.leaves(params)[0].shape[0]
    return self.predict_with_soft_counts(params, images, (), t, query_chunk, plan)[0]

  def predict_with_soft_counts(self, params: PyTree, images: jax.Array,
                               temperatures: tuple[float, ...], num_teachers: int,
                               query_chunk: int | None = None,
                               plan: memory.ChunkPlan | None = None
                               ) -> tuple[jax.Array, jax.Array | None]:
    """:meth:`predict`, and in the same pass over the teachers the soft counts
    ``sum_t soft_counts(softmax(logits_t(x) / T))`` of the first ``num_teachers``
    (padding excluded) at each temperature: int32 ``[len(temperatures), Q, C]`` (``None``
    without temperatures), the values of :func:`pate_jax.teachers.soft_counts`; divided
    by ``S T`` (:data:`pate_jax.votes.SOFT_COUNT_SCALE`) they are, to within ``1/S`` per
    entry, the averaged probabilities. ``plan``: one :meth:`plan_predict` made with the
    same ``temperatures``.
    """
    if query_chunk is not None:
      _checks.positive_int(query_chunk, "query_chunk")
    temperatures = _temperatures(temperatures)
    t = jax.tree.leaves(params)[0].shape[0]
    _checks.positive_int(num_teachers, "num_teachers")
    if num_teachers > t:
      raise ValueError(f"num_teachers={num_teachers} exceeds the {t} teachers of params")
    if temperatures:
      check_soft_count_total(num_teachers)
    q = images.shape[0]
    if self.strategy == "loop":
      preds, sums = self._loop_outputs(params, jnp.asarray(images), temperatures,
                                       num_teachers, query_chunk or 2_000)
    else:
      params = self.prepare(params)
      padded = jax.tree.leaves(params)[0].shape[0]
      # Host weights: in a multi-process run each process places only its own teachers'.
      weights = self.prepare((np.arange(padded) < num_teachers).astype(np.float32))
      plan = plan or self.plan_predict(params, images, query_chunk, temperatures=temperatures)
      images, _ = pad_leading(jnp.asarray(images), plan.queries)
      local = self._local_count(padded)
      preds, sums = self._predict_fn(plan.teachers, plan.queries, local, images.shape[0],
                                     temperatures)(params, weights, images)
      if preds.shape != (t, q):  # drop the padding this call added (teachers, queries)
        preds = preds[:t, :q]
    if not temperatures:
      return preds, None
    return preds, sums[:, :q]

  def compile_predict(self, params: PyTree, images: jax.Array | jax.ShapeDtypeStruct,
                      temperatures: tuple[float, ...] = (),
                      query_chunk: int | None = None, resident_bytes: int = 0
                      ) -> memory.ChunkPlan | None:
    """Plans (:meth:`plan_predict`) and compiles, without running, the prediction pass that
    :meth:`predict_with_soft_counts` will make on arrays of these shapes.

    ``params``: the padded parameters, as arrays or ``jax.ShapeDtypeStruct``s (their
    placement is :meth:`prepare`'s); ``images``: the queries ``[Q, ...]``, or their shape and
    dtype. A later call on real arrays of those shapes, with the same ``temperatures``,
    ``query_chunk`` and ``resident_bytes`` for its plan, finds both the plan and the program
    cached: nothing runs on the devices here, so this may run in a thread while the teachers
    train. Returns the plan; None for the ``loop`` strategy (one small program per teacher,
    not compiled ahead).
    """
    if self.strategy == "loop":
      return None
    temperatures = _temperatures(temperatures)
    plan = self.plan_predict(params, images, query_chunk, resident_bytes, temperatures)
    padded, q = jax.tree.leaves(params)[0].shape[0], images.shape[0]
    queries = jax.ShapeDtypeStruct((q + (-q) % plan.queries, *images.shape[1:]), images.dtype)
    self._predict_fn(plan.teachers, plan.queries, self._local_count(padded), queries.shape[0],
                     temperatures).lower(
        *self._placed((params, jax.ShapeDtypeStruct((padded,), jnp.float32))),
        queries).compile()
    return plan

  def _loop_outputs(self, params, images, temperatures, num_teachers, query_chunk):
    """The ``"loop"`` strategy's predictions ``[T, Q]`` and soft counts ``[K, Q, C]``:
    one jitted call per teacher and query chunk."""
    t = jax.tree.leaves(params)[0].shape[0]
    one, preds, sums = self._outputs_one(temperatures), [], []
    for lo in range(0, images.shape[0], query_chunk):
      x = images[lo:lo + query_chunk]
      outs = [one(jax.tree.map(lambda a: a[i], params), jnp.float32(i < num_teachers), x)
              for i in range(t)]
      preds.append(jnp.stack([o[0] for o in outs]))
      sums.append(sum(o[1] for o in outs))
    return jnp.concatenate(preds, axis=1), jnp.concatenate(sums, axis=1)

  @functools.lru_cache(maxsize=4)
  def _outputs_one(self, temperatures: tuple[float, ...]) -> Callable:
    one = functools.partial(_outputs, self.fns, temperatures)
    def run(p, w, x):  # one teacher: its predictions [q] and soft counts [K, q, C] (0 if w is 0)
      preds, sums = one(jax.tree.map(lambda a: a[None], p), w[None], x)
      return preds[0], sums
    return jax.jit(run)

  def votes(self, params: PyTree, images: jax.Array, num_classes: int, num_teachers: int,
            query_chunk: int | None = None) -> jax.Array:
    """Vote histograms ``[Q, C]`` of the first ``num_teachers`` (padding excluded),
    reduced on the devices."""
    return votes_lib.histogram(self.predict(params, images, query_chunk), num_classes,
                               num_teachers)
