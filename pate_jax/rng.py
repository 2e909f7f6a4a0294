"""Named PRNG streams: one root key per run, one fixed table of stream ids.

Every stage of every experiment derives its randomness from the run's root key
as ``stream(root, name) = fold_in(root, STREAMS_BASE + STREAMS[name])``, and
below that as the code documents (teachers by ``split(k, T)``, steps by
``fold_in(k_t, step)``, queries by ``fold_in(k, query_id)``). With one table
there is one place where two stages could be handed the same key, and
``tests/test_rng.py`` checks that the keys of all streams, and their
per-teacher / per-query / per-step children, are disjoint.

Why the ids are offset by ``STREAMS_BASE = 2**31``: with JAX's partitionable
threefry (the default) ``split(k, n)[i] == fold_in(k, i)``, so a library call
handed a root key itself -- e.g. ``jax.random.permutation(key(0), n)`` in
:func:`pate_jax.data.student_split`, whose fixed seed 0 is also the default run
seed -- draws from ``fold_in(root, 0)``, ``fold_in(root, 1)``, ... Small stream
ids would hand those keys to stages too; ids at ``2**31`` and above do not.

The defect this replaces: teacher initialisation and aggregation noise both
folded stream 1 into the same root, so teacher ``t``'s initialisation key was
the noise key of query ``t`` (``split(fold_in(root, 1), T)[t] ==
fold_in(fold_in(root, 1), t)``).

Example::

  root = rng.root_key(config.seed)
  init_keys = jax.random.split(rng.stream(root, "teacher_init"), num_teachers)
  noise_key = rng.stream(root, "aggregation")  # query i: fold_in(noise_key, id_i)
"""

from __future__ import annotations

import operator
import types
from typing import Mapping

import jax

STREAMS_BASE = 2**31
"""Offset of every stream id (see the module docstring)."""

STREAMS: Mapping[str, int] = types.MappingProxyType({
    # The main job (teachers -> aggregation -> student), all from one root seed.
    "partition": 0,       # disjoint shards of the private training data
    "teacher_init": 1,    # split(k, T)[t]: teacher t's parameters
    "teacher_train": 2,   # split(k, T)[t], then fold_in(., step): minibatch, augmentation
    "aggregation": 3,     # fold_in(k, query_id): the noisy answer to each query
    "student_init": 4,    # student parameters (tabular: the student forests' seeds)
    "student_train": 5,   # student steps: fold_in(k, step)
    "student_data": 6,    # the student's own draws from the public pool
    # Tabular PATE and the attacks.
    "data_split": 7,      # train / query split of a tabular dataset
    "baseline": 8,        # the non-private model on all training data
    "teachers": 9,        # an ensemble fitted from one key (shards and per-teacher seeds)
    "attack_answers": 10,  # Monte Carlo answers of the simulated mechanism, per repetition
    "attack_ledger": 11,  # the real PrivateAggregator the attacker queries
    "attack_sample": 12,  # which individuals / rows the attacker draws
    "bench_data": 13,     # synthetic inputs of the benchmarks
    "epsilon_release": 14,  # noise of the smooth-sensitivity release of a data-dependent ε
})
"""Stream name -> id (offset by :data:`STREAMS_BASE`). Append; never reuse an id."""


def stream_id(name: str) -> int:
  """The ``uint32`` folded into the root key for stream ``name``.

  Args:
    name: a key of :data:`STREAMS`.

  Returns:
    ``STREAMS_BASE + STREAMS[name]``.

  Raises:
    ValueError: ``name`` is not a stream.
  """
  if name not in STREAMS:
    raise ValueError(f"name: unknown PRNG stream {name!r}; known: {sorted(STREAMS)}")
  return STREAMS_BASE + STREAMS[name]


def root_key(seed: int) -> jax.Array:
  """The run's root key ``jax.random.key(seed)``; ``seed`` an integer in ``[0, 2**32)``.

  Raises:
    ValueError: ``seed`` is not such an integer (a bool, a float, negative, too large).
  """
  try:
    value = operator.index(seed)
  except TypeError:
    value = None
  if value is None or isinstance(seed, bool) or not 0 <= value < 2**32:
    raise ValueError(f"seed must be an integer in [0, 2**32), got {seed!r}")
  return jax.random.key(value)


def stream(root: jax.Array, name: str) -> jax.Array:
  """The key of stream ``name``: ``fold_in(root, stream_id(name))``.

  Args:
    root: the run's root key (:func:`root_key`).
    name: a key of :data:`STREAMS`.

  Returns:
    A key of the same shape and implementation as ``root``.
  """
  return jax.random.fold_in(root, stream_id(name))
