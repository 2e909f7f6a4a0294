"""Noisy aggregation of teacher votes: LNMax, GNMax, Confident-GNMax, plurality.

Every aggregator maps a vote histogram ``votes[Q, C]`` (per-class teacher
counts, see :mod:`pate_jax.votes`) to labels ``[Q]`` (int32). They are pure
``jnp``, jit-compiled and vectorised over queries.

Randomness is per query: the noise of query ``i`` is drawn from
``fold_in(key, query_ids[i])`` (``query_ids`` defaults to ``arange(Q)``), so an
answer depends only on ``(key, query id, votes row)`` and not on the batch it is
asked in, its position in that batch, or the batch size. Query ids are uint32,
either one word per query (shape ``[Q]``) or several words (shape ``[Q, W]``,
folded in one after the other; :func:`hash_query_ids` returns ``W = 2``, a 64-bit
hash). Passing a stable hash of the query *input* as its id gives the
"consistent answers" defense suggested against histogram-extraction attacks
(Pate-histogram-leakage paper, Section 5): asking the same input again returns
the same label, so repeated queries reveal nothing new.

The public functions validate their inputs (``ValueError`` naming the argument
and the bad value) when the inputs are concrete and then call a jitted core;
under an outer ``jit``/``vmap`` only shapes are checked.

References:
  Papernot et al. 2017, "Semi-supervised Knowledge Transfer for Deep Learning
  from Private Training Data" (ICLR), Section 2.1 (LNMax).
  Papernot et al. 2018, "Scalable Private Learning with PATE" (ICLR),
  Section 4.1 (GNMax, Confident-GNMax).
"""

from __future__ import annotations

import hashlib
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from pate_jax._checks import is_traced as _is_traced
from pate_jax._compile import light_jit

__all__ = [
    "lnmax", "gnmax", "confident_gnmax", "plurality", "hash_query_ids",
    "label_accuracy_grid", "NOT_ANSWERED",
]

# Label returned by Confident-GNMax for a query that failed the threshold check.
NOT_ANSWERED = -1

# Noise is always drawn in float32 so that answers are bit-identical whether or
# not the caller has 64-bit mode enabled (the ledger runs under local x64).
_NOISE_DTYPE = jnp.float32


# ---------------------------------------------------------------------------
# Validation (host side, concrete inputs only).


def check_votes(votes: Any, name: str = "votes") -> Any:
  """Validates a vote histogram ``[Q, C]``; returns it as a numpy array (tracers unchanged).

  Raises:
    ValueError: if ``votes`` is not 2-D, has no query, fewer than 2 classes, or
      (when concrete) holds NaN, negative or non-integer counts.
  """
  if _is_traced(votes):
    if votes.ndim != 2 or votes.shape[0] < 1 or votes.shape[1] < 2:
      raise ValueError(f"{name} must have shape [Q >= 1, C >= 2], got {votes.shape}")
    return votes
  arr = np.asarray(votes)
  if arr.ndim != 2:
    raise ValueError(f"{name} must have shape [Q, C], got shape {arr.shape}")
  if arr.shape[0] < 1:
    raise ValueError(f"{name} must hold at least one query, got shape {arr.shape}")
  if arr.shape[1] < 2:
    raise ValueError(f"{name} must have at least 2 classes, got shape {arr.shape}")
  if arr.dtype == bool or not (np.issubdtype(arr.dtype, np.integer)
                               or np.issubdtype(arr.dtype, np.floating)):
    raise ValueError(f"{name} must be an integer array of counts, got dtype {arr.dtype}")
  if np.issubdtype(arr.dtype, np.floating):
    bad = ~np.isfinite(arr)
    if bad.any():
      raise ValueError(f"{name} must be finite, got {arr[bad][0]} at "
                       f"{tuple(np.argwhere(bad)[0])}")
    frac = arr != np.round(arr)
    if frac.any():
      raise ValueError(f"{name} must hold integer counts, got {arr[frac][0]} at "
                       f"{tuple(np.argwhere(frac)[0])}")
  neg = arr < 0
  if neg.any():
    raise ValueError(f"{name} must be non-negative, got {arr[neg][0]} at "
                     f"{tuple(np.argwhere(neg)[0])}")
  return arr


def check_positive(value: Any, name: str) -> Any:
  """Raises ``ValueError`` unless ``value`` is a finite real scalar > 0."""
  if _is_traced(value):
    return value
  arr = np.asarray(value)
  if arr.ndim != 0 or not np.issubdtype(arr.dtype, np.number) or np.iscomplexobj(arr):
    raise ValueError(f"{name} must be a real scalar, got {value!r}")
  if not np.isfinite(arr) or arr <= 0:
    raise ValueError(f"{name} must be finite and > 0, got {value!r}")
  return value


def _check_finite_scalar(value: Any, name: str) -> Any:
  if _is_traced(value):
    return value
  arr = np.asarray(value)
  if arr.ndim != 0 or not np.issubdtype(arr.dtype, np.number) or not np.isfinite(arr):
    raise ValueError(f"{name} must be a finite real scalar, got {value!r}")
  return value


def check_query_ids(query_ids: Any, num_queries: int, name: str = "query_ids") -> Any:
  """Validates query ids (``[Q]`` or ``[Q, W]`` integers in ``[0, 2**32)``) as uint32.

  ``None`` gives ``arange(num_queries)``. Returns numpy (tracers are cast in jnp).
  """
  if query_ids is None:
    return np.arange(num_queries, dtype=np.uint32)
  if _is_traced(query_ids):
    if query_ids.ndim not in (1, 2) or query_ids.shape[0] != num_queries:
      raise ValueError(f"{name} must have shape [{num_queries}] or [{num_queries}, W], "
                       f"got {query_ids.shape}")
    return query_ids.astype(jnp.uint32)
  arr = np.asarray(query_ids)
  if arr.ndim not in (1, 2) or arr.shape[0] != num_queries or (arr.ndim == 2
                                                                and arr.shape[1] < 1):
    raise ValueError(f"{name} must have shape [{num_queries}] or [{num_queries}, W], "
                     f"got shape {arr.shape}")
  if not np.issubdtype(arr.dtype, np.integer):
    raise ValueError(f"{name} must be integers, got dtype {arr.dtype}")
  if arr.size and (arr.min() < 0 or arr.max() > np.iinfo(np.uint32).max):
    bad = arr[(arr < 0) | (arr > np.iinfo(np.uint32).max)][0]
    raise ValueError(f"{name} must lie in [0, 2**32), got {bad}")
  return arr.astype(np.uint32)


def check_labels(labels: Any, num_queries: int, num_classes: int,
                 name: str = "labels") -> Any:
  """Validates true labels ``[Q]`` with values in ``[0, C)``."""
  if _is_traced(labels):
    return labels
  arr = np.asarray(labels)
  if arr.shape != (num_queries,):
    raise ValueError(f"{name} must have shape [{num_queries}], got {arr.shape}")
  if not np.issubdtype(arr.dtype, np.integer):
    raise ValueError(f"{name} must be integers, got dtype {arr.dtype}")
  bad = (arr < 0) | (arr >= num_classes)
  if bad.any():
    raise ValueError(f"{name} must lie in [0, {num_classes}), got {arr[bad][0]}")
  return arr.astype(np.int32)


# ---------------------------------------------------------------------------
# Jitted cores.


def query_keys(key: jax.Array, query_ids: jax.Array) -> jax.Array:
  """Per-query keys ``[Q]``: ``fold_in`` of each id word into ``key``, in order."""
  ids = query_ids if query_ids.ndim == 2 else query_ids[:, None]

  def one(words):
    k = key
    for w in range(ids.shape[1]):
      k = jax.random.fold_in(k, words[w])
    return k

  return jax.vmap(one)(ids)


def _lnmax_core(key, votes, gamma, query_ids):
  keys = query_keys(key, query_ids)
  noise = jax.vmap(lambda k: jax.random.laplace(k, votes.shape[1:], _NOISE_DTYPE))(keys)
  scores = votes.astype(_NOISE_DTYPE) + noise / jnp.asarray(gamma, _NOISE_DTYPE)
  return jnp.argmax(scores, axis=-1).astype(jnp.int32)


def _gnmax_core(key, votes, sigma, query_ids):
  keys = query_keys(key, query_ids)
  noise = jax.vmap(lambda k: jax.random.normal(k, votes.shape[1:], _NOISE_DTYPE))(keys)
  scores = votes.astype(_NOISE_DTYPE) + jnp.asarray(sigma, _NOISE_DTYPE) * noise
  return jnp.argmax(scores, axis=-1).astype(jnp.int32)


def _confident_gnmax_core(key, votes, threshold, sigma_threshold, sigma, query_ids):
  keys = query_keys(key, query_ids)
  votes = votes.astype(_NOISE_DTYPE)

  def one(k, row):
    k_threshold, k_answer = jax.random.split(k)
    noisy_max = row.max() + (jnp.asarray(sigma_threshold, _NOISE_DTYPE)
                             * jax.random.normal(k_threshold, (), _NOISE_DTYPE))
    answered = noisy_max >= jnp.asarray(threshold, _NOISE_DTYPE)
    scores = row + (jnp.asarray(sigma, _NOISE_DTYPE)
                    * jax.random.normal(k_answer, row.shape, _NOISE_DTYPE))
    label = jnp.argmax(scores).astype(jnp.int32)
    return jnp.where(answered, label, NOT_ANSWERED), answered

  return jax.vmap(one)(keys, votes)


_lnmax = light_jit(_lnmax_core)
_gnmax = light_jit(_gnmax_core)
_confident_gnmax = light_jit(_confident_gnmax_core)


@jax.jit
def _plurality(votes):
  return jnp.argmax(votes, axis=-1).astype(jnp.int32)


# ---------------------------------------------------------------------------
# Public aggregators.


def lnmax(key: jax.Array, votes: Any, gamma: Any, query_ids: Any = None) -> jax.Array:
  """Laplace noisy max (LNMax): ``argmax_j(n_j + Lap(1/gamma))`` per query.

  Each answer is ``(2 gamma, 0)``-DP when one teacher changes its vote (two
  counts change by 1); Papernot et al. 2017, Eq. (1) and Theorem 3.

  Args:
    key: PRNG key.
    votes: int ``[Q, C]`` per-class teacher counts.
    gamma: inverse Laplace scale, > 0 (the 2017 MNIST setting is 0.05).
    query_ids: uint32 ``[Q]`` or ``[Q, W]``; the noise of query ``i`` comes from
      ``fold_in(key, query_ids[i])``. Defaults to ``arange(Q)``.

  Returns:
    int32 ``[Q]`` labels.
  """
  votes = check_votes(votes)
  check_positive(gamma, "gamma")
  ids = check_query_ids(query_ids, votes.shape[0])
  return _lnmax(key, votes, gamma, ids)


def gnmax(key: jax.Array, votes: Any, sigma: Any, query_ids: Any = None) -> jax.Array:
  """Gaussian noisy max (GNMax): ``argmax_j(n_j + N(0, sigma^2))`` per query.

  Papernot et al. 2018, Section 4.1; each answer is ``(lambda, lambda / sigma^2)``-RDP,
  with tighter data-dependent bounds in ``pate_jax.accounting``.

  Args:
    key: PRNG key.
    votes: int ``[Q, C]`` per-class teacher counts.
    sigma: Gaussian noise standard deviation, > 0.
    query_ids: as in :func:`lnmax`.

  Returns:
    int32 ``[Q]`` labels.
  """
  votes = check_votes(votes)
  check_positive(sigma, "sigma")
  ids = check_query_ids(query_ids, votes.shape[0])
  return _gnmax(key, votes, sigma, ids)


def confident_gnmax(key: jax.Array, votes: Any, threshold: Any, sigma_threshold: Any,
                    sigma: Any, query_ids: Any = None) -> tuple[jax.Array, jax.Array]:
  """Confident-GNMax: answer with GNMax only where the noisy top count passes a threshold.

  Query ``i`` is answered iff ``max_j n_ij + N(0, sigma_threshold^2) >= threshold``;
  then its label is ``argmax_j(n_ij + N(0, sigma^2))``, else ``NOT_ANSWERED`` (-1).
  The two noises come from ``split(fold_in(key, query_ids[i]))``. Papernot et al.
  2018, Section 4.1.

  Args:
    key: PRNG key.
    votes: int ``[Q, C]`` per-class teacher counts, every row summing to the
      number of teachers.
    threshold: the threshold ``T`` on the noisy plurality count (a real number).
    sigma_threshold: std of the threshold noise ``sigma_1``, > 0.
    sigma: std of the answer noise ``sigma_2``, > 0.
    query_ids: as in :func:`lnmax`.

  Returns:
    ``(labels, answered)``: int32 ``[Q]`` labels (-1 where not answered) and
    bool ``[Q]``.
  """
  votes = check_votes(votes)
  if not _is_traced(votes):  # The threshold is a number of teachers: one per row.
    totals = votes.sum(axis=1)
    if not np.all(totals == totals[0]):
      i = int(np.argmax(totals != totals[0]))
      raise ValueError(f"votes: every row must sum to the number of teachers; row 0 sums to "
                       f"{totals[0]} but row {i} sums to {totals[i]}")
  _check_finite_scalar(threshold, "threshold")
  check_positive(sigma_threshold, "sigma_threshold")
  check_positive(sigma, "sigma")
  ids = check_query_ids(query_ids, votes.shape[0])
  return _confident_gnmax(key, votes, threshold, sigma_threshold, sigma, ids)


def plurality(votes: Any) -> jax.Array:
  """Noise-free plurality ``argmax_j n_j`` (first index on ties), int32 ``[Q]``."""
  return _plurality(check_votes(votes))


# ---------------------------------------------------------------------------
# Consistent answers: query ids from the query inputs.


def hash_query_ids(inputs: Any, words: int = 2) -> np.ndarray:
  """Stable ids of query inputs: a keyless BLAKE2b hash of each row's bytes.

  Row ``i`` of ``inputs`` (any shape ``[Q, ...]``) is hashed together with its
  dtype and shape, in little-endian C order, to ``32 * words`` bits returned as
  uint32 words. Equal rows (same bytes, dtype and shape) get equal ids, in any
  process and on any machine, so with ``fold_in(key, id)`` noise a repeated input
  gets the same noisy answer. Hash the canonical form the teachers see
  (e.g. the uint8 image, not a float copy), since ``-0.0 != 0.0`` bytewise.
  Two words (64 bits) keep collisions negligible (about ``Q^2 / 2^65``); one
  word collides with probability about ``Q^2 / 2^33`` (1 % at ``Q = 10^4``).

  Args:
    inputs: array ``[Q, ...]`` of query inputs (host data).
    words: number of uint32 words per id (1 to 16).

  Returns:
    numpy uint32 ``[Q, words]``.
  """
  if not isinstance(words, (int, np.integer)) or isinstance(words, bool) or not 1 <= words <= 16:
    raise ValueError(f"words must be an integer in [1, 16], got {words!r}")
  arr = np.asarray(inputs)
  if arr.ndim < 1:
    raise ValueError(f"inputs must have a leading query axis, got shape {arr.shape}")
  if arr.dtype == object:
    raise ValueError("inputs must be a numeric array, got dtype object")
  arr = np.ascontiguousarray(arr.astype(arr.dtype.newbyteorder("<"), copy=False))
  header = f"{arr.dtype.str}|{arr.shape[1:]}|".encode()
  out = np.empty((arr.shape[0], words), np.uint32)
  for i in range(arr.shape[0]):
    digest = hashlib.blake2b(header + arr[i].tobytes(), digest_size=4 * words,
                             person=b"pate_jax.qid").digest()
    out[i] = np.frombuffer(digest, "<u4")
  return out


# ---------------------------------------------------------------------------
# Vectorised ablations.

_GRID_MECHANISMS = {"lnmax": _lnmax_core, "gnmax": _gnmax_core}


def _accuracy_grid_core(key, votes, labels, noise_scales, mechanism, num_seeds):
  aggregate = _GRID_MECHANISMS[mechanism]
  ids = jnp.arange(votes.shape[0], dtype=jnp.uint32)
  seed_keys = jax.vmap(lambda s: jax.random.fold_in(key, s))(
      jnp.arange(num_seeds, dtype=jnp.uint32))

  def accuracy(scale, k):
    return jnp.mean(aggregate(k, votes, scale, ids) == labels)

  over_seeds = jax.vmap(accuracy, in_axes=(None, 0))
  return jax.vmap(over_seeds, in_axes=(0, None))(noise_scales, seed_keys)


_accuracy_grid = light_jit(_accuracy_grid_core, static_argnames=("mechanism", "num_seeds"))


def label_accuracy_grid(key: jax.Array, votes: Any, labels: Any, mechanism: str,
                        noise_scales: Any, num_seeds: int) -> jax.Array:
  """Accuracy of noisy labels for a grid of noise scales and seeds, in one compiled call.

  ``accuracy[s, r] = mean_i [agg(fold_in(key, r), votes, noise_scales[s])_i == labels_i]``
  with ``agg`` = :func:`lnmax` (scales are ``gamma``, per-query ``eps = 2 gamma``)
  or :func:`gnmax` (scales are ``sigma``), query ids ``arange(Q)``. Seed ``r``
  uses the same key at every scale (common random numbers), so curves over the
  scale are smooth. Both grid axes are ``vmap``-ed; memory is about
  ``S * num_seeds * Q * C`` floats. This is Figure 2 of Papernot et al. 2017.

  Args:
    key: PRNG key.
    votes: int ``[Q, C]``.
    labels: int ``[Q]`` true labels in ``[0, C)``.
    mechanism: ``"lnmax"`` or ``"gnmax"``.
    noise_scales: ``[S]`` values of gamma (LNMax) or sigma (GNMax), all > 0.
    num_seeds: number of independent noise draws per scale.

  Returns:
    float32 ``[S, num_seeds]`` accuracies.
  """
  if mechanism not in _GRID_MECHANISMS:
    raise ValueError(f"mechanism must be one of {sorted(_GRID_MECHANISMS)}, got {mechanism!r}")
  if (not isinstance(num_seeds, (int, np.integer)) or isinstance(num_seeds, bool)
      or num_seeds < 1):
    raise ValueError(f"num_seeds must be a positive integer, got {num_seeds!r}")
  votes = check_votes(votes)
  labels = check_labels(labels, votes.shape[0], votes.shape[1])
  scales = np.asarray(noise_scales, dtype=np.float64)
  name = "gamma" if mechanism == "lnmax" else "sigma"
  if scales.ndim != 1 or scales.size < 1:
    raise ValueError(f"noise_scales must be a non-empty 1-D array, got shape {scales.shape}")
  bad = ~np.isfinite(scales) | (scales <= 0)
  if bad.any():
    raise ValueError(f"noise_scales ({name}) must be finite and > 0, got {scales[bad][0]}")
  return _accuracy_grid(key, votes, labels, scales.astype(np.float32), mechanism=mechanism,
                        num_seeds=int(num_seeds))
