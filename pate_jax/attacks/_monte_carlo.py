"""Step 1 of the attack: query the aggregator M times with one input (Monte Carlo).

The attacker sends the same input ``M`` times and records the answers; the
frequencies ``q̄_k = (1/M) Σ_j [answer_j = k]`` estimate ``Q(H)`` (attack paper,
Section 3.2, Step 1 and Algorithm 2, lines 4-13). Here the aggregator is
:func:`pate_jax.aggregation.gnmax` or :func:`pate_jax.aggregation.confident_gnmax`
itself, called under ``jit`` with query ids ``0..M-1`` (query ``j`` draws its noise
from ``fold_in(key, j)``), so the simulation is the real mechanism, not a copy.
With Confident-GNMax only the answered queries are observed, so ``q̄`` is the
frequency among them.

``consistent=True`` gives every repeat of the input the same query id (as the
aggregator does when it derives ids from a hash of the input,
:func:`pate_jax.aggregation.hash_query_ids`): every repeat then gets the same
noise, hence the same answer -- the caching defense of the paper's Section 5.

Queries are drawn in chunks inside a ``lax.fori_loop`` (memory ``O(chunk · C)``
per histogram) and everything is ``vmap``-ped over histograms and noise scales.
"""

from __future__ import annotations

import functools
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from pate_jax import aggregation as agg
from pate_jax._compile import light_jit
from pate_jax import _checks as v

DEFAULT_CHUNK = 2048


def _counts_single(key, h, sigma, threshold, sigma_threshold, num_queries, *, max_queries,
                   chunk, consistent, confident):
  """Answer counts ``[C]`` and number answered for one histogram (pure jnp)."""
  c = h.shape[-1]
  num_chunks = -(-max_queries // chunk)
  votes = jnp.broadcast_to(h, (chunk, c))

  def body(i, carry):
    counts, answered = carry
    ids = i * chunk + jnp.arange(chunk, dtype=jnp.int32)
    valid = ids < num_queries
    qids = jnp.zeros((chunk,), jnp.uint32) if consistent else ids.astype(jnp.uint32)
    if confident:
      labels, ans = agg.confident_gnmax(key, votes, threshold, sigma_threshold, sigma, qids)
    else:
      labels = agg.gnmax(key, votes, sigma, qids)
      ans = jnp.ones((chunk,), bool)
    # one_hot of NOT_ANSWERED (-1) is all zeros.
    counts = counts + jnp.sum(jax.nn.one_hot(labels, c, dtype=jnp.int32) * valid[:, None], 0,
                              dtype=jnp.int32)
    answered = answered + jnp.sum(ans & valid, dtype=jnp.int32)
    return counts, answered

  init = (jnp.zeros((c,), jnp.int32), jnp.zeros((), jnp.int32))
  return jax.lax.fori_loop(0, num_chunks, body, init)


# A light (XLA:CPU optimisation level 1) jit: the threefry sampling program
# compiles in about a third of the time (1.1-1.4 s instead of 3-7 s here) and
# runs as fast.
@functools.partial(light_jit, static_argnames=("max_queries", "chunk", "consistent",
                                              "confident"), x64=True)  # float64 noise
def answer_counts_core(key, histograms, sigma, threshold, sigma_threshold, num_queries, *,
                       max_queries: int, chunk: int, consistent: bool, confident: bool):
  """``[B, C]`` histograms -> (counts int32 ``[B, C]``, answered int32 ``[B]``).

  Histogram ``b`` is answered by an aggregator keyed ``fold_in(key, b)``.
  """
  keys = jax.vmap(lambda b: jax.random.fold_in(key, b))(
      jnp.arange(histograms.shape[0], dtype=jnp.uint32))
  fn = functools.partial(_counts_single, max_queries=max_queries, chunk=chunk,
                         consistent=consistent, confident=confident)
  return jax.vmap(fn)(keys, histograms, sigma, threshold, sigma_threshold, num_queries)


def _prepare(histograms, named: dict[str, Any], num_queries):
  h = v.histograms(histograms)
  m = v.num_queries(num_queries)
  shapes = {"histograms[:-1]": np.shape(h)[:-1], "num_queries": m.shape}
  shapes.update({k: np.shape(x) for k, x in named.items()})
  batch = v.batch_shape(shapes)
  c = np.shape(h)[-1]
  dtype = jnp.float32
  hb = jnp.broadcast_to(jnp.asarray(h, dtype), batch + (c,)).reshape(-1, c)
  flat = {k: jnp.broadcast_to(jnp.asarray(x, dtype), batch).reshape(-1) for k, x in named.items()}
  mb = jnp.asarray(np.broadcast_to(m, batch).reshape(-1), jnp.int32)
  max_q = int(m.max())
  return hb, flat, mb, batch, c, max_q


def answer_counts(key: jax.Array, histograms: Any, sigma: Any, num_queries: Any, *,
                  threshold: Any = None, sigma_threshold: Any = None,
                  consistent: bool = False,
                  chunk_size: int = DEFAULT_CHUNK) -> tuple[jax.Array, jax.Array]:
  """Counts of the aggregator's answers to ``num_queries`` repeats of each input.

  GNMax when ``threshold`` is None, else Confident-GNMax (only answered queries
  are counted). See :func:`sample_answers` for the arguments.

  Returns:
    ``(counts int32 [..., C], num_answered int32 [...])``.
  """
  confident = threshold is not None
  if confident != (sigma_threshold is not None):
    raise ValueError("threshold and sigma_threshold must be given together, got "
                     f"threshold={threshold!r}, sigma_threshold={sigma_threshold!r}")
  v.positive_int(chunk_size, "chunk_size")
  named = {"sigma": v.positive_array(sigma, "sigma")}
  if confident:
    named["threshold"] = v.finite_array(threshold, "threshold")
    named["sigma_threshold"] = v.positive_array(sigma_threshold, "sigma_threshold")
  hb, flat, mb, batch, c, max_q = _prepare(histograms, named, num_queries)
  zeros = jnp.zeros_like(flat["sigma"])
  counts, answered = answer_counts_core(
      key, hb, flat["sigma"], flat.get("threshold", zeros), flat.get("sigma_threshold", zeros),
      mb, max_queries=max_q, chunk=min(int(chunk_size), max_q), consistent=bool(consistent),
      confident=confident)
  return counts.reshape(batch + (c,)), answered.reshape(batch)


def _frequencies(counts, answered):
  n = jnp.maximum(answered, 1)[..., None].astype(jnp.float32)
  return counts.astype(jnp.float32) / n


def sample_answers(key: jax.Array, histograms: Any, sigma: Any, num_queries: Any, *,
                   consistent: bool = False, chunk_size: int = DEFAULT_CHUNK) -> jax.Array:
  """Frequencies of GNMax answers to ``M`` repeated queries: ``q̄ ≈ Q(H)``.

  ``q̄_k = (1/M) Σ_{j<M} [argmax_i(H_i + σ z_ij) = k]``, ``z_ij ~ N(0, 1)`` drawn by
  :func:`pate_jax.aggregation.gnmax` from ``fold_in(fold_in(key, b), j)`` for
  histogram ``b`` (flattened batch index) and query ``j`` (attack paper,
  Section 3.2, Step 1).

  Args:
    key: PRNG key.
    histograms: ``[..., C]`` teacher vote counts (finite, ``>= 0``).
    sigma: GNMax noise ``σ > 0``, broadcastable with ``histograms.shape[:-1]``
      and ``num_queries`` (vectorises over histograms and σ).
    num_queries: ``M >= 1`` (int or int array, broadcastable as ``sigma``).
    consistent: every repeat gets the same query id (caching defense): all
      ``M`` answers are equal and ``q̄`` is one-hot.
    chunk_size: queries drawn per loop step.

  Returns:
    float32 ``q̄[broadcast batch, C]``; rows sum to 1.

  Raises:
    ValueError: bad histograms, σ ≤ 0, ``M <= 0``, shapes that do not broadcast.
  """
  counts, answered = answer_counts(key, histograms, sigma, num_queries,
                                   consistent=consistent, chunk_size=chunk_size)
  return _frequencies(counts, answered)


def sample_confident_answers(key: jax.Array, histograms: Any, threshold: Any,
                             sigma_threshold: Any, sigma: Any, num_queries: Any, *,
                             consistent: bool = False, chunk_size: int = DEFAULT_CHUNK
                             ) -> tuple[jax.Array, jax.Array]:
  """Frequencies of Confident-GNMax answers among the answered ones.

  Query ``j`` is answered iff ``max_i H_i + N(0, σ_T²) >= T`` (Papernot et al.
  2018, Algorithm 1; :func:`pate_jax.aggregation.confident_gnmax`); the attacker
  observes only the answered labels, so ``q̄ = counts / num_answered`` still
  estimates ``Q(H)`` (the answer noise is independent of the threshold noise),
  from fewer samples.

  Args:
    key: PRNG key.
    histograms: ``[..., C]`` vote counts.
    threshold: ``T`` (votes); ``sigma_threshold``: ``σ_T > 0``; ``sigma``: ``σ > 0``.
      All broadcastable with the batch.
    num_queries: queries sent, ``M >= 1``.
    consistent: caching defense (see :func:`sample_answers`).
    chunk_size: queries drawn per loop step.

  Returns:
    ``(q̄ float32 [..., C], num_answered int32 [...])``; ``q̄`` is all zeros where
    no query was answered.
  """
  counts, answered = answer_counts(key, histograms, sigma, num_queries, threshold=threshold,
                                   sigma_threshold=sigma_threshold, consistent=consistent,
                                   chunk_size=chunk_size)
  return _frequencies(counts, answered), answered
