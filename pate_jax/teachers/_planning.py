"""The memory plan a dry run reports for an ensemble, from abstract inputs only.

:func:`memory_plan` builds the run's padded shapes with ``jax.eval_shape`` and asks
:meth:`pate_jax.teachers.Ensemble.plan_train` and ``plan_predict`` for the chunks
the run would use, so nothing is trained or allocated.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import jax
import jax.numpy as jnp

from pate_jax import data, memory
from pate_jax.teachers._ensemble import Ensemble
from pate_jax.teachers._sharding import teacher_mesh


def memory_plan(ensemble: "Ensemble", num_teachers: int, shard_x: Any, shard_y: Any,
                num_queries: int, query_chunk: int | None, init_key: jax.Array,
                temperatures: tuple[float, ...] = (), num_steps: int | None = None
                ) -> dict[str, Any]:
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
    temperatures: the distillation temperatures whose soft counts the prediction also
      computes (:meth:`Ensemble.predict_with_soft_counts`).
    num_steps: the training segment's length the run plans for (``plan_train``'s
      ``num_steps``: its real program, where that fits); ``None``: the probe only.
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
      "budget_bytes_per_device": planner.budget_bytes(),
  })
  for name, make in (
      ("train_plan", lambda: planner.plan_train(state, keys, images, labels,
                                                num_steps=num_steps)),
      ("predict_plan", lambda: planner.plan_predict(
          state["params"], queries, query_chunk or None,
          resident_bytes=memory.tree_bytes(state["opt_state"]) // shards,
          temperatures=temperatures))):
    try:
      plan = make()
    except MemoryError as e:  # what the run would raise: the dry run reports it
      out[name] = f"DOES NOT FIT: {e}"
      continue
    out[name] = {"teachers_per_chunk": plan.teachers,
                 "teacher_chunks": -(-local // plan.teachers),
                 "estimate_bytes_per_chunk": plan.estimate_bytes,
                 "analysis_factor": memory.analysis_factor(),
                 "budget_bytes_left_for_chunks": plan.budget_bytes,
                 "description": memory.fits_description(
                     plan, ("teachers",) if plan.queries is None else ("teachers", "queries"))}
    if plan.queries is not None:
      out[name].update({"queries_per_chunk": plan.queries,
                        "query_chunks": -(-num_queries // plan.queries)})
  return out
