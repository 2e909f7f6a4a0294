"""Monte Carlo evaluation of the attack: sample answers, reconstruct, measure the error.

One evaluation of the attack paper (Section 4.1, "Metrics") is: the attacker
sends ``M`` repeats of a query whose private histogram is ``H``, turns the
answers into frequencies ``q̄`` (Step 1), reconstructs ``Ĥ`` from ``q̄`` (Steps
2-3) and is scored by the normalised L1 error ``Σ|H - Ĥ| / (2 Σ|H|)``. Each
repetition ``r`` of the experiment is a PRNG key of a stack ``keys[R]``; the
functions here return the ``R`` runs stacked on a leading axis.

Runs are *not* ``vmap``-ped over keys, on purpose: the sampler is compiled with a
light XLA:CPU optimisation level only when called at top level
(:class:`pate_jax._compile.light_jit`), so a ``vmap`` would compile it at the full
level (measured: +2 s on the fixed setting, +6 s on the budget one); and the
reconstruction's batched ``while_loop`` is vectorised by XLA according to the
batch size, which can move float32 results by an ulp. One call per run reuses
one compiled program for every run and keeps each run's result independent of ``R``.
"""

from __future__ import annotations

from typing import Any, Mapping, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from scipy import stats

from pate_jax.attacks import _monte_carlo as mc
from pate_jax.attacks import _reconstruct as rc
from pate_jax import _checks as v


def seed_keys(key: jax.Array, num_seeds: int) -> jax.Array:
  """Keys of ``num_seeds`` Monte Carlo repetitions: ``[fold_in(key, r) for r < R]``, ``[R]``."""
  v.positive_int(num_seeds, "num_seeds")
  return jax.vmap(lambda r: jax.random.fold_in(key, r))(jnp.arange(num_seeds, dtype=jnp.uint32))


def answer_frequencies(counts: Any, num_answered: Any) -> np.ndarray:
  """``q̄ = counts / num_answered`` per row; uniform ``1/C`` where nothing was answered.

  A row without a single answer (Confident-GNMax refused every query) tells the
  attacker nothing, so the reconstruction starts from the uniform guess. The
  quotient is taken in float64 and rounded once to float32 (exactly rounded for
  integer counts below ``2**24``).

  Args:
    counts: ``[..., C]`` answer counts.
    num_answered: ``[...]`` answered queries per row (the row sums of ``counts``).

  Returns:
    float32 numpy ``[..., C]``, rows summing to 1.
  """
  counts = np.asarray(counts, np.float64)
  n = np.asarray(num_answered)[..., None]
  c = counts.shape[-1]
  return np.where(n > 0, counts / np.maximum(n, 1), 1.0 / c).astype(np.float32)


def sample_counts(keys: jax.Array, histograms: Any, sigma: Any, num_queries: Any, *,
                  threshold: Any = None, sigma_threshold: Any = None,
                  consistent: bool = False) -> tuple[jax.Array, jax.Array]:
  """Answer counts of ``R`` independent attacks, one per key (Step 1).

  Repetition ``r`` is :func:`pate_jax.attacks.answer_counts` with key ``keys[r]``
  (GNMax, or Confident-GNMax when ``threshold`` is given); see there for the
  other arguments (their batch shapes broadcast).

  Args:
    keys: ``[R]`` PRNG keys (e.g. :func:`seed_keys`).

  Returns:
    ``(counts int32 [R, batch, C], num_answered int32 [R, batch])``.
  """
  runs = [mc.answer_counts(k, histograms, sigma, num_queries, threshold=threshold,
                           sigma_threshold=sigma_threshold, consistent=consistent) for k in keys]
  return jnp.stack([c for c, _ in runs]), jnp.stack([a for _, a in runs])


def sample_frequencies(keys: jax.Array, histograms: Any, sigma: Any, num_queries: Any, *,
                       consistent: bool = False) -> jax.Array:
  """GNMax answer frequencies of ``R`` independent attacks: ``q̄[R, batch, C]``.

  Repetition ``r`` is :func:`pate_jax.attacks.sample_answers` with key ``keys[r]``
  (``q̄ = counts / M``).

  Args:
    keys: ``[R]`` PRNG keys (e.g. :func:`seed_keys`).
    histograms, sigma, num_queries, consistent: as in
      :func:`pate_jax.attacks.sample_answers`.

  Returns:
    float32 ``[R, batch, C]``.
  """
  return jnp.stack([mc.sample_answers(k, histograms, sigma, num_queries, consistent=consistent)
                    for k in keys])


class Evaluation(NamedTuple):
  """One reconstruction scored against the truth (numpy arrays, batch shape ``[...]``).

  Attributes:
    histogram: ``Ĥ[..., C]``.
    error: normalised L1 error ``[...]``.
    status: :class:`pate_jax.attacks.Stop` codes ``[...]``.
    num_steps: trial steps taken ``[...]``.
  """
  histogram: np.ndarray
  error: np.ndarray
  status: np.ndarray
  num_steps: np.ndarray


def evaluate(q_bar: Any, histograms: Any, sigma: Any, num_teachers: Any,
             **options: Any) -> Evaluation:
  """Reconstructs ``Ĥ`` from ``q̄`` (Steps 2-3) and scores it against ``H``.

  ``error = Σ_i |H_i - Ĥ_i| / (2 Σ_i |H_i|)`` (attack paper, Section 4.1).

  Args:
    q_bar: ``[..., C]`` answer frequencies.
    histograms: the true ``H``, broadcastable with the batch of ``q_bar``.
    sigma, num_teachers: as in :func:`pate_jax.attacks.reconstruct_details`.
    **options: the reconstruction's options (method, project, tol, ...).

  Returns:
    :class:`Evaluation` with the batch shape of the reconstruction.
  """
  rec = rc.reconstruct_details(q_bar, sigma, num_teachers, **options)
  err = rc.normalized_l1_error(histograms, rec.histogram)
  return Evaluation(np.asarray(rec.histogram), np.asarray(err), np.asarray(rec.status),
                    np.asarray(rec.num_steps))


def evaluate_runs(q_bar: Any, histograms: Any, sigma: Any, num_teachers: Any,
                  **options: Any) -> Evaluation:
  """:func:`evaluate` of ``R`` runs ``q̄[R, ..., C]``, one call per run, stacked ``[R, ...]``."""
  runs = [evaluate(q, histograms, sigma, num_teachers, **options) for q in q_bar]
  return Evaluation(*(np.stack(x) for x in zip(*runs)))


def evaluate_variants(q_bar: Any, histograms: Any, sigma: Any, num_teachers: Any,
                      variants: Mapping[str, Mapping[str, Any]]) -> dict[str, Evaluation]:
  """:func:`evaluate_runs` of ``q̄[R, ..., C]`` for each variant ``{name: options}``, in order."""
  return {name: evaluate_runs(q_bar, histograms, sigma, num_teachers, **options)
          for name, options in variants.items()}


def status_counts(status: Any) -> dict[str, int]:
  """How often each :class:`pate_jax.attacks.Stop` reason occurs: ``{name: count}``."""
  s = np.asarray(status).ravel()
  return {rc.Stop(k).name: int((s == k).sum()) for k in range(len(rc.Stop))}


def mean_by(values: Any, labels: Any) -> dict[str, float]:
  """Means of ``values[..., b]`` over all ``b`` with the same ``labels[b]``.

  Args:
    values: ``[..., B]``.
    labels: ``[B]``.

  Returns:
    ``{label: mean}`` in the order labels first appear.
  """
  values, labels = np.asarray(values), np.asarray(labels)
  if labels.shape != values.shape[-1:]:
    raise ValueError(f"labels must have shape {values.shape[-1:]}, got {labels.shape}")
  order = labels[np.sort(np.unique(labels, return_index=True)[1])]
  return {str(lab): float(values[..., labels == lab].mean()) for lab in order}


def baseline_errors(histograms: Any, num_teachers: float) -> tuple[np.ndarray, np.ndarray]:
  """Errors of two guesses that need no answers: ``(uniform, unanimous)``, each ``[...]``.

  ``uniform``: ``Ĥ_i = N / C`` everywhere. ``unanimous``: all ``N`` votes on the
  true top class ``argmax H`` (all that one noiseless answer, or the consistent-
  answer defense, reveals).
  """
  h = np.asarray(histograms)
  c = h.shape[-1]
  uniform = rc.normalized_l1_error(h, np.full(h.shape, num_teachers / c))
  one_hot = np.eye(c, dtype=np.float32)[np.argmax(h, -1)]
  unanimous = rc.normalized_l1_error(h, num_teachers * one_hot)
  return np.asarray(uniform), np.asarray(unanimous)


def pearson(x: Any, y: Any) -> dict[str, float | int]:
  """Pearson correlation of the flattened ``x`` and ``y``: ``{"r", "p_value", "n"}``."""
  x, y = np.ravel(x), np.ravel(y)
  r, p = stats.pearsonr(x, y)
  return {"r": float(r), "p_value": float(p), "n": int(x.size)}
