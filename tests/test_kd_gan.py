"""KD-GAN (Gao et al.): losses, Eq. 5, the published accounting against dp_accounting, the
audit (Eq. 5's noise does not reach the update), the sound variant's soft-label mechanism,
bad inputs, and a tiny end-to-end fit."""

from __future__ import annotations

import fractions
import math
import pathlib

import dp_accounting
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from dp_accounting.rdp import rdp_privacy_accountant

from pate_jax import accounting as acc
from pate_jax import kd_gan as K
from pate_jax import rng
from pate_jax import votes as votes_lib
from pate_jax.kd_gan import _privacy as kd_privacy
from pate_jax.kd_gan import _train as kd_train

import _scripts  # tests/_scripts.py  # pylint: disable=g-bad-import-order

ORDERS = np.array([2.0, 3.0, 4.0, 5.0, 6.0, 8.0, 10.0, 12.0, 16.0, 20.0, 32.0, 64.0])
C = 10


def _gan(**kw):
  args = dict(lam=0.5, tau=2.0, clip=1.0, noise_multiplier=1.1, batch_size=8,
              student_kwargs={"hidden": (16,)}, disc_hidden=(8,))
  args.update(kw)
  return K.make_kd_gan(C, **args)


_FIT_GAN = None


def _fit_gan():
  """One KDGAN object for the audit and the fit test (their compiled programs are shared)."""
  global _FIT_GAN
  if _FIT_GAN is None:
    _FIT_GAN = _gan(noise_multiplier=1.1, clip=5.0, learning_rate=3e-3, batch_size=16)
  return _FIT_GAN


def _toy(n=128, seed=0):
  rng = np.random.default_rng(seed)
  x = rng.random((n, 4, 4, 1), dtype=np.float32)
  w = rng.normal(size=(16, C)).astype(np.float32) * 3
  logits = x.reshape(n, -1) @ w
  tl = np.asarray(jax.nn.log_softmax(logits), np.float32)
  return x, tl, logits.argmax(1)


def _products(gan, x, tl):
  """The precision of every matrix product of ``gan``'s compiled programs: the
  initialisation, one training segment (both players' steps, forward and backward), the
  evaluation and the student's log-probabilities."""
  from pate_jax.kd_gan import _train  # pylint: disable=g-import-not-at-top
  keys, x, tl = jax.random.split(jax.random.key(0), 2), jnp.asarray(x), jnp.asarray(tl)
  state = jax.eval_shape(lambda k: K.init_runs(gan, k, x), keys)
  texts = [_train._init_runs.lower(_train._networks(gan), keys, x).as_text(),
           _train._segment.lower(gan, 1, False, state, keys, jnp.asarray(0), x, tl,
                                 jnp.float32(1.0)).as_text(),
           _train._accuracy.lower(gan, state, x, jnp.zeros(x.shape[0], int)).as_text(),
           _train._student_log_probs.lower(gan, state, x).as_text()]
  lines = [l for t in texts for l in t.splitlines() if "stablehlo.dot_general" in l]
  assert len(lines) > 10
  return {"HIGHEST" if "precision = [HIGHEST, HIGHEST]" in l else "other" for l in lines}


def test_kd_gan_computes_float32_products_on_every_backend():
  """As the students (a GPU's default rounds float32 operands to TF32): float32 products
  unless ``matmul_precision`` says otherwise."""
  x, tl, _ = _toy(32)
  gan = _gan()
  assert gan.matmul_precision == "float32" and _products(gan, x, tl) == {"HIGHEST"}
  backend = _gan(matmul_precision="default")
  assert backend.matmul_precision is None and _products(backend, x, tl) == {"other"}
  with pytest.raises(ValueError, match="matmul_precision: 'fast'"):
    _gan(matmul_precision="fast")


# ----------------------------------------------------------------------------- losses


def test_clip_by_norm_bounds_the_norm():
  clip = jax.jit(K.clip_by_norm, static_argnames="per_example")
  rng = np.random.default_rng(0)
  v = (rng.normal(size=50) * 3).astype(np.float32)
  out = np.asarray(clip(v, 0.7))
  assert np.linalg.norm(out) == pytest.approx(0.7, rel=1e-5)
  np.testing.assert_allclose(out, v * 0.7 / np.linalg.norm(v), rtol=1e-5)
  small = v * 1e-3
  np.testing.assert_array_equal(clip(small, 10.0), small)  # below C: unchanged
  rows = (rng.normal(size=(6, 3)) * 5).astype(np.float32)
  per = np.asarray(clip(rows, 1.5, per_example=True))
  assert np.all(np.linalg.norm(per, axis=1) <= 1.5 + 1e-6)
  g = jax.jit(jax.grad(lambda z: jnp.sum(K.clip_by_norm(z, 1.0))))(jnp.zeros(4))
  assert np.all(np.isfinite(g))


def test_kd_losses_is_the_softened_kl():
  rng = np.random.default_rng(0)
  t_logits = rng.normal(size=(3, C))
  s_logits = rng.normal(size=(3, C))
  tau = 3.0
  p = np.exp(t_logits / tau) / np.exp(t_logits / tau).sum(1, keepdims=True)
  q = np.exp(s_logits / tau) / np.exp(s_logits / tau).sum(1, keepdims=True)
  expected = (p * np.log(p / q)).sum(1)
  t_logp = jax.nn.log_softmax(jnp.asarray(t_logits, jnp.float32))  # log p, any shift
  np.testing.assert_allclose(K.kd_losses(t_logp, jnp.asarray(s_logits, jnp.float32), tau),
                             expected, rtol=1e-5)
  np.testing.assert_allclose(K.kd_losses(t_logp, t_logp, tau), 0.0, atol=1e-6)
  # A zero-probability class (a projected soft label) contributes 0, not NaN.
  zero = jnp.log(jnp.asarray([[0.5, 0.5] + [0.0] * (C - 2)]))
  assert np.isfinite(float(K.kd_losses(zero, jnp.zeros((1, C)), 1.0)[0]))


def test_dp_losses_is_clip_plus_scaled_noise():
  losses = jnp.arange(1.0, 9.0)
  mask = jnp.arange(8) < 6
  key = jax.random.key(3)
  out = K.dp_losses(key, losses, 2.0, 1.1, mask)
  clipped = K.clip_by_norm(jnp.where(mask, losses, 0.0), 2.0)
  noise = 1.1 * 2.0 * jax.random.normal(key, (8,))
  np.testing.assert_allclose(out, clipped + jnp.where(mask, noise, 0.0), rtol=1e-6)
  assert float(jnp.linalg.norm(clipped)) <= 2.0 + 1e-6


def test_poisson_batch_rows_and_rate():
  keys = jax.random.split(jax.random.key(0), 400)
  cap = K.batch_capacity(1000, 50)
  rows, mask = jax.jit(jax.vmap(lambda k: K.poisson_batch(k, 1000, 0.05, cap)))(keys)
  sizes = np.asarray(mask.sum(1))
  assert abs(sizes.mean() - 50) < 1.5 and sizes.max() < cap
  r0 = np.asarray(rows[0])[np.asarray(mask[0])]
  assert len(np.unique(r0)) == len(r0) and r0.max() < 1000


# ----------------------------------------------------------------------------- privacy


def test_published_epsilon_matches_dp_accounting():
  q, sigma, steps, delta = 50 / 10_000, 1.1, 4_000, 1e-5
  eps, _ = K.published_epsilon(q, sigma, steps, delta, orders=ORDERS, conversion="improved")
  ref = rdp_privacy_accountant.RdpAccountant(list(ORDERS))
  ref.compose(dp_accounting.PoissonSampledDpEvent(q, dp_accounting.GaussianDpEvent(sigma)),
              steps)
  assert eps == pytest.approx(ref.get_epsilon(delta), rel=1e-6)
  assert K.published_sound_epsilon()["epsilon"] is None


@pytest.mark.slow
def test_published_epsilon_is_the_papers_accounting():
  # Gao et al., Tables 1-2: ε = 1.93 for q = 50/10,000, σ = 1.1, δ = 1e-5, 20 epochs
  # (4,000 steps) under tf-privacy's orders and the classic conversion; the improved
  # conversion of the same steps is 1.595; 5,000 steps are 2.125 classic; ε = 8 needs about
  # 64,000 steps under the paper's accounting.
  q, sigma, delta = 50 / 10_000, 1.1, 1e-5
  assert round(K.published_epsilon(q, sigma, 4_000, delta)[0], 2) == 1.93
  assert K.published_epsilon(q, sigma, 4_000, delta, conversion="improved")[0] == (
      pytest.approx(1.595, abs=1e-3))
  assert K.published_epsilon(q, sigma, 5_000, delta)[0] == pytest.approx(2.125, abs=1e-3)
  steps = K.steps_for_epsilon(q, sigma, 8.0, delta)
  assert 60_000 < steps < 66_000
  assert K.published_epsilon(q, sigma, steps, delta)[0] <= 8.0


def test_soft_count_sensitivity_by_changing_one_teacher():
  """One teacher moves the integer query by at most √2 S in L2 (S = the counts' scale),
  whatever floats it outputs: vertex to vertex reaches it; sums above 1, NaN and values
  outside [0, 1] stay within it."""
  t, q, s = 25, 40, votes_lib.SOFT_COUNT_SCALE
  rng = np.random.default_rng(0)
  probs = rng.dirichlet(np.ones(C), size=(t, q)).astype(np.float32)
  base = K.ensemble_soft_counts(probs)
  assert K.soft_label_sensitivity(t) == pytest.approx(math.sqrt(2) / t)
  np.testing.assert_allclose(base / (s * t), probs.mean(0), atol=1.0 / s)
  # Worst case: teacher 7 moves from one vertex of the simplex to another.
  worst_a, worst_b = probs.copy(), probs.copy()
  worst_a[7, 0], worst_b[7, 0] = np.eye(C)[2], np.eye(C)[5]
  diff = K.ensemble_soft_counts(worst_a) - K.ensemble_soft_counts(worst_b)
  assert np.linalg.norm(diff[0]) == pytest.approx(math.sqrt(2) * s, rel=1e-12)
  assert np.abs(diff[1:]).max() == 0
  # A teacher whose floats are not a probability vector still moves it by at most √2 S.
  for bad in (np.ones((q, C)), np.full((q, C), 0.1000001), rng.uniform(-1, 2, (q, C)),
              np.where(rng.random((q, C)) < 0.3, np.nan, 0.5), rng.dirichlet(np.full(C, 0.05), q)):
    other = probs.copy()
    other[3] = bad
    counts = np.asarray(votes_lib.soft_counts(other[3]))
    assert counts.min() >= 0 and counts.sum(-1).max() <= s
    moved = np.linalg.norm(K.ensemble_soft_counts(other) - base, axis=1)
    assert moved.max() <= math.sqrt(2) * s


def test_release_noise_scale_and_consistency():
  """The release is ``counts/(S T)`` plus noise of std ``σ√2/T``: the discrete Gaussian of
  variance ``⌈2σ²S²⌉``, exactly; an answer depends on its id only, not on the batch."""
  s = votes_lib.SOFT_COUNT_SCALE
  counts = np.full((2000, C), s * 50 // C)
  out = K.release_soft_labels(jax.random.key(0), counts, 50, 3.0)
  assert out.dtype == np.float64 and out.shape == (2000, C)
  assert float(np.std(out - 0.1)) == pytest.approx(3.0 * math.sqrt(2) / 50, rel=0.03)
  noise = (out - 0.1) * (s * 50)
  np.testing.assert_allclose(noise, np.round(noise), atol=1e-6)  # integers
  assert K.soft_count_variance(3.0) == 2 * 9 * s * s
  assert K.soft_count_variance(0.1) >= 2 * 0.1**2 * s * s  # rounded up, never down
  assert K.soft_count_variance(0.1) - 2 * fractions.Fraction(0.1) ** 2 * s * s < 1
  ids = np.asarray([5, 17])
  sub = K.release_soft_labels(jax.random.key(0), counts[ids], 50, 3.0, query_ids=ids)
  np.testing.assert_array_equal(sub, out[ids])  # an answer does not depend on the batch
  np.testing.assert_array_equal(K.release_soft_labels(jax.random.key(0), counts, 50, 0.0),
                                counts / (s * 50))
  for bad, match in (((counts + 0.5), "soft_counts"), (-counts, "soft_counts"),
                     (counts * C, "soft_counts")):
    with pytest.raises(ValueError, match=match):
      K.release_soft_labels(jax.random.key(0), bad, 50, 3.0)
  with pytest.raises(ValueError, match="noise_multiplier"):
    K.release_soft_labels(jax.random.key(0), counts, 50, float("nan"))
  p = K.project_to_simplex(out[:50])
  np.testing.assert_allclose(p.sum(1), 1.0, atol=1e-5)
  assert float(p.min()) >= 0.0
  on = jnp.asarray([[0.2, 0.8] + [0.0] * (C - 2)])
  np.testing.assert_allclose(K.project_to_simplex(on), on, atol=1e-6)


def test_soft_label_epsilon_and_calibration():
  sigma, n, delta = 40.0, 1000, 1e-5
  eps, _ = K.soft_label_epsilon(sigma, n, delta, orders=ORDERS)
  ref = rdp_privacy_accountant.RdpAccountant(list(ORDERS))
  ref.compose(dp_accounting.GaussianDpEvent(sigma), n)
  assert eps == pytest.approx(ref.get_epsilon(delta), rel=1e-6)
  with jax.enable_x64(True):
    closed = n * ORDERS / (2 * sigma**2)
    assert eps == pytest.approx(float(acc.rdp_to_epsilon(closed, ORDERS, delta)[0]), rel=1e-9)
  s2 = K.calibrate_soft_label_noise(2.0, n, delta, orders=ORDERS)
  assert K.soft_label_epsilon(s2, n, delta, orders=ORDERS)[0] == pytest.approx(2.0, rel=1e-6)
  # Settings where σ_g/√2 rounded to a σ 1e-15 over its target: never above it now.
  for target, queries in ((6.6507411369065, 11740), (1.1215097882959397, 5975)):
    s = K.calibrate_soft_label_noise(target, queries, delta)
    assert K.soft_label_epsilon(s, queries, delta)[0] <= target


def _sound_votes(q=2000, t=250, seed=0):
  """A votes dict as :func:`K.sound_targets` reads it: ``T`` teachers' soft counts at
  temperature 1, every averaged entry in ``[0.05, 0.55]`` (inside the simplex, so that
  projecting a slightly noisy release only removes its mean)."""
  soft = 0.05 + 0.5 * np.random.default_rng(seed).dirichlet(np.full(C, 5.0), size=q)
  s = votes_lib.SOFT_COUNT_SCALE
  counts = np.floor(soft * s * t).astype(np.int32)
  return {"soft_counts": counts[None],
          "probabilities": (counts / counts.sum(-1, keepdims=True))[None],
          "soft_count_scale": s, "temperatures": np.ones(1), "num_teachers": t}


def _levels(votes, sigmas, key=None, rows=None):
  """Released (projected) soft labels ``[E, N, C]``, the private ``p̄ [N, C]`` and the
  levels' noise stds ``[E]``."""
  rows = np.arange(0, 2000, 2) if rows is None else rows
  out = np.exp(K.sound_targets(jax.random.key(7) if key is None else key, votes, rows, sigmas))
  std = np.asarray(sigmas) * K.soft_label_sensitivity(votes["num_teachers"])
  p = votes["soft_counts"][0][rows] / (votes["soft_count_scale"] * votes["num_teachers"])
  return out.astype(np.float64), p, std


def test_two_sound_levels_do_not_give_back_the_soft_labels():
  """With one noise draw ``z`` for every level, ``r_e = p̄ + s_e z``
  (projected: minus its mean) and ``p̂ = (s_2 r_1 − s_1 r_2)/(s_2 − s_1)`` was ``p̄`` to
  float rounding. Independent levels leave ``p̂ − p̄ = s_1 s_2 (z_1 − z_2)/(s_2 − s_1)``."""
  (r1, r2), p, (s1, s2) = _levels(_sound_votes(), [0.5, 1.0])
  assert np.all(r1 > 0) and np.all(r2 > 0)  # the projection only removed the mean
  p_hat = (s2 * r1 - s1 * r2) / (s2 - s1)
  err = np.abs(p_hat - p).mean()
  assert err > s1, (err, s1)  # expected ≈ 2.7 s_1; the shared draw gave < 1e-6
  assert np.abs(r1 - p).mean() == pytest.approx(s1 * math.sqrt(2 / math.pi * 0.9), rel=0.05)


def test_sound_levels_noises_are_uncorrelated():
  """The levels' normalised noises ``(r_e − p̄)/s_e`` (projected: ``z_e − z̄_e``) are
  uncorrelated over 10,000 entries (the shared draw made them equal, correlation 1)."""
  r, p, std = _levels(_sound_votes(), [0.5, 2.0], rows=np.arange(1000))
  z = ((r - p) / std[:, None, None]).reshape(2, -1)
  np.testing.assert_allclose(np.corrcoef(z), np.eye(2), atol=0.05)
  np.testing.assert_allclose(z.std(1), math.sqrt(0.9), rtol=0.03)


def test_release_levels_key_derivation_and_consistency():
  """Level ``e`` is :func:`K.release_soft_labels` with ``fold_in(key, e)``; an answer
  depends on its query id, not on its position; σ must be a non-empty [E] of σ ≥ 0."""
  key, soft = jax.random.key(3), np.full((40, C), votes_lib.SOFT_COUNT_SCALE * 5)
  out = K.release_soft_label_levels(key, soft, 50, [1.0, 4.0])
  assert out.shape == (2, 40, C)
  for e, sigma in enumerate([1.0, 4.0]):
    np.testing.assert_array_equal(
        out[e], K.release_soft_labels(jax.random.fold_in(key, e), soft, 50, sigma))
  ids = np.arange(40)[::-1]  # the same queries in another order (and the same shapes)
  moved = K.release_soft_label_levels(key, soft[ids], 50, [1.0, 4.0], query_ids=ids)
  np.testing.assert_array_equal(moved, out[:, ids])
  for bad in ([], [1.0, -1.0], [[1.0]], [float("inf")]):
    with pytest.raises(ValueError, match="noise_multipliers"):
      K.release_soft_label_levels(key, soft, 50, bad)


def test_sound_noise_is_secret_unless_a_research_seed_is_named():
  """``rng.noise_key("aggregation", noise_seed)`` (the stage's key): ``None`` draws a
  fresh secret key per call, so two releases differ; a research seed repeats them, from
  ``stream(root_key(seed), "aggregation")``."""
  votes, rows, sigmas = _sound_votes(), np.arange(1000), [1.0, 2.0]
  secret = [K.sound_targets(rng.noise_key("aggregation", None), votes, rows, sigmas)
            for _ in range(2)]
  assert np.abs(secret[0] - secret[1]).min(axis=-1).max() > 0  # every answer differs
  public = [K.sound_targets(rng.noise_key("aggregation", 0), votes, rows, sigmas)
            for _ in range(2)]
  np.testing.assert_array_equal(public[0], public[1])
  np.testing.assert_array_equal(public[0], K.sound_targets(
      rng.stream(rng.root_key(0), "aggregation"), votes, rows, sigmas))


def test_sound_targets_refuse_votes_without_soft_counts():
  """Votes written with float probabilities only (before the integer soft counts) have no
  exact query to release: refused, saying what to do; not released from the floats."""
  votes = _sound_votes(q=20)
  del votes["soft_counts"], votes["soft_count_scale"]
  with pytest.raises(ValueError, match="no soft_counts in votes.npz"):
    K.sound_targets(jax.random.key(0), votes, np.arange(10), [1.0])


def test_the_sound_release_takes_votes_on_the_mnist_pool_and_public_pool_inputs_only():
  """The stage pairs public row ``i`` with the votes' row ``i``: refused where the public
  inputs are the teachers' private training split (``public="train"``) or the votes are
  not MNIST's student split, pool first."""
  import ml_collections  # pylint: disable=g-import-not-at-top
  from pate_jax import data as data_lib  # pylint: disable=g-import-not-at-top
  from pate_jax.stages import kd_gan as stage  # pylint: disable=g-import-not-at-top
  split = data_lib.student_split("mnist", 10_000)
  votes = {"dataset": "mnist", "num_pool": len(split.pool_index),
           "index": np.concatenate([split.pool_index, split.eval_index])}
  pool = ml_collections.ConfigDict({"public": "pool"})
  stage.check_sound_votes(pool, votes, 10_000)
  with pytest.raises(ValueError, match="config.public must be 'pool'"):
    stage.check_sound_votes(ml_collections.ConfigDict({"public": "train"}), votes, 10_000)
  for bad in ({**votes, "dataset": "svhn"}, {**votes, "index": np.arange(10_000)}):
    with pytest.raises(ValueError, match="not on MNIST's student pool"):
      stage.check_sound_votes(pool, bad, 10_000)


def test_table2_reads_the_papers_rows_off_the_curve():
  """Table 2's rows: the last curve point at or below the paper's ε; a note with the
  curve's ε range where the curve stops short of it."""
  curve = [{"epsilon_published": e, "accuracy_mean": a}
           for e, a in ((1.0, 0.90), (1.9, 0.95), (2.5, 0.97))]
  low, high = K.table2(curve)
  assert low == {"paper_epsilon": 1.93, "paper_accuracy": 0.9852, "epsilon_published": 1.9,
                 "accuracy_mean": 0.95}
  assert high == {"paper_epsilon": 8.0, "paper_accuracy": 0.992,
                  "note": "no evaluation there: curve ε 1.00–2.50"}
  assert K.table2(curve, paper=((2.5, 0.5),))[0]["accuracy_mean"] == 0.97
  # The paper prints ε to two decimals: 1.9327 (its 4,000 steps) is its 1.93, 1.936 is not.
  curve = [{"epsilon_published": e, "accuracy_mean": a}
           for e, a in ((1.73, 0.96), (1.9327, 0.97), (1.936, 0.98))]
  assert K.table2(curve)[0]["accuracy_mean"] == 0.97


def test_publishing_every_sound_level_composes():
  """The curve: each level its own ε (an alternative release); all of them: the levels'
  Gaussian RDP curves composed by the accountant, checked against dp_accounting."""
  sigmas, n, delta = [60.0, 30.0, 15.0], 1000, 1e-5
  points, total = K.sound_curve([1.0, 2.0, 4.0], sigmas, n, 250, delta,
                                np.full((3, 2), 0.9))
  each = [pt["epsilon"] for pt in points]
  assert total["epsilon_if_all_published"] > max(each)
  assert total["epsilon_if_all_published"] < sum(each)  # RDP composes better than ε adds
  assert all(pt["release"] == "alternative" for pt in points)
  assert total["levels"] == 3 and "alternative release" in total["note"]
  with jax.enable_x64(True):
    rdp = jnp.stack([acc.sampled_gaussian_rdp(1.0, s, acc.DEFAULT_ORDERS) for s in sigmas])
    ours = acc.rdp_accountant().compose(n * rdp).epsilon(delta)
  assert total["epsilon_if_all_published"] == pytest.approx(float(ours[0]), rel=1e-9)
  assert total["order"] == float(ours[1])
  ref = rdp_privacy_accountant.RdpAccountant(list(ORDERS))
  for s in sigmas:
    ref.compose(dp_accounting.GaussianDpEvent(s), n)
  assert K.soft_label_epsilon(sigmas, n, delta, orders=ORDERS)[0] == pytest.approx(
      ref.get_epsilon(delta), rel=1e-6)
  assert points[1]["epsilon"] == pytest.approx(K.soft_label_epsilon(30.0, n, delta)[0])
  with pytest.raises(ValueError, match="noise_multiplier"):
    K.soft_label_epsilon([30.0, 0.0], n, delta)
  with pytest.raises(ValueError, match="accuracy"):
    K.sound_curve([1.0, 2.0], sigmas, n, 250, delta, np.full((3, 2), 0.9))


# ----------------------------------------------------------------------------- the audit


@pytest.mark.slow
def test_eq5_noise_does_not_reach_the_update():
  """The same runs (same keys: batches, Gumbel draws) with Eq. 5's noise (σ = 1.1) and
  without (σ = 0): the loss values differ, the students' parameters after 60 rounds do
  not (exactly, or to float rounding)."""
  x, tl, y = _toy()
  audit = K.audit_eq5_noise(_fit_gan(), jax.random.split(jax.random.key(0), 2), x, tl, x, y,
                            num_rounds=60)
  assert abs(audit["loss_value_noisy"] - audit["loss_value_clean"]) > 1e-3  # noise is there
  assert audit["max_abs_param"] > 1e-2
  assert audit["max_abs_param_difference"] <= 1e-7


# ----------------------------------------------------------------------------- bad input


@pytest.mark.parametrize("kw, name", [({"lam": 1.5}, "lam"), ({"lam": -0.1}, "lam"),
                                      ({"tau": 0.0}, "tau"), ({"tau": -1.0}, "tau"),
                                      ({"clip": 0.0}, "clip"), ({"clip": -2.0}, "clip")])
def test_bad_hyperparameters_name_the_argument(kw, name):
  with pytest.raises(ValueError, match=name):
    _gan(**kw)


@pytest.mark.parametrize("q", [0.0, 1.5, -0.2])
def test_bad_sampling_rate(q):
  with pytest.raises(ValueError, match="q must lie in"):
    K.published_epsilon(q, 1.1, 10, 1e-5)


def test_teacher_class_count_mismatch():
  x, tl, _ = _toy(16)
  with pytest.raises(ValueError, match="teacher_log_probs.*9 classes.*student 10"):
    K.fit(_gan(), jax.random.split(jax.random.key(0), 1), x, tl[:, :9], x, np.zeros(16, int),
          num_rounds=1, segment_rounds=1, log=None)


# ----------------------------------------------------------------------------- end to end


@pytest.mark.slow
def test_tiny_fit_learns_the_teacher_vmapped_over_seeds():
  x, tl, y = _toy()
  gan = _fit_gan()
  keys = jax.random.split(jax.random.key(0), 8)
  out = K.fit(gan, keys, x, tl, x, y, num_rounds=120, segment_rounds=60, log=None)
  first = out.history[0]["eval_accuracy"]
  assert np.all(out.eval_accuracy >= np.asarray(first) - 0.05)
  assert out.eval_accuracy.shape == (8,)
  # The toy's majority class is 32 % of its rows, chance 10 %: a run of this small noisy
  # game may stay at the majority class for 120 rounds (5 of 28 runs did, over other
  # keys); most learn the teacher.
  assert np.sum(out.eval_accuracy > 0.5) >= 5, out.eval_accuracy
  assert out.history[-1]["kd"] < out.history[0]["kd"]  # the runs' mean
  assert K.check_teacher(gan, x, np.stack([tl, tl]), 2)  # per-run targets [S, N, C]


@pytest.mark.slow
def test_no_initialisation_key_is_a_rounds_key(monkeypatch):
  """A run's key feeds two streams: the networks' initialisation and the rounds. (Round r
  once used fold_in(key, r), so rounds 0 and 1 reused the student's and the
  discriminator's initialisation keys.)"""
  from pate_jax.kd_gan import _train  # pylint: disable=g-import-not-at-top
  seen = {"init": [], "round": []}

  def record(kind, key):
    jax.debug.callback(lambda k: seen[kind].append(np.asarray(k).tobytes()),
                       jax.random.key_data(key))

  train_round = _train.train_round

  def spy_round(gan, state, key, *args):
    record("round", key)
    return train_round(gan, state, key, *args)

  gan = _gan(student_kwargs={"hidden": (13,)}, disc_hidden=(7,))  # its own programs
  for module in (gan.student, gan.discriminator):
    init = type(module).init

    def spy_init(self, key, *args, _init=init, **kwargs):
      record("init", key)
      return _init(self, key, *args, **kwargs)
    monkeypatch.setattr(type(module), "init", spy_init)
  monkeypatch.setattr(_train, "train_round", spy_round)
  x, tl, y = _toy(32)
  K.fit(gan, jax.random.split(jax.random.key(0), 2), x, tl, x, y, num_rounds=4,
        segment_rounds=4, log=None)
  jax.effects_barrier()
  assert len(seen["init"]) == 4 and len(seen["round"]) == 8  # 2 runs
  assert len(set(seen["init"])) == 4 and len(set(seen["round"])) == 8
  assert not set(seen["init"]) & set(seen["round"])


@pytest.mark.slow
def test_a_checkpoint_of_the_earlier_key_derivation_does_not_resume(tmp_path):
  """The fingerprint names how a run's keys are used: a checkpoint written when round r
  drew from fold_in(key, r) (no ``key_streams`` entry) is refused, not resumed under
  other draws."""
  import json  # pylint: disable=g-import-not-at-top
  x, tl, y = _toy(32)
  gan = _gan()
  keys = jax.random.split(jax.random.key(0), 1)
  K.fit(gan, keys, x, tl, x, y, num_rounds=2, segment_rounds=2, log=None,
        checkpoint_dir=str(tmp_path))
  path = tmp_path / "fingerprint.json"
  record = json.loads(path.read_text())
  assert "key_streams" in json.dumps(record)
  path.write_text(json.dumps(record).replace('"key_streams"', '"key_streams_was_absent"'))
  with pytest.raises(ValueError, match="key_streams"):
    K.fit(gan, keys, x, tl, x, y, num_rounds=4, segment_rounds=2, log=None,
          checkpoint_dir=str(tmp_path))


@pytest.mark.slow  # three trainings, 3.6 s
def test_the_teacher_is_refused_with_the_callers_hint_and_restarts(tmp_path):
  """The KD-GAN's teacher (all private images) resumes only its own run: another run's
  checkpoints are refused naming the caller's flag, and restart=True trains it again."""
  from pate_jax import checkpoint  # pylint: disable=g-import-not-at-top
  rng = np.random.default_rng(0)
  x, y = rng.random((64, 4, 4, 1), np.float32), np.arange(64) % 3
  kw = dict(model="mlp", model_kwargs={"hidden": (8,)}, num_steps=4, batch_size=16,
            checkpoint_dir=str(tmp_path / "teacher"), log=None)
  K.train_teacher(jax.random.key(0), x, y, x, y, **kw)
  with pytest.raises(checkpoint.ResumeMismatchError,
                     match=r"restart=True \(--config\.kd_gan\.restart=True\)"):
    K.train_teacher(jax.random.key(0), x, y, x, y, learning_rate=3e-3,
                    restart_hint="--config.kd_gan.restart=True", **kw)
  *_, accuracy = K.train_teacher(jax.random.key(0), x, y, x, y, learning_rate=3e-3,
                                 restart=True, **kw)
  assert 0 <= accuracy <= 1


def test_student_loss_weighs_kd_by_lambda_and_adv_by_one_minus_lambda_over_real_rows():
  gan = _gan(lam=0.3, noise_multiplier=0.0)
  x = jax.random.normal(jax.random.key(0), (8, 28, 28, 1))
  tl = jax.nn.log_softmax(jax.random.normal(jax.random.key(1), (8, C)))
  mask = jnp.arange(8) < 5
  state = K.init(gan, jax.random.key(2), x)
  # One compiled program, not one per operation of an eager call.
  loss = jax.jit(lambda *args: K.student_loss(gan, *args))
  total, parts = loss(state["student"], state["disc"], jax.random.key(3), x, tl, mask, 0.0)
  want = 0.3 * float(parts["kd_dp"]) + 0.7 * float(parts["adv"])
  np.testing.assert_allclose(float(total), want, rtol=1e-5)
  kd = K.kd_losses(tl, gan.student.apply({"params": state["student"]}, x), gan.tau)
  np.testing.assert_allclose(float(parts["kd"]), float(kd[:5].mean()), rtol=1e-5)


@pytest.mark.slow
def test_discriminator_step_on_unlabelled_inputs_uses_their_mask():
  gan = _gan(batch_size=8)
  x_all = jax.random.normal(jax.random.key(0), (40, 28, 28, 1))
  tl_all = jax.nn.log_softmax(jax.random.normal(jax.random.key(1), (40, C)))
  u_all = jax.random.normal(jax.random.key(4), (15, 28, 28, 1))
  state = K.init(gan, jax.random.key(2), x_all)
  disc = jax.tree.map(jnp.zeros_like, state["disc"])
  disc["Dense_1"]["bias"] = jnp.ones_like(disc["Dense_1"]["bias"])  # D(x, y) = 1 everywhere
  key = jax.random.key(5)
  _, (loss, accuracy) = K.discriminator_step(gan, {**state, "disc": disc}, key, x_all, tl_all,
                                             u_all)
  n_t = int(kd_train._batch(gan, key, x_all, tl_all)[2].sum())
  n_s = int(kd_train._unlabelled_batch(gan, key, u_all)[1].sum())
  assert n_t != n_s
  want = (n_t * float(jax.nn.softplus(-1.0)) + n_s * float(jax.nn.softplus(1.0))) / 8
  np.testing.assert_allclose(float(loss), want, rtol=1e-5)
  np.testing.assert_allclose(float(accuracy), 0.5)  # teacher called real, student not fake



def _log_sigmoid(d):
  return -np.logaddexp(0.0, -d)  # log σ(d), stable


def test_eq6_losses_are_the_gan_log_likelihoods_on_hand_made_logits():
  """Eq. 6 on discriminator logits: D calls the teacher's sample real (``-log σ(d_T)``) and
  the student's fake (``-log(1 - σ(d_S))``); the student's non-saturating loss is
  ``-log σ(d_S)``, not the saturating ``log(1 - σ(d_S))``."""
  d_t = np.array([-3.0, -0.5, 0.0, 0.7, 4.0])
  d_s = np.array([2.0, -1.5, 0.3, -4.0, 0.0])
  want_d = -_log_sigmoid(d_t) - _log_sigmoid(-d_s)  # 1 - σ(d) = σ(-d)
  np.testing.assert_allclose(K.discriminator_loss(jnp.asarray(d_t), jnp.asarray(d_s)), want_d,
                             rtol=1e-6)
  np.testing.assert_allclose(K.adversarial_loss(jnp.asarray(d_s)), -_log_sigmoid(d_s),
                             rtol=1e-6)
  # At D's chance point (σ = 1/2) the discriminator's loss is 2 log 2 and the student's log 2.
  np.testing.assert_allclose(K.discriminator_loss(jnp.zeros(1), jnp.zeros(1)), 2 * np.log(2),
                             rtol=1e-6)


def test_eq6_gradients_move_each_player_the_way_the_paper_says():
  """One gradient step on the student's adversarial loss, through the Gumbel-softmax
  sample, raises the probability of the class a fixed discriminator calls real (the
  teacher's class): the student learns to fool D. D's own loss raises ``d_T`` and lowers
  ``d_S``."""
  w = jnp.zeros(C).at[3].set(4.0).at[5].set(-4.0)  # D(y) = w·y: class 3 looks real

  def adv(z):
    log_p = jnp.broadcast_to(jax.nn.log_softmax(z), (512, C))
    return jnp.mean(K.adversarial_loss(K.gumbel_softmax(jax.random.key(0), log_p, 0.5) @ w))

  z = jnp.zeros(C)
  moved = np.asarray(jax.nn.softmax(z - jax.jit(jax.grad(adv))(z)) - jax.nn.softmax(z))
  assert moved.argmax() == 3 and moved.argmin() == 5 and moved[3] > 0 > moved[5], moved
  g_t, g_s = jax.jit(jax.grad(lambda a, b: jnp.sum(K.discriminator_loss(a, b)),
                              argnums=(0, 1)))(jnp.zeros(3), jnp.zeros(3))
  assert np.all(np.asarray(g_t) < 0) and np.all(np.asarray(g_s) > 0)  # d_T up, d_S down


def test_gumbel_softmax_samples_the_class_distribution_at_its_temperature():
  """The Gumbel-max trick: ``argmax(log p + g)`` is a draw from ``p``; the relaxed sample
  is one-hot-like at a low temperature and close to uniform at a high one."""
  p = np.array([0.5, 0.3, 0.15, 0.05])
  keys = jax.random.split(jax.random.key(1), 20_000)
  sample = jax.jit(jax.vmap(K.gumbel_softmax, in_axes=(0, None, None)))
  y = np.asarray(sample(keys, jnp.log(jnp.asarray(p, jnp.float32)), 1.0))
  freq = np.bincount(y.argmax(1), minlength=4) / len(y)
  np.testing.assert_allclose(freq, p, atol=0.015)  # binomial std ≤ 0.0036
  np.testing.assert_allclose(y.sum(1), 1.0, rtol=1e-5)
  cold = np.asarray(sample(keys[:500], jnp.log(jnp.asarray(p, jnp.float32)), 0.02))
  hot = np.asarray(sample(keys[:500], jnp.log(jnp.asarray(p, jnp.float32)), 50.0))
  assert cold.max(1).mean() > 0.95 and hot.max(1).max() < 0.35


def test_per_example_clipping_bounds_each_row_and_keeps_the_small_ones():
  """Eq. 4 per example: each row ``ℓ_i`` becomes ``ℓ_i min(1, C/||ℓ_i||)`` (a row below
  ``C`` is unchanged); the batch version scales the whole vector by one factor."""
  losses = jnp.asarray([3.0, 0.5, -2.0, 0.0])
  np.testing.assert_allclose(K.clip_by_norm(losses, 1.0, per_example=True),
                             [1.0, 0.5, -1.0, 0.0], rtol=1e-6)
  whole = np.asarray([3.0, 0.5, -2.0, 0.0]) / np.sqrt(9 + 0.25 + 4)
  np.testing.assert_allclose(K.clip_by_norm(losses, 1.0), whole, rtol=1e-6)
  rows = jnp.asarray([[3.0, 4.0], [0.3, 0.4]])
  np.testing.assert_allclose(K.clip_by_norm(rows, 1.0, per_example=True),
                             [[0.6, 0.8], [0.3, 0.4]], rtol=1e-6)
  np.testing.assert_allclose(
      K.dp_losses(jax.random.key(0), losses, 1.0, 0.0, per_example=True), [1.0, 0.5, -1.0, 0.0],
      rtol=1e-6)


def test_published_epsilon_defaults_to_the_papers_classic_accounting():
  """The default accounting is tf-privacy's: its orders 1.1, ..., 10.9, 12, ..., 63 and the
  classic conversion ``min_α RDP(α) + log(1/δ)/(α - 1)`` (Mironov 2017), here of
  dp_accounting's RDP (its improved ε at one order, converted back) at fewer orders."""
  assert kd_privacy.PAPER_ORDERS == tuple(
      [1.0 + x / 10.0 for x in range(1, 100)] + [float(o) for o in range(12, 64)])
  q, sigma, steps, delta = 50 / 10_000, 1.1, 4_000, 1e-5
  event = dp_accounting.PoissonSampledDpEvent(q, dp_accounting.GaussianDpEvent(sigma))
  classic = []
  for a in ORDERS:
    ref = rdp_privacy_accountant.RdpAccountant([float(a)])
    ref.compose(event, steps)  # ε = RDP + log(1 - 1/α) - log(δα)/(α - 1) at one order
    classic.append(ref.get_epsilon(delta) - math.log1p(-1 / a) + math.log(a) / (a - 1))
  eps, order = K.published_epsilon(q, sigma, steps, delta, orders=ORDERS)
  assert eps == pytest.approx(min(classic), rel=1e-6)
  assert order == ORDERS[int(np.argmin(classic))]


def test_soft_label_calibration_never_exceeds_the_target_whatever_gnmax_rounds(monkeypatch):
  """``σ = σ_g/√2`` of GNMax's calibration may land a few ulps under the σ that spends
  exactly the target: the calibration steps up until this mechanism's own ε is ≤ target.
  (The regression settings of test_soft_label_epsilon_and_calibration no longer land
  there; here GNMax's answer is placed 2e-15 under on purpose.)"""
  n, delta, exact = 1000, 1e-5, 30.0
  target = K.soft_label_epsilon(exact, n, delta, orders=ORDERS)[0]
  low = exact * (1 - 2e-15)  # about 17 ulps under
  assert K.soft_label_epsilon(low, n, delta, orders=ORDERS)[0] > target  # the ulps matter
  monkeypatch.setattr(acc, "calibrate_noise", lambda *a, **k: low * math.sqrt(2.0))
  sigma = K.calibrate_soft_label_noise(target, n, delta, orders=ORDERS)
  assert K.soft_label_epsilon(sigma, n, delta, orders=ORDERS)[0] <= target
  assert low < sigma <= exact * (1 + 1e-15)


def test_poisson_batch_holds_exactly_the_rows_its_bernoulli_draws_chose():
  """Each of N rows is in the batch iff its Bernoulli(q) draw (from the batch's key) is 1:
  the mask marks exactly that many leading slots, holding those rows in order."""
  keys = jax.random.split(jax.random.key(0), 5)
  rows, mask, chosen = jax.device_get(jax.jit(jax.vmap(lambda k: (
      *K.poisson_batch(k, 200, 0.1, 60), jax.random.bernoulli(k, 0.1, (200,)))))(keys))
  for r, m, c in zip(rows, mask, chosen):
    c = np.flatnonzero(c)
    np.testing.assert_array_equal(m, np.arange(60) < c.size)
    np.testing.assert_array_equal(r[m], c)


def test_discriminator_step_scores_a_constant_discriminator_on_the_public_batch():
  """D(x, y) = c everywhere (the student, all zeros, samples from the uniform): the loss is
  (softplus(−c) + softplus(c)) per real row over B, and the accuracy, the mean of "teacher
  sample called real" (c > 0) and "student sample called fake" (c < 0), is 1/2 whatever the
  sign of c."""
  gan = _gan(batch_size=8)
  x_all = jax.random.normal(jax.random.key(0), (40, 4, 4, 1))
  tl_all = jax.nn.log_softmax(jax.random.normal(jax.random.key(1), (40, C)))
  state = jax.tree.map(lambda s: jnp.zeros(s.shape, s.dtype),
                       jax.eval_shape(lambda x: K.init(gan, jax.random.key(2), x), x_all))
  key = jax.random.key(5)
  n = int(kd_train._batch(gan, key, x_all, tl_all)[2].sum())
  step = jax.jit(lambda s: K.discriminator_step(gan, s, key, x_all, tl_all)[1])
  for c in (2.0, -1.5):
    disc = jax.tree.map(jnp.zeros_like, state["disc"])
    disc["Dense_1"]["bias"] = jnp.full_like(disc["Dense_1"]["bias"], c)
    loss, accuracy = step({**state, "disc": disc})
    want = n * (math.log1p(math.exp(-c)) + math.log1p(math.exp(c))) / 8
    np.testing.assert_allclose(float(loss), want, rtol=1e-5)
    np.testing.assert_allclose(float(accuracy), 0.5)


@pytest.mark.parametrize("field, value, match", [
    ("noise_multiplier", 0.0, r"^config.noise_multiplier must be > 0; got 0.0$"),
    ("noise_multiplier", float("nan"), r"^config.noise_multiplier must be finite; got nan$"),
    ("clip", -1.0, r"^config.clip must be > 0; got -1.0$"),
    ("tau", float("inf"), r"^config.tau must be finite; got inf$"),
    ("delta", 1.0, r"^config.delta must lie in \(0, 1\); got 1.0$"),
    ("curve.max_epsilon", -2.0, r"^config.curve.max_epsilon must be > 0; got -2.0$"),
    ("batch_size", 0, r"^config.batch_size must be an integer >= 1; got 0$"),
    ("batch_size", 150, r"^config.table1.public_sizes must be >= config.batch_size = 150 "),
])
def test_the_published_mechanisms_settings_are_refused_before_the_teacher_trains(
    tmp_path, field, value, match):
  """Read once the teacher was trained (the curve's ε bisection, Eq. 5's noise): a σ of 0,
  a δ of 1 or a batch larger than a public set (a rate B/N above 1) failed there, naming
  ``q`` or ``noise_multiplier`` without the config. Refused before anything is read or
  written, and by --dry_run."""
  from pate_jax import experiment  # pylint: disable=g-import-not-at-top
  from pate_jax.stages import kd_gan as stage  # pylint: disable=g-import-not-at-top
  config = experiment.load_script(
      pathlib.Path(__file__).resolve().parent.parent / "configs" / "kd_gan.py").get_config(
          "smoke")
  target, name = (config.curve, "max_epsilon") if field == "curve.max_epsilon" else (
      config, field)
  target[name] = value
  _scripts.assert_refused_before_work(stage.run, stage.plan, config, tmp_path / "w", match)


@pytest.mark.parametrize("field, value, match", [
    ("epochs", 0, r"^config.epochs must be > 0; got 0.0$"),
    ("epochs", float("inf"), r"^config.epochs must be finite; got inf$"),
    ("epochs", "x", r"^config.epochs must be a real number; got 'x'$"),
    ("learning_rate", -1.0, r"^config.learning_rate must be > 0; got -1.0$"),
    ("disc_learning_rate", float("nan"), r"^config.disc_learning_rate must be finite; got nan$"),
    ("teacher.learning_rate", 0.0, r"^config.teacher.learning_rate must be > 0; got 0.0$"),
    ("gumbel_temperature", -1.0, r"^config.gumbel_temperature must be > 0; got -1.0$"),
    ("segment_rounds", 0, r"^config.segment_rounds must be an integer >= 1; got 0$"),
    ("segment_rounds", float("inf"), r"^config.segment_rounds must be an integer >= 1; got inf$"),
    ("k_s", 0, r"^config.k_s must be an integer >= 1; got 0$"),
    ("k_s", "x", r"^config.k_s must be an integer >= 1; got 'x'$"),
    ("k_d", -1, r"^config.k_d must be an integer >= 0; got -1$"),
    ("num_seeds", 0, r"^config.num_seeds must be an integer >= 1; got 0$"),
    ("num_seeds", float("nan"), r"^config.num_seeds must be an integer >= 1; got nan$"),
    ("audit_rounds", -1, r"^config.audit_rounds must be an integer >= 0; got -1$"),
    ("teacher.batch_size", 0, r"^config.teacher.batch_size must be an integer >= 1; got 0$"),
    ("teacher.num_steps", -1, r"^config.teacher.num_steps must be an integer >= 1; got -1$"),
    ("curve.lam", 1.5, r"^config.curve.lam must lie in \[0, 1\]; got 1.5$"),
    ("table1.lambdas", (1.0, float("nan")), r"^config.table1.lambdas must be finite; got nan$"),
    ("seed", -1, r"^config.seed must be an integer in \[0, 2\*\*32\), got -1$"),
    ("student_kwargs.hidden", (0,), r"^config.student_kwargs.hidden must hold integers >= 1"),
    ("student_kwargs.hidden", "x", r"^config.student_kwargs.hidden must be a tuple"),
    ("student_model", "mlpp", r"^config.student_model must be one of"),
    ("teacher.model_kwargs.hidden", (8, -1),
     r"^config.teacher.model_kwargs.hidden must hold integers >= 1; found -1 at \(1,\)$"),
    ("teacher.model", "cnn", r"^config.teacher.model must be one of"),
    ("disc_hidden", (-1,), r"^config.disc_hidden must hold integers >= 1; found -1 at \(0,\)$"),
    ("disc_hidden", (1.5,), r"^config.disc_hidden must hold integers >= 1"),
])
def test_the_training_settings_are_refused_before_the_teacher_trains(
    tmp_path, monkeypatch, field, value, match):
  """Read only once the teacher was trained (the epochs' rounds, the students' fits): a
  0, a negative, NaN, infinite or string value failed there (or in --dry_run as a
  ZeroDivisionError or an int() of NaN). Refused before anything is read or trained, and by
  --dry_run, naming the field."""
  from pate_jax import experiment  # pylint: disable=g-import-not-at-top
  from pate_jax.stages import kd_gan as stage  # pylint: disable=g-import-not-at-top
  config = experiment.load_script(
      pathlib.Path(__file__).resolve().parent.parent / "configs" / "kd_gan.py").get_config(
          "smoke")
  *parents, name = field.split(".")
  target = config
  for p in parents:
    target = target[p]
  with target.ignore_type():
    target[name] = value

  def setup(*args, **kwargs):
    raise AssertionError("the public data is read and the teacher trained")

  monkeypatch.setattr(stage, "setup", setup)
  _scripts.assert_refused_before_work(stage.run, stage.plan, config, tmp_path / "w", match)
