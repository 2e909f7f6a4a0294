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

The package's modules: ``_single`` (one teacher's pure functions), ``_sharding`` (the
teacher mesh, padding, chunked loops), ``_ensemble`` (the strategies and their memory
plans), ``_training`` (building an ensemble, checkpointed training), ``_votes`` (the
query set, votes, accuracies, soft counts) and ``_planning`` (the memory
plan a dry run reports).
"""

from pate_jax.teachers._ensemble import DEFAULT_CHUNK, STRATEGIES, Ensemble, default_strategy
from pate_jax.teachers._planning import memory_plan
from pate_jax.teachers._sharding import (TEACHER_AXIS, PyTree, chunked_over_teachers,
                                         pad_leading, teacher_mesh)
from pate_jax.teachers._single import TeacherFns, random_shift
from pate_jax.teachers._training import build_ensemble, train_with_checkpoints
from pate_jax.teachers._votes import accuracy_of, compute_votes, query_set, soft_counts

__all__ = [
    "DEFAULT_CHUNK",
    "PyTree",
    "Ensemble",
    "STRATEGIES",
    "TEACHER_AXIS",
    "TeacherFns",
    "accuracy_of",
    "build_ensemble",
    "chunked_over_teachers",
    "compute_votes",
    "default_strategy",
    "memory_plan",
    "pad_leading",
    "query_set",
    "random_shift",
    "soft_counts",
    "teacher_mesh",
    "train_with_checkpoints",
]
