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
under an outer ``jit``/``vmap`` only shapes are checked, and the noisy aggregators need
that trace in 64-bit mode (their noise is float64, :mod:`pate_jax.mechanisms`; refused
otherwise). Every row of ``votes`` must sum to the same number of teachers ``T`` (the
privacy analysis moves one vote of a row of ``T``), at most ``2**24`` for the noisy
aggregators (float32's exact integers) and ``2**31 - 1`` for :func:`plurality` (int32
counts).

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

from pate_jax import _checks as v
from pate_jax import mechanisms
from pate_jax._compile import light_jit

__all__ = [
    "answer", "lnmax", "gnmax", "confident_gnmax", "plurality", "hash_query_ids",
    "label_accuracy_grid", "NOT_ANSWERED",
]

# Label returned by Confident-GNMax for a query that failed the threshold check.
NOT_ANSWERED = mechanisms.NOT_ANSWERED


# ---------------------------------------------------------------------------
# Jitted cores: the registry's answer functions (pate_jax.mechanisms).


def _answer_core(key, votes, query_ids, params, *, mechanism):
  return mechanisms.get(mechanism).answer(key, votes, query_ids, params)


_answer = light_jit(_answer_core, static_argnames=("mechanism",), x64=True)  # float64 noise


@jax.jit
def _plurality(votes):
  return jnp.argmax(votes, axis=-1).astype(jnp.int32)


def _answer_checked(mechanism: Any, key: jax.Array, votes: Any, params: dict[str, Any],
                    query_ids: Any) -> tuple[jax.Array, jax.Array]:
  """Validates the arguments of a registered mechanism and answers (one jitted call)."""
  m = mechanisms.get(mechanism)
  votes = v.votes(votes, equal_totals=m.equal_totals, max_total=mechanisms.MAX_TEACHERS)
  mechanisms.check_params(m, params)  # The values go to the core as given (cast there).
  ids = v.query_ids(query_ids, votes.shape[0])
  traced = any(v.is_traced(x) for x in (key, votes, ids, *params.values()))
  if traced and jax.dtypes.canonicalize_dtype(jnp.float64) != jnp.float64:
    raise ValueError("the answers draw float64 noise (pate_jax.mechanisms): inside a jit or "
                     "vmap of your own, trace it under jax.enable_x64(True)")
  return _answer(key, votes, ids, params, mechanism=m.name)


# ---------------------------------------------------------------------------
# Public aggregators.


def answer(mechanism: mechanisms.Mechanism, key: jax.Array, votes: Any,
           params: dict[str, Any], query_ids: Any = None) -> tuple[jax.Array, jax.Array]:
  """Any registered mechanism's answers: ``(labels int32 [Q], answered bool [Q])``.

  ``labels`` is ``NOT_ANSWERED`` where a query was not answered (Confident-GNMax below
  its threshold). ``params`` are exactly the mechanism's (``mechanism.param_names``);
  ``query_ids`` as in :func:`lnmax`. :func:`lnmax`, :func:`gnmax` and
  :func:`confident_gnmax` are this function with their parameters spelled out.
  """
  return _answer_checked(mechanism, key, votes, params, query_ids)


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
  return _answer_checked(mechanisms.LNMAX, key, votes, {"gamma": gamma}, query_ids)[0]


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
  return _answer_checked(mechanisms.GNMAX, key, votes, {"sigma": sigma}, query_ids)[0]


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
  params = {"threshold": threshold, "sigma_threshold": sigma_threshold, "sigma": sigma}
  return _answer_checked(mechanisms.CONFIDENT_GNMAX, key, votes, params, query_ids)


def plurality(votes: Any) -> jax.Array:
  """Noise-free plurality ``argmax_j n_j`` (first index on ties), int32 ``[Q]``."""
  return _plurality(v.votes(votes))


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

def _accuracy_grid_core(key, votes, labels, noise_scales, mechanism, num_seeds):
  m = mechanisms.get(mechanism)
  ids = jnp.arange(votes.shape[0], dtype=jnp.uint32)
  seed_keys = jax.vmap(lambda s: jax.random.fold_in(key, s))(
      jnp.arange(num_seeds, dtype=jnp.uint32))

  def accuracy(scale, k):
    labels_k, _ = m.answer(k, votes, ids, {m.noise_param: scale})
    return jnp.mean(labels_k == labels)

  over_seeds = jax.vmap(accuracy, in_axes=(None, 0))
  return jax.vmap(over_seeds, in_axes=(0, None))(noise_scales, seed_keys)


_accuracy_grid = light_jit(_accuracy_grid_core, static_argnames=("mechanism", "num_seeds"),
                           x64=True)  # float64 noise


def label_accuracy_grid(key: jax.Array, votes: Any, labels: Any, mechanism: Any,
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
    mechanism: a registered mechanism with one parameter (:data:`mechanisms.LNMAX`,
      :data:`mechanisms.GNMAX`) or its name.
    noise_scales: ``[S]`` values of its noise parameter (``mechanism.noise_param``:
      gamma for LNMax, sigma for GNMax), all > 0.
    num_seeds: number of independent noise draws per scale.

  Returns:
    float32 ``[S, num_seeds]`` accuracies.
  """
  m = mechanisms.get(mechanism)
  if len(m.params) != 1:
    raise ValueError(f"mechanism must have one (noise) parameter; {m.name!r} has "
                     f"{m.param_names}")
  num_seeds = v.positive_int(num_seeds, "num_seeds")
  votes = v.votes(votes)
  labels = v.labels(labels, votes.shape[0], votes.shape[1])
  scales = v.positive_vector(noise_scales, f"noise_scales ({m.noise_param})", "noise scales")
  return _accuracy_grid(key, votes, labels, scales.astype(np.float64), mechanism=m.name,
                        num_seeds=int(num_seeds)).astype(jnp.float32)
