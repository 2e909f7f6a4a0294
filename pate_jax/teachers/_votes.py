"""What a trained ensemble says about the queries: votes, accuracies, probabilities.

:func:`query_set` picks the query rows (the student split's public pool, then its
evaluation rows); :func:`compute_votes` plans the prediction, reduces the vote
histogram on the devices and brings the votes, each teacher's accuracy (and, for
distillation, the teachers' averaged probabilities, from the same pass over the teachers:
:func:`mean_probabilities`' values) to the host.
"""

from __future__ import annotations

import functools
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from pate_jax import _checks, data, distributed, memory
from pate_jax import votes as votes_lib
from pate_jax.teachers._ensemble import Ensemble, _temperatures
from pate_jax.teachers._sharding import PyTree, pad_leading
from pate_jax.teachers._single import TeacherFns


def query_set(ds: data.ImageDataset) -> tuple[np.ndarray, int]:
  """Rows of the test split of ``ds`` (a :class:`pate_jax.data.ImageDataset`) in
  student-split order (public pool, then evaluation), and the pool's size."""
  split = data.student_split(ds.name, len(ds.test_labels))
  return np.concatenate([split.pool_index, split.eval_index]), len(split.pool_index)


def mean_probabilities(fns: TeacherFns, params: PyTree, images: jax.Array,
                       temperatures: tuple[float, ...], num_teachers: int,
                       query_chunk: int = 1000) -> jax.Array:
  """The ensemble's averaged class probabilities at each temperature (distillation).

  ``mean_t softmax(logits_t(x) / T)`` over the first ``num_teachers`` teachers of
  ``params`` (padding excluded): float32 ``[len(temperatures), Q, C]``. One teacher
  and ``query_chunk`` queries at a time, so memory stays that of one prediction.
  :func:`compute_votes` gets the same values from its prediction pass instead
  (:meth:`pate_jax.teachers.Ensemble.predict_with_probabilities`).
  """
  temperatures = _temperatures(temperatures)
  if not temperatures:
    raise ValueError("temperatures must be positive, got none")
  _checks.positive_int(query_chunk, "query_chunk")
  params = jax.tree.map(lambda a: a[:num_teachers], params)
  images = jnp.asarray(images)
  padded, _ = pad_leading(images, query_chunk)
  chunks = padded.reshape(-1, query_chunk, *images.shape[1:])
  return _mean_probabilities(fns, temperatures, params, chunks)[:, :images.shape[0]]


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


def compute_votes(ensemble: Ensemble, state: PyTree, queries: jax.Array, labels: Any, *,
                  num_classes: int, num_teachers: int, query_chunk: int | None = None,
                  temperatures: tuple[float, ...] = (), return_predictions: bool = False
                  ) -> tuple[Any, ...]:
  """The trained ensemble's votes on ``queries [Q, H, W, C]``, on the host.

  Returns ``votes [Q, num_classes]`` (histogram of the first ``num_teachers``),
  each teacher's accuracy ``[num_teachers]`` against ``labels [Q]``, the averaged
  teacher probabilities ``[len(temperatures), Q, num_classes]`` at each distillation
  temperature (None without temperatures; not private), the prediction plan (None for
  the ``"loop"`` strategy; planned with ``state``'s optimizer state still allocated);
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
  # One pass over the teachers: their predictions and the distillation targets (which
  # carry no privacy guarantee: the distillation students are not private).
  preds, probs = ensemble.predict_with_probabilities(state["params"], queries, temperatures,
                                                     num_teachers, query_chunk, plan=plan)
  votes = distributed.to_host(votes_lib.histogram(preds, num_classes, num_teachers))
  if return_predictions:
    predictions = np.asarray(distributed.to_host(preds))[:num_teachers].astype(np.uint8)
    if num_classes > 256 or not np.array_equal(  # the stored predictions give these votes
        np.asarray(votes_lib.histogram(predictions, num_classes)), votes):
      raise AssertionError("the host predictions' histogram differs from the votes")
  accuracy = distributed.to_host(accuracy_of(preds, jnp.asarray(labels)))[:num_teachers]
  probs = None if probs is None else distributed.to_host(probs)
  if return_predictions:
    return votes, accuracy, probs, plan, predictions
  return votes, accuracy, probs, plan
