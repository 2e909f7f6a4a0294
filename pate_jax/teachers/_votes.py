"""What a trained ensemble says about the queries: votes, accuracies, soft counts.

:func:`query_set` picks the query rows (the student split's public pool, then its
evaluation rows); :func:`compute_votes` plans the prediction, reduces the vote
histogram on the devices and brings the votes, each teacher's accuracy (and, for
distillation and the KD-GAN's sound soft labels, the teachers' summed soft counts from the
same pass over the teachers: :func:`soft_counts`' values) to the host.
"""

from __future__ import annotations

import functools
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from pate_jax import _checks, data, distributed, memory
from pate_jax import votes as votes_lib
from pate_jax.teachers._ensemble import Ensemble, _temperatures, check_soft_count_total
from pate_jax.teachers._sharding import PyTree, pad_leading
from pate_jax.teachers._single import TeacherFns


def query_set(ds: data.ImageDataset) -> tuple[np.ndarray, int]:
  """Rows of the test split of ``ds`` (a :class:`pate_jax.data.ImageDataset`) in
  student-split order (public pool, then evaluation), and the pool's size."""
  split = data.student_split(ds.name, len(ds.test_labels))
  return np.concatenate([split.pool_index, split.eval_index]), len(split.pool_index)


def soft_counts(fns: TeacherFns, params: PyTree, images: jax.Array,
                temperatures: tuple[float, ...], num_teachers: int,
                query_chunk: int = 1000) -> jax.Array:
  """The ensemble's soft counts at each temperature (distillation, sound soft labels).

  ``sum_t soft_counts(softmax(logits_t(x) / T))`` (:func:`pate_jax.votes.soft_counts`)
  over the first ``num_teachers`` teachers of ``params`` (padding excluded): int32
  ``[len(temperatures), Q, C]``; divided by ``S T`` they are the averaged probabilities
  to within ``1/S`` per entry.
  One teacher and ``query_chunk`` queries at a time, so memory stays that of one
  prediction. :func:`compute_votes` gets the same values from its prediction pass instead
  (:meth:`pate_jax.teachers.Ensemble.predict_with_soft_counts`).
  """
  temperatures = _temperatures(temperatures)
  if not temperatures:
    raise ValueError("temperatures must be positive, got none")
  _checks.positive_int(query_chunk, "query_chunk")
  check_soft_count_total(_checks.positive_int(num_teachers, "num_teachers"))
  params = jax.tree.map(lambda a: a[:num_teachers], params)
  images = jnp.asarray(images)
  padded, _ = pad_leading(images, query_chunk)
  chunks = padded.reshape(-1, query_chunk, *images.shape[1:])
  return _soft_counts(fns, temperatures, params, chunks)[:, :images.shape[0]]


@functools.partial(jax.jit, static_argnums=(0, 1))
def _soft_counts(fns: TeacherFns, temperatures: tuple[float, ...], params: PyTree,
                 chunks: jax.Array) -> jax.Array:
  temps = jnp.asarray(temperatures, jnp.float32)[:, None, None]

  def counts(p):
    logits = jax.lax.map(lambda x: fns.model.apply(p, x), chunks)  # [n, chunk, C]
    return votes_lib.soft_counts(
        jax.nn.softmax(logits.reshape(-1, logits.shape[-1])[None] / temps, axis=-1))

  first = jax.tree.map(lambda a: a[0], params)
  total, _ = jax.lax.scan(lambda acc, p: (acc + counts(p), None),
                          jnp.zeros(jax.eval_shape(counts, first).shape, jnp.int32), params)
  return total


@jax.jit
def accuracy_of(predictions: jax.Array, labels: jax.Array) -> jax.Array:
  """Per-teacher accuracy ``[T']`` of ``predictions [T', Q]`` against ``labels [Q]``."""
  return (predictions == labels[None]).mean(axis=1)


def compute_votes(ensemble: Ensemble, state: PyTree, queries: jax.Array, labels: Any, *,
                  num_classes: int, num_teachers: int, query_chunk: int | None = None,
                  temperatures: tuple[float, ...] = (), return_predictions: bool = False
                  ) -> tuple[Any, ...]:
  """The trained ensemble's votes on ``queries [Q, H, W, C]``, on the host.

  Returns ``votes [Q, num_classes]`` (histogram of the first ``num_teachers``),
  each teacher's accuracy ``[num_teachers]`` against ``labels [Q]``, the teachers' soft
  counts int32 ``[len(temperatures), Q, num_classes]`` at each distillation temperature
  (:func:`soft_counts`; None without temperatures; private, as the votes), the prediction
  plan (None for the ``"loop"`` strategy; planned with ``state``'s optimizer state still
  allocated);
  with ``return_predictions``, fifth, each teacher's predicted class ``[num_teachers, Q]``
  (uint8, padding excluded; checked to give ``votes``), which ``votes.npz`` stores for
  ablations over teacher subsets (pate_jax.ablation).
  """
  plan = None
  if ensemble.strategy != "loop":
    plan = ensemble.plan_predict(  # the optimizer state stays allocated meanwhile
        state["params"], queries, query_chunk,
        resident_bytes=memory.tree_bytes(state["opt_state"]) // ensemble.num_shards,
        temperatures=temperatures)
  # One pass over the teachers: their predictions and soft counts (the distillation
  # targets and the sound soft labels' integer query).
  preds, counts = ensemble.predict_with_soft_counts(state["params"], queries, temperatures,
                                                    num_teachers, query_chunk, plan=plan)
  votes = distributed.to_host(votes_lib.histogram(preds, num_classes, num_teachers))
  if return_predictions:
    predictions = np.asarray(distributed.to_host(preds))[:num_teachers].astype(np.uint8)
    if num_classes > 256 or not np.array_equal(  # the stored predictions give these votes
        np.asarray(votes_lib.histogram(predictions, num_classes)), votes):
      raise AssertionError("the host predictions' histogram differs from the votes")
  accuracy = distributed.to_host(accuracy_of(preds, jnp.asarray(labels)))[:num_teachers]
  counts = None if counts is None else distributed.to_host(counts)
  if return_predictions:
    return votes, accuracy, counts, plan, predictions
  return votes, accuracy, counts, plan
