"""Privacy of the KD-GAN: the published claim, what it really certifies, and a sound variant.

**As published** (Gao et al., Sec. 4.1.2 and 5.2). Each student step samples public
examples with probability ``q = B/N``, clips the batch's KD-loss vector to norm ``C``
and adds ``N(0, σ²C²)`` (Eq. 5); the paper composes the sampled Gaussian
mechanism's RDP (Mironov, Talwar, Zhang 2019) over the steps and converts to
``(ε, δ)``: :func:`published_epsilon`.

**What that certifies** (:func:`published_sound_epsilon`): nothing, for the private
records. (1) The noise is added to the *value* of the loss; the student is updated
with its *gradient*, which does not depend on the noise (exactly: the audit test
finds the updates bit-identical), so the released student is a noise-free function
of the teacher's outputs. (2) Even with noise that reached the update, the
sampling is over *public* inputs, while the records to protect are the teacher's
*private* training records: one teacher trained on all of them makes every answer
a function of every private record, so there is no amplification by ``q`` and no
bound on one private record's influence (the KD loss's sensitivity to one private
record is not bounded by ``C``: changing one record can change the whole teacher).
(3) The discriminator is trained on noise-free Gumbel samples of the teacher's
distribution and its gradient reaches the student. No finite ε follows.

**Sound variant** (PATE's soft labels, answers cached). ``T`` teachers on disjoint
partitions; the soft label of public input ``x`` is the average of their probability
vectors ``p̄(x) = (1/T) Σ_t p_t(x)``. One private record lies in one partition, so it
changes one ``p_t(x)``, by at most ``√2`` in L2 (two points of the simplex), and
``p̄(x)`` by at most ``Δ = √2/T`` (:func:`soft_label_sensitivity`). Each of the ``n``
public inputs is released once, ``p̄(x)`` plus Gaussian noise of std ``σΔ``
(:func:`release_soft_labels`), and reused in every epoch (post-processing), so the
cost is ``n`` Gaussian mechanisms: ``RDP(α) = n α / (2σ²)`` (:func:`soft_label_epsilon`;
:func:`calibrate_soft_label_noise` inverts it).

**Exactly that mechanism, in integers.** A floating-point normal is not the normal of
the analysis (float32's takes 2^23 values within about ±5.4σ; float64's, released on a
grid, would charge a δ term per cell edge: on a 2^-10 grid over [−1, 2], ``(1 + e^8) n C
3,072 · 2^-46 ≈ 4e-3`` at ε 8 for ``n C = 30,000``, above δ;
:mod:`pate_jax.discrete_gaussian`). So the query is an integer one: each teacher's
probability vector becomes integers ``≥ 0`` summing to at most ``S``
(:func:`pate_jax.votes.soft_counts`, ``S`` = :data:`pate_jax.votes.SOFT_COUNT_SCALE`),
summed exactly over the teachers (``votes.npz``'s ``soft_counts``), so one teacher moves
the sum by at most ``√2 S`` in L2 whatever the floats did; the noise is the discrete
Gaussian of variance ``⌈2σ²S²⌉ ≥ (σ √2 S)²``, sampled exactly
(:func:`soft_count_variance`), whose RDP ``α Δ_S²/(2 Var)`` with ``Δ_S = √2 S`` and
``Var ≥ 2σ²S²`` is the Gaussian mechanism's ``α/(2σ²)`` per input (Canonne, Kamath,
Steinke 2020). The release is ``(counts + noise) / (S T)``: ``p̄`` to
within ``1/S`` per entry, with noise of std ``σ√2/T`` (to within the rounding up of its
variance). No sampler term is charged: the distribution drawn is the one analysed.

**Several noise levels** (the utility-vs-ε curve) are *alternative* releases of the same
``p̄``: level ``e`` at ``σ_e`` is valid alone at its own ε, with its own noise, drawn
from ``fold_in(fold_in(key, e), query_id)`` (:func:`release_soft_label_levels`), so
the levels' noises are independent. One draw ``z`` shared by the levels would be a
leak, not a saving: ``r_e = p̄ + s_e z`` at two scales ``s_1 ≠ s_2`` give
``p̄ = (s_2 r_1 − s_1 r_2)/(s_2 − s_1)`` exactly. Publishing several levels composes:
``RDP(α) = n α Σ_e 1/(2σ_e²)``, the ε that :func:`soft_label_epsilon` answers when
given every level's ``σ``. The key is the caller's: secret in a release
(:func:`pate_jax.rng.noise_key`), a research seed's stream only for a measurement.
"""

from __future__ import annotations

import fractions
import functools
import math

import jax
import jax.numpy as jnp
import numpy as np

from pate_jax import _checks as v
from pate_jax import accounting as acc
from pate_jax import discrete_gaussian, mechanisms
from pate_jax import votes as votes_lib
from pate_jax.attacks import _reconstruct

SOUND_REASON = (
    "no finite epsilon for the private training records: (1) Eq. 5 adds noise to the "
    "value of the KD loss, which does not change its gradient, so the student's updates "
    "are noise-free functions of the teacher's outputs; (2) the sampling q = B/N is over "
    "public inputs, while every answer of the single teacher depends on every private "
    "record, so there is no amplification and no bounded sensitivity; (3) the "
    "discriminator sees noise-free teacher samples and its gradient reaches the student")


def check_rate(q, name: str = "q") -> float:
  """A sampling rate in the half-open interval ``(0, 1]``."""
  value = float(v.probability(q, name))
  if not value > 0.0:
    raise ValueError(f"{name} must lie in (0, 1]; got {value}")
  return value


# The Rényi orders of tf-privacy's DP-SGD ε calculator (compute_dp_sgd_privacy), the
# accounting of the paper's ε: 1.1, 1.2, ..., 10.9 and 12, 13, ..., 63.
PAPER_ORDERS = tuple([1.0 + x / 10.0 for x in range(1, 100)] + [float(o) for o in range(12, 64)])


def published_epsilon(q, noise_multiplier, steps: int, delta, *, orders=PAPER_ORDERS,
                      conversion: str = "classic") -> tuple[float, float]:
  """``(ε, best order)`` the paper reports: ``steps`` sampled Gaussians (MTZ 2019 RDP).

  By default the paper's accounting: tf-privacy's orders (:data:`PAPER_ORDERS`) and the
  classic RDP conversion (Mironov 2017), which gives Table 1/2's ε = 1.93 for
  ``q = 50/10,000``, ``σ = 1.1``, ``δ = 1e-5`` at 4,000 steps (20 epochs).
  ``conversion="improved"`` (Balle et al. 2020) gives the tighter ε of the same steps.

  Args:
    q: sampling rate ``B/N`` in (0, 1].
    noise_multiplier: ``σ > 0``.
    steps: number of noised KD-loss steps (the student steps).
    delta: ``δ`` in (0, 1).
    orders: Rényi orders.
    conversion: RDP → (ε, δ) conversion, ``"classic"`` or ``"improved"``.
  """
  q = check_rate(q)
  steps = v.positive_int(steps, "steps", minimum=0)
  with jax.enable_x64(True):
    rdp = (_step_rdp(q, noise_multiplier, orders)
           if isinstance(noise_multiplier, (int, float)) and isinstance(orders, tuple) else
           acc.sampled_gaussian_rdp(q, noise_multiplier, orders))
    eps, order = acc.rdp_accountant(orders, conversion).compose(steps * rdp).epsilon(delta)
  return float(eps), float(order)


@functools.lru_cache(maxsize=64, typed=True)
def _step_rdp(q: float, noise_multiplier: float, orders: tuple) -> jax.Array:
  """One step's RDP at ``orders`` (float64), computed once per ``(q, σ, orders)`` in a
  process and shared by every :func:`published_epsilon` of them: the bisection of
  :func:`pate_jax.kd_gan.steps_for_epsilon` and a curve's points ask for about 25 step
  counts of one ``q`` and ``σ``, and the fractional orders' series is most of their time.
  The array is the one the uncached call returns (the function is deterministic and the
  array immutable); keys match by type too (``typed``), so ``1`` and ``1.0`` are apart."""
  with jax.enable_x64(True):
    return acc.sampled_gaussian_rdp(q, noise_multiplier, orders)


def published_sound_epsilon() -> dict:
  """What the published loop certifies for the private records: no finite ε, and why."""
  return {"epsilon": None, "finite": False, "reason": SOUND_REASON}


def soft_label_sensitivity(num_teachers: int) -> float:
  """``√2 / T``: the L2 sensitivity of the teachers' averaged probability vector."""
  return math.sqrt(2.0) / v.positive_int(num_teachers, "num_teachers")


def ensemble_soft_counts(teacher_probs, scale: int = votes_lib.SOFT_COUNT_SCALE) -> np.ndarray:
  """The integer query ``[Q, C]`` of ``teacher_probs [T, Q, C]``: the sum over teachers of
  their :func:`pate_jax.votes.soft_counts` (what the teachers stage writes as ``votes.npz``'s
  ``soft_counts``); divided by ``S T`` it is the averaged ``p̄`` to within ``1/S`` per
  entry."""
  teacher_probs = jnp.asarray(teacher_probs)
  if teacher_probs.ndim != 3:
    raise ValueError(f"teacher_probs must be [T, Q, C]; got shape {teacher_probs.shape}")
  return np.asarray(votes_lib.soft_counts(teacher_probs, scale), np.int64).sum(axis=0)


def soft_count_variance(noise_multiplier, scale: int = votes_lib.SOFT_COUNT_SCALE) -> int:
  """The discrete Gaussian's integer variance ``⌈2σ²S²⌉``: at least ``(σ Δ_S)²`` for the
  counts' sensitivity ``Δ_S = √2 S``, so the release spends at most the ε of ``σ``
  (computed exactly from the float ``σ``)."""
  sigma = float(noise_multiplier)
  if not (math.isfinite(sigma) and sigma >= 0.0):
    raise ValueError(f"noise_multiplier must be a finite value >= 0; got {noise_multiplier!r}")
  exact = fractions.Fraction(sigma) ** 2 * 2 * v.positive_int(scale, "scale") ** 2
  return math.ceil(exact)


def release_soft_labels(key: jax.Array, soft_counts, num_teachers: int, noise_multiplier,
                        query_ids=None, scale: int = votes_lib.SOFT_COUNT_SCALE
                        ) -> np.ndarray:
  """The Gaussian mechanism on the soft labels, exactly: ``(counts + N_Z(0, ⌈2σ²S²⌉)) /
  (S T)``, float64 ``[Q, C]`` (the module docstring; :mod:`pate_jax.discrete_gaussian`).

  Query ``i``'s noise is drawn from ``fold_in(key, query_ids[i])``, so an answer does
  not depend on which other queries are released with it (the cache's consistency).

  Args:
    key: the release's key (:func:`pate_jax.rng.noise_key`).
    soft_counts: ``[Q, C]`` the teachers' summed soft counts (``votes.npz``'s
      ``soft_counts`` at one temperature, or :func:`ensemble_soft_counts`).
    num_teachers: ``T``.
    noise_multiplier: ``σ`` (noise std in units of the sensitivity ``√2/T``), ``≥ 0``.
    query_ids: ``[Q]`` ids of the public inputs (default ``0..Q-1``).
    scale: ``S``, the counts' scale per teacher.
  """
  counts, ids = _queries(soft_counts, query_ids, num_teachers, scale)
  return _release(key, counts, ids, num_teachers, noise_multiplier, scale)


def release_soft_label_levels(key: jax.Array, soft_counts, num_teachers: int,
                              noise_multipliers, query_ids=None,
                              scale: int = votes_lib.SOFT_COUNT_SCALE) -> np.ndarray:
  """Alternative releases of the same soft labels at ``E`` noise levels, ``[E, Q, C]``.

  Level ``e`` is :func:`release_soft_labels` at ``σ_e`` with the key
  ``fold_in(key, e)``: query ``i`` at level ``e`` draws its noise from
  ``fold_in(fold_in(key, e), query_ids[i])``, so the levels' noises are independent
  (and an answer still does not depend on the other queries). Each level alone is
  ``n`` Gaussian mechanisms at ``σ_e``; publishing several composes
  (:func:`soft_label_epsilon` of their ``σ``). Never one draw for every level: with a
  shared ``z``, two levels give back ``p̄ = (s_2 r_1 − s_1 r_2)/(s_2 − s_1)``.

  Args:
    key: the release's key (:func:`pate_jax.rng.noise_key`).
    soft_counts: ``[Q, C]`` the teachers' summed soft counts.
    num_teachers: ``T``.
    noise_multipliers: ``[E]`` the levels' ``σ_e ≥ 0`` (units of ``√2/T``).
    query_ids: ``[Q]`` ids of the public inputs (default ``0..Q-1``).
    scale: ``S``, the counts' scale per teacher.
  """
  counts, ids = _queries(soft_counts, query_ids, num_teachers, scale)
  sigmas = _noise_levels(noise_multipliers, "noise_multipliers")
  return np.stack([_release(jax.random.fold_in(key, e), counts, ids, num_teachers, s, scale)
                   for e, s in enumerate(sigmas)])


def _release(key, counts: np.ndarray, ids: np.ndarray, num_teachers: int, noise_multiplier,
             scale: int) -> np.ndarray:
  """:func:`release_soft_labels` of checked ``counts`` and ``ids``."""
  noise = discrete_gaussian.sample(key, ids, counts.shape[1],
                                   soft_count_variance(noise_multiplier, scale))
  return (counts + noise) / (float(scale) * num_teachers)


def _queries(soft_counts, query_ids, num_teachers, scale) -> tuple[np.ndarray, np.ndarray]:
  """``soft_counts`` as int64 ``[Q, C]`` (non-negative, rows at most ``S T``) and the
  ``[Q]`` ids (default ``0..Q-1``); a ``ValueError`` naming the argument otherwise."""
  counts = np.asarray(soft_counts)
  if counts.ndim != 2:
    raise ValueError(f"soft_counts must be [Q, C]; got shape {counts.shape}")
  votes_lib.check_soft_counts(counts, v.positive_int(num_teachers, "num_teachers"),
                              v.positive_int(scale, "scale"))
  ids = np.arange(counts.shape[0]) if query_ids is None else np.asarray(query_ids)
  if ids.shape != (counts.shape[0],):
    raise ValueError(f"query_ids must be [Q={counts.shape[0]}]; got shape {ids.shape}")
  return counts.astype(np.int64), ids


def _noise_levels(noise_multipliers, name: str, *, positive: bool = False) -> np.ndarray:
  """``noise_multipliers`` as a non-empty float64 ``[E]`` (a scalar is one level) of
  values ``≥ 0``, or ``> 0`` if ``positive``; a ``ValueError`` naming ``name``."""
  sigmas = np.atleast_1d(np.asarray(noise_multipliers, np.float64))
  ok = sigmas > 0 if positive else sigmas >= 0
  if sigmas.ndim != 1 or sigmas.size == 0 or not np.all(ok & np.isfinite(sigmas)):
    raise ValueError(f"{name} must be a non-empty [E] of finite values "
                     f"{'>' if positive else '>='} 0; got {noise_multipliers!r}")
  return sigmas


def soft_label_epsilon(noise_multiplier, num_queries: int, delta, *,
                       orders=acc.DEFAULT_ORDERS) -> tuple[float, float]:
  """``(ε, best order)`` of ``num_queries`` Gaussian releases at each of ``E`` levels.

  ``RDP(α) = n Σ_e α / (2σ_e²)``: each level's curve (the Gaussian mechanism, the
  sampled Gaussian at ``q = 1``), ``n`` times, composed by an RDP accountant and
  converted at ``δ``. One ``σ``: the ε of one level's release; every level's ``σ``:
  the ε of publishing all of them (:func:`release_soft_label_levels`).

  Args:
    noise_multiplier: ``σ > 0``, or ``[E]`` of them (composed).
    num_queries: ``n``, the public inputs released once each per level.
    delta: ``δ`` in (0, 1).
    orders: Rényi orders.
  """
  n = v.positive_int(num_queries, "num_queries")
  sigmas = _noise_levels(noise_multiplier, "noise_multiplier", positive=True)
  with jax.enable_x64(True):
    rdp = jnp.stack([acc.sampled_gaussian_rdp(1.0, s, orders) for s in sigmas])  # α / (2σ²)
    eps, order = acc.rdp_accountant(orders).compose(n * rdp).epsilon(delta)
  return float(eps), float(order)


def calibrate_soft_label_noise(target_epsilon, num_queries: int, delta, *,
                               orders=acc.DEFAULT_ORDERS) -> float:
  """The ``σ`` at which :func:`soft_label_epsilon` spends ``target_epsilon``.

  Data-independent GNMax costs ``α/σ_g²`` per query (a histogram's sensitivity is
  √2), which is ``α/(2σ²)`` for ``σ = σ_g/√2``: we calibrate GNMax and convert.
  """
  n = v.positive_int(num_queries, "num_queries")
  sigma_g = acc.calibrate_noise(target_epsilon, delta, mechanism=mechanisms.GNMAX,
                                num_queries=n,
                                orders=np.asarray(orders))
  sigma = float(sigma_g) / math.sqrt(2.0)
  # The conversion rounds: step up by an ulp until this mechanism's own accounting spends
  # at most the target (calibrate_noise's promise, kept through the division).
  for _ in range(64):
    if soft_label_epsilon(sigma, n, delta, orders=orders)[0] <= float(target_epsilon):
      return sigma
    sigma = float(np.nextafter(sigma, np.inf))
  raise RuntimeError(f"calibrate_soft_label_noise: σ {sigma!r} still spends more than "
                     f"target_epsilon {target_epsilon!r} after 64 ulps up")


@jax.jit
def project_to_simplex(x: jax.Array) -> jax.Array:
  """Euclidean projection of every row of ``x [..., C]`` onto the probability simplex
  (the attack's projection with total 1): the post-processing of a noisy soft label."""
  return _reconstruct.project_to_simplex(x, 1.0)
