"""Smooth-sensitivity release of data-dependent ε (Papernot et al. 2018, Sec. 4, Apps. B-C):
tf-privacy's published test arrays, hand-derived cases, a per-query/per-distance loop of the
same maths (pate_jax.stages.bench.reference_loops, the benchmark's baseline), vmap = loop,
gradients, bad input."""

from __future__ import annotations

import json
import itertools
import math
import pathlib

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.special
import scipy.stats
from jax.test_util import check_grads

from pate_jax import accounting as acc
from pate_jax import experiment
from pate_jax.accounting import _local_sensitivity as local
from pate_jax.accounting import _smooth_sensitivity as ss
from pate_jax.stages.bench import reference_loops as reference
from pate_jax.stages.bench.reference_loops import synthetic_votes

REPO = pathlib.Path(__file__).resolve().parent.parent


@pytest.fixture(autouse=True)
def _x64():
  with jax.enable_x64(True):
    yield


# ------------------------------------------------------------------ tf-privacy's published values
# research/pate_2018/smooth_sensitivity_test.py (arrays of expected outputs).

def test_gnmax_local_sensitivity_published_going_right():
  expected = np.array([3.13503646e-17, 1.60178280e-08, 5.90681786e-03] + [5.99981308e+00] * 7)
  out = acc.gnmax_local_sensitivity(np.array([10, 0, 0]), 10, 0.5, 1.5)
  assert out.shape == (10,) and out.dtype == jnp.float64
  np.testing.assert_allclose(out, expected, rtol=1e-8, atol=0)


def test_gnmax_local_sensitivity_published_going_left():
  expected = np.array([0.0] * 298 + [2.77693450548e-7, 2.10853979548e-6]
                      + [2.73113623988e-6] * 1700)
  out = acc.gnmax_local_sensitivity(np.array([1000, 500, 300, 200, 0]), 2000, 250.0, 10.0)
  np.testing.assert_allclose(out, expected, rtol=1e-8, atol=1e-20)


_THRESHOLD_PUBLISHED = {
    16: [0] * 3 + [
        1.48454129e-04, 1.47826870e-02, 3.94153241e-02, 6.45775697e-02, 9.01543247e-02,
        1.16054002e-01, 1.42180452e-01, 1.42180452e-01, 1.48454129e-04, 1.47826870e-02,
        3.94153241e-02, 6.45775697e-02, 9.01543266e-02, 1.16054000e-01, 1.42180452e-01,
        1.68302106e-01, 1.93127860e-01] + [0] * 10,
    2: [1.60212079e-01, 2.07021132e-01, 2.07021132e-01, 1.93127860e-01, 1.68302106e-01,
        1.42180452e-01, 1.16054002e-01, 9.01543247e-02, 6.45775697e-02, 3.94153241e-02,
        1.47826870e-02, 1.48454129e-04] + [0] * 18,
    50: [1.35750725752e-19, 1.88990500499e-17, 2.05403154065e-15, 1.74298153642e-13,
         1.15489723995e-11, 5.97584949325e-10, 2.41486826748e-08, 7.62150641922e-07,
         1.87846248741e-05, 0.000360973025976, 0.000360973025976, 2.76377015215e-50,
         1.00904975276e-53, 2.87254164748e-57, 6.37583360761e-61, 1.10331620211e-64,
         1.48844393335e-68, 1.56535552444e-72, 1.28328011060e-76, 8.20047697109e-81]
        + [0] * 10,
}


@pytest.mark.parametrize("threshold", [16, 2, 50])
def test_threshold_local_sensitivity_published(threshold):
  """tf-privacy's arrays hold max(ls(m + d), ls(m - d)), the two ends; ours is their running
  maximum (every top count within d), equal to it below d = max(m, T - m) = 20 (top count
  m = 20 of T = 30), which tf-privacy never fills (its loop stops one short): there the top
  count can be 0, and our bound covers that histogram's local sensitivity."""
  expected = np.array(_THRESHOLD_PUBLISHED[threshold], np.float64)
  counts = np.array([20, 10, 0])
  out = np.asarray(acc.threshold_local_sensitivity(counts, 30, threshold, 2.0, 10.0))
  # The published arrays hold 9 digits (entries 7 and 15 of t=16 differ by 2e-8 where
  # they should be equal): 5e-8 relative.
  np.testing.assert_allclose(out[:20], np.maximum.accumulate(expected)[:20], rtol=5e-8, atol=0)
  loop = reference.loop_threshold_ls(counts, 30, threshold, 2.0, 10.0)
  np.testing.assert_allclose(out, loop, rtol=1e-9)
  assert np.all(np.diff(out) >= 0)
  if threshold == 16:
    assert out[20] > expected[20] == 0  # what tf-privacy leaves at 0: an under-estimate


def test_threshold_local_sensitivity_published_fractional_counts():
  """tf-privacy's interactive-GNMax case (fractional, negative scores; the top count is
  rounded half to even): the public API refuses such votes, the core reproduces it."""
  expected = np.array([0.0620410301, 0.0875807131, 0.113451958, 0.139561671, 0.1657074530,
                       0.1908244840, 0.2070270720, 0.207027072, 0.169718100, 0.0575152142,
                       0.00678695871] + [0] * 6 + [0.000536304908, 0.0172181073, 0.041909870]
                      + [0] * 10)
  out = np.asarray(local.threshold_local_sensitivity_core(
      np.array([[19.5, -5.1, 0.0]]), 10.1, 2.0, np.array([10.0]), num_teachers=30))[0, 0]
  # Its two ends' running maximum (the published test above).
  np.testing.assert_allclose(out[:20], np.maximum.accumulate(expected)[:20], rtol=5e-8, atol=0)
  assert np.all(np.diff(out) >= 0)
  with pytest.raises(ValueError, match="votes"):
    acc.threshold_local_sensitivity(np.array([19.5, -5.1, 0.0]), 30, 10.1, 2.0, 10.0)


# ------------------------------------------------------------------ hand-derived cases

def test_gnss_rdp_closed_form():
  beta, sigma, order = 0.1, 2.0, 3.0
  hand = order * math.exp(2 * beta) / sigma**2 + (beta * order - 0.5 * math.log(
      1 - 2 * order * beta)) / (order - 1)
  np.testing.assert_allclose(acc.gnss_rdp(beta, sigma, order), hand, rtol=1e-15)
  grid = acc.gnss_rdp(np.array([0.01, 0.05]), 3.0, np.array([[2.0], [4.0]]))
  assert grid.shape == (2, 2)


def test_smooth_sensitivity_hand():
  ls = np.array([1.0, 3.0, 2.0])
  np.testing.assert_allclose(acc.smooth_sensitivity(ls, math.log(2.0)), 1.5, rtol=1e-15)
  np.testing.assert_allclose(acc.smooth_sensitivity(ls, 10.0), 1.0, rtol=1e-15)
  batched = acc.smooth_sensitivity(np.stack([ls, ls[::-1]]), math.log(2.0))
  np.testing.assert_allclose(batched, [1.5, 2.0], rtol=1e-15)


def test_left_walk_levels_the_other_classes_from_the_top():
  """Votes (5, 4, 4, 1): each left step moves one vote from the largest other class to
  the top; the other classes after d steps, by hand."""
  others_by_hand = [[4, 4, 1], [4, 3, 1], [3, 3, 1], [3, 2, 1], [2, 2, 1], [2, 1, 1],
                    [1, 1, 1], [1, 1, 0], [1, 0, 0], [0, 0, 0]]
  left, right, rest = local._walk_gaps(jnp.array([[5.0, 4.0, 4.0, 1.0]]), 14)
  for d, others in enumerate(others_by_hand):
    np.testing.assert_array_equal(left[0, d], 5 + d - np.array(others))
  np.testing.assert_array_equal(right[0, 2], [5 - 2 - 4 - 2, 5 - 2 - 4, 5 - 2 - 1])
  assert float(rest[0]) == 9.0


def test_q0_is_where_theorem6_meets_the_data_independent_bound():
  sigma, orders = 40.0, np.array([2.0, 8.0, 20.0, 50.0])
  log_q0, log_q1, _ = local.gnmax_constants(sigma, jnp.asarray(orders), num_classes=2)
  for lq, lam in zip(np.asarray(log_q0), orders):
    np.testing.assert_allclose(reference._theorem6(lq, sigma, lam), lam / sigma**2, rtol=1e-12)
    np.testing.assert_allclose(lq, reference.loop_log_q0(sigma, lam), rtol=1e-10)
  # bl and bu: the union bound of a two-class histogram moved by one teacher (gap ± 2).
  gap = 30.0
  log_q = scipy.special.log_ndtr(-gap / (math.sqrt(2.0) * sigma))
  bl, bu = jax.jit(local._log_bl_bu, static_argnums=2)(jnp.float64(log_q), jnp.float64(sigma), 2)
  np.testing.assert_allclose(log_q1, jax.jit(local._log_bl_bu, static_argnums=2)(
      log_q0, jnp.float64(sigma), 2)[0], rtol=1e-15)
  np.testing.assert_allclose(bl, scipy.special.log_ndtr(-(gap + 2) / (math.sqrt(2) * sigma)),
                             rtol=1e-13)
  np.testing.assert_allclose(bu, scipy.special.log_ndtr(-(gap - 2) / (math.sqrt(2) * sigma)),
                             rtol=1e-13)


def test_plateau_everywhere_inside_q1_q0():
  """A histogram whose q lies in [q1, q0] does not walk: A(d) is the plateau for all d.
  (Row 0; the shapes and noise of the loop test, so nothing new is compiled.)"""
  sigma, order = 3.0, 6.0
  votes = synthetic_votes(3, 6, 60, 5)
  votes[0] = [30, 21, 9, 0, 0]
  log_q0, log_q1, plateau = (float(x[0]) for x in local.gnmax_constants(
      sigma, jnp.array([order]), num_classes=5))
  assert log_q1 <= float(acc.gnmax_log_q(votes, sigma)[0]) <= log_q0
  out = np.asarray(acc.gnmax_local_sensitivity(votes, 60, sigma, order))[0]
  np.testing.assert_allclose(out, plateau, rtol=0)
  assert plateau > 0


def _two_query_threshold_ss(num_teachers, threshold, sigma, order, beta):
  """``S[m1, m2]``: the threshold step's smooth sensitivity of a release summing two
  queries whose top counts are m1 and m2 (3 classes; the step depends on the top alone)."""
  tops = np.arange(-(-num_teachers // 3), num_teachers + 1)
  hists = np.stack([tops, (num_teachers - tops) // 2, num_teachers - tops - (num_teachers - tops) // 2], 1)
  a = np.asarray(acc.threshold_local_sensitivity(hists, num_teachers, threshold, sigma, order))
  return tops, np.asarray(acc.smooth_sensitivity(a[:, None, :] + a[None, :, :], beta))


def _neighbours(votes: np.ndarray):
  """Every histogram one teacher away from ``votes`` (one vote moved between classes)."""
  for i in range(len(votes)):
    for j in range(len(votes)):
      if i != j and votes[i] > 0:
        out = votes.copy()
        out[i] -= 1
        out[j] += 1
        yield out


@pytest.mark.slow  # 3-4 s each (a compile per shape)
@pytest.mark.parametrize("votes,teachers,sigma,orders", [
    # log q0 at its bracket's end (Theorem 6 still below λ/σ² there: β jumps at q0), where
    # bu(bl(q0)) rounded below q0 and the plateau missed the jump (found by fuzzing).
    (np.array([1, 4, 7] + [0] * 97), 12, 0.8888904222536792, [1.25]),
    (np.array([4, 5, 0, 0, 9, 2, 0, 0, 0, 0]), 20, 1.0183387287773469, [1.25]),
    (np.array([4, 5, 0, 0, 9, 2, 0, 0, 0, 0]), 20, 1.0183387287773469, [1.25, 1.25]),
])
def test_the_local_sensitivity_bounds_every_neighbours_change_where_beta_jumps(
    votes, teachers, sigma, orders):
  orders = np.asarray(orders)
  bound = np.asarray(acc.gnmax_local_sensitivity(votes, teachers, sigma, orders))[..., 0]
  here = np.asarray(acc.gnmax_rdp(votes[None], sigma, orders))[0]
  moved = np.abs(np.asarray(acc.gnmax_rdp(np.stack(list(_neighbours(votes))), sigma, orders))
                 - here).max()
  assert moved > 1.0 and np.all(bound.ravel() >= moved), (bound, moved)


def test_the_threshold_steps_summed_smooth_sensitivity_is_beta_smooth():
  """Theorem 23 (2018) needs S(D) <= e^β S(D') for neighbours D, D' of the *sum* it releases.
  One teacher moves each query's top count by at most 1, so over every pair of top counts
  S(m1, m2) <= e^β S(m1 ± 1, m2 ± 1). With A(d) = max(ls(m + d), ls(m - d)), the two ends
  only (tf-privacy's), this fails at 40 teachers, threshold 20, σ_T 2, λ 8, β 0.05: S falls
  from 0.2905 at (32, 28) to 0.2602 at (32, 27) (ratio 0.896 < e^-β); and S(32, 27) must be
  at least e^{-5β} · 0.376, the change one teacher makes at (32, 32), 5 teachers away."""
  beta = 0.05
  tops, ss_sum = _two_query_threshold_ss(40, 20.0, 2.0, 8.0, beta)
  for d1 in (-1, 0, 1):
    for d2 in (-1, 0, 1):
      here = ss_sum[max(0, -d1):len(tops) - max(0, d1), max(0, -d2):len(tops) - max(0, d2)]
      there = ss_sum[max(0, d1):len(tops) + min(0, d1), max(0, d2):len(tops) + min(0, d2)]
      assert np.all(here <= math.exp(beta) * there * (1 + 1e-12)), (d1, d2)
  # The lower bound at (32, 27) from the local sensitivity at (32, 32): the step at a top
  # count of 32 (to 33) taken by both queries at once.
  r = lambda m: float(acc.confident_threshold_rdp(np.array([[m, 40 - m, 0]]), 20.0, 2.0,
                                                  np.array([8.0]))[0, 0])
  i, j = list(tops).index(32), list(tops).index(27)
  assert ss_sum[i, j] >= math.exp(-5 * beta) * 2 * abs(r(33) - r(32)) * (1 - 1e-12)


# ------------------------------------------------------------------ the loop of the same maths

def test_local_sensitivities_equal_the_per_distance_loop():
  votes = synthetic_votes(3, 6, 60, 5)
  for sigma, order in ((3.0, 6.0), (10.0, 20.0)):
    loop = np.stack([reference.loop_gnmax_ls(c, 60, sigma, order) for c in votes])
    np.testing.assert_allclose(acc.gnmax_local_sensitivity(votes, 60, sigma, order), loop,
                               rtol=1e-9, atol=1e-300)
  loop = np.stack([reference.loop_threshold_ls(c, 60, 40.0, 4.0, 8.0) for c in votes])
  np.testing.assert_allclose(acc.threshold_local_sensitivity(votes, 60, 40.0, 4.0, 8.0),
                             loop, rtol=1e-9, atol=1e-300)


@pytest.mark.slow
def test_release_equals_the_loop():
  """Both steps data-dependent (small teacher count and noise) and the paper's MNIST noise.
  (Order 3 at σ = 3, 5 classes: condition C6 fails there from order 4 on.)"""
  for t, c, thr, s1, s2, order in ((60, 5, 40.0, 5.0, 3.0, 3.0),
                                   (250, 10, 200.0, 150.0, 40.0, 20.0)):
    votes = synthetic_votes(4, 6 if t == 60 else 40, t, c)
    loop = reference.loop_release(votes, t, thr, s1, s2, order, 1e-5)
    out = acc.smooth_sensitivity_release(votes, num_teachers=t, threshold=thr,
                                         sigma_threshold=s1, sigma=s2, order=order, delta=1e-5)
    for name in ("rdp", "smooth_sensitivity", "sigma_ss", "rdp_release", "epsilon_before",
                 "epsilon", "beta", "cost"):
      np.testing.assert_allclose(getattr(out, name), loop[name], rtol=1e-9, err_msg=name)
  assert not bool(out.data_independent_answer) and bool(out.data_independent_threshold)


# ------------------------------------------------------------------ batching

@pytest.mark.slow
def test_vmap_equals_loop_and_leading_axis():
  votes = synthetic_votes(5, 6, 60, 5)   # the shapes of the loop test (compiled once)
  single = lambda row: acc.gnmax_local_sensitivity(row, 60, 4.0, 8.0)
  batched = acc.gnmax_local_sensitivity(votes, 60, 4.0, 8.0)
  mapped = jax.vmap(single)(jnp.asarray(votes))
  looped = np.stack([single(row) for row in votes])
  np.testing.assert_allclose(mapped, looped, rtol=1e-13, atol=1e-300)
  np.testing.assert_allclose(batched, looped, rtol=1e-13, atol=1e-300)


def test_orders_axis_equals_one_order_at_a_time():
  votes = synthetic_votes(6, 6, 60, 5)
  orders = np.array([3.0, 8.0, 30.0])
  many = acc.gnmax_local_sensitivity(votes, 60, 4.0, orders)
  assert many.shape == (6, 3, 60)
  for k, lam in enumerate(orders):
    np.testing.assert_allclose(many[:, k], acc.gnmax_local_sensitivity(votes, 60, 4.0, lam),
                               rtol=1e-13, atol=1e-300)


# ------------------------------------------------------------------ gradients

def test_gradients_of_gnss_and_smooth_sensitivity():
  check_grads(lambda b, s: acc.gnss_rdp(b, s, 4.0), (0.05, 3.0), order=1, modes=["rev"])
  ls = jnp.array([1.0, 3.0, 2.0])
  check_grads(lambda a, b: acc.smooth_sensitivity(a, b), (ls, 0.3), order=1, modes=["rev"])


def _central_difference(f, x, eps=1e-6):
  return (float(f(x + eps)) - float(f(x - eps))) / (2 * eps)


@pytest.mark.slow
def test_gradient_of_local_sensitivity_in_sigma():
  """Through q0, q1 and the plateau (the implicit-function derivative of the bisection),
  Algorithm 3 and the walk, away from the walk's switching points: forward mode (one
  scalar input) against central differences."""
  votes = synthetic_votes(3, 6, 60, 5)
  f = lambda s: jnp.sum(acc.gnmax_local_sensitivity(votes, 60, s, 6.0))
  np.testing.assert_allclose(jax.jacfwd(f)(3.0), _central_difference(f, 3.0), rtol=1e-5)


# ------------------------------------------------------------------ release

@pytest.mark.slow
def test_release_data_independent_and_noise():
  votes = synthetic_votes(7, 40, 250, 10)
  # σ = 150: GNMax's data-dependent bound never helps at λ = 2 -> nothing to release.
  flat = acc.smooth_sensitivity_release(votes, threshold=200.0, sigma_threshold=150.0,
                                        sigma=150.0, order=2.0, delta=1e-5)
  assert bool(flat.data_independent_answer) and bool(flat.data_independent_threshold)
  assert float(flat.beta) == 0.0 and float(flat.noise_std) == 0.0
  assert float(flat.sigma_ss) == np.inf
  assert float(flat.epsilon) == float(flat.epsilon_before)
  assert float(acc.release_epsilon(jax.random.key(0), flat)) == float(flat.epsilon)
  out = acc.smooth_sensitivity_release(votes, threshold=200.0, sigma_threshold=150.0,
                                       sigma=40.0, order=20.0, delta=1e-5)
  keys = jax.random.split(jax.random.key(1), 4000)
  draws = np.asarray(jax.vmap(lambda k: acc.release_epsilon(k, out))(keys))
  assert abs(draws.mean() - float(out.epsilon)) < 4 * float(out.noise_std) / math.sqrt(4000)
  np.testing.assert_allclose(draws.std(), float(out.noise_std), rtol=0.1)
  np.testing.assert_allclose(float(out.noise_std),
                             float(out.smooth_sensitivity) * float(out.sigma_ss), rtol=1e-14)
  assert float(acc.release_epsilon(jax.random.key(2), out)) == float(
      acc.release_epsilon(jax.random.key(2), out))
  # Every draw lies on the fixed grid (its float64 bits would name the votes).
  np.testing.assert_array_equal(draws, np.round(draws / acc.RELEASE_GRID) * acc.RELEASE_GRID)


def test_the_release_grid_rounds_to_the_nearest_multiple_and_nothing_else():
  """on_release_grid: a fixed grid of 2^-10, the nearest multiple, idempotent; the
  low bits of two values that differ only there are gone."""
  assert acc.RELEASE_GRID == 2.0 ** -10
  with jax.enable_x64(True):
    x = np.array([0.0, 1.0, 2.034, -0.7, 40.58660497975879, 1e4 + 1e-9])
    g = np.asarray(acc.on_release_grid(x))
    assert g.dtype == np.float64
    np.testing.assert_array_equal(g / acc.RELEASE_GRID, np.round(g / acc.RELEASE_GRID))
    assert np.all(np.abs(g - x) <= acc.RELEASE_GRID / 2)
    np.testing.assert_array_equal(np.asarray(acc.on_release_grid(g)), g)
    near = np.nextafter(40.58660497975879, 41.0)
    assert float(acc.on_release_grid(near)) == float(acc.on_release_grid(40.58660497975879))


def _release_at(epsilon, noise_std):
  """A Release with the given expectation and noise std (the other fields play no part)."""
  return acc.Release(*[np.float64(x) for x in (8.0, 0.05, 0.3, 6.0, noise_std, 1.0, 0.2, 1.5,
                                               epsilon, 5.0, 10.0, 0.0, 0.0)])


def test_the_released_cell_is_that_of_the_exact_real_sum():
  """Where the float64 sum ε + std·z rounds onto a cell's edge from either side, the
  released cell is the exact real sum's (fractions), not the rounded sum's: a rounding
  could otherwise move a draw across an edge, outside what the sampler's δ term charges."""
  from fractions import Fraction  # pylint: disable=g-import-not-at-top
  g = acc.RELEASE_GRID
  jitted = jax.jit(acc.release_epsilon)
  checked = moved = 0
  for i in range(40):
    key = jax.random.key(i)
    std = (1.0, 2.169507668846216, 0.7)[i % 3]  # not only powers of two: the product rounds
    z = float(jax.random.normal(key, (), jnp.float64))
    b = (std / g) * z  # the one rounding: the grid's scaling is a power of two
    edge = 3000.5 + i
    # a: the floats nearest ``edge - b``, where ``a + b`` rounds onto the edge or near it.
    below, above = [edge - b], [edge - b]
    for _ in range(3):
      below.append(np.nextafter(below[-1], -np.inf))
      above.append(np.nextafter(above[-1], np.inf))
    for a in below + above[1:]:
      exact = Fraction(a) + Fraction(b)
      want = math.floor(exact + Fraction(1, 2))
      if exact - math.floor(exact) == Fraction(1, 2):
        want = round(exact)  # a tie: to even, as jnp.round
      got = float(acc.release_epsilon(key, _release_at(a * g, std)))
      assert got == want * g, (i, a, b)
      # Compiled as one program too (the compiler must not simplify the two-sum away).
      assert float(jitted(key, _release_at(a * g, std))) == want * g, (i, a, b)
      moved += float(np.round(a + b)) != want
      checked += 1
  assert moved > 0, "no case where the float sum's rounding crosses an edge"
  assert checked == 40 * 7


def test_the_released_epsilon_is_clipped_to_zero_and_upper():
  """A draw below 0 is published as 0; one above ``upper`` as ``upper`` (both public); the
  bound is checked."""
  low = _release_at(0.001, 50.0)
  draws = np.array([float(acc.release_epsilon(jax.random.key(i), low, 2.0))
                    for i in range(30)])
  assert draws.min() == 0.0 and draws.max() == 2.0
  inside = draws[(draws > 0) & (draws < 2.0)]
  np.testing.assert_array_equal(inside, np.round(inside / acc.RELEASE_GRID) * acc.RELEASE_GRID)
  unclipped = np.array([float(acc.release_epsilon(jax.random.key(i), low)) for i in range(30)])
  assert unclipped.min() == 0.0 and unclipped.max() > 2.0
  # Where nothing is data-dependent, the bound itself (data-independent) is published,
  # not rounded, but clipped.
  assert float(acc.release_epsilon(jax.random.key(0), _release_at(1.2345, 0.0), 2.0)) == 1.2345
  assert float(acc.release_epsilon(jax.random.key(0), _release_at(3.0, 0.0), 2.0)) == 2.0
  # A std that is no std publishes nothing (NaN); so does a traced upper below 0.
  for std in (-1.0, float("nan")):
    assert np.isnan(float(acc.release_epsilon(jax.random.key(0), _release_at(1.0, std))))
  assert np.isnan(float(jax.jit(acc.release_epsilon)(jax.random.key(0), low, -1.0)))
  for bad in (-1.0, float("nan"), "2", None):
    with pytest.raises(ValueError, match="upper"):
      acc.release_epsilon(jax.random.key(0), low, bad)


@pytest.mark.slow
@pytest.mark.parametrize("conversion", ["classic", "improved"])
def test_release_epsilons_use_its_conversion_and_its_cost_is_the_sum(conversion):
  """ε before and after the release are the conversion's of the release's own RDP, and
  the cost it minimises is ``rdp + ε_ss + 2·SS·σ_ss`` (its docstring)."""
  votes = synthetic_votes(7, 40, 250, 10)
  r = acc.smooth_sensitivity_release(votes, threshold=200.0, sigma_threshold=150.0,
                                     sigma=40.0, order=20.0, delta=1e-5,
                                     conversion=conversion)
  eps = lambda rdp: float(acc.rdp_to_epsilon(np.array([float(rdp)]), np.array([20.0]), 1e-5,
                                             conversion)[0])
  assert float(r.beta) > 0 and float(r.noise_std) > 0  # a release with noise
  np.testing.assert_allclose(float(r.epsilon_before), eps(r.rdp), rtol=1e-12)
  np.testing.assert_allclose(float(r.epsilon), eps(float(r.rdp) + float(r.rdp_release)),
                             rtol=1e-12)
  np.testing.assert_allclose(float(r.cost), float(r.rdp) + float(r.rdp_release)
                             + 2 * float(r.noise_std), rtol=1e-12)


@pytest.mark.slow
def test_release_choices():
  votes = synthetic_votes(8, 40, 250, 10)
  kw = dict(threshold=200.0, sigma_threshold=150.0, sigma=40.0, delta=1e-5)
  # order=None: the order of DEFAULT_ORDERS with the smallest data-dependent ε (classic),
  # among those where conditions C5 and C6 hold (here up to 32; the smallest ε over all of
  # DEFAULT_ORDERS is at 40, where C6 fails).
  chosen = acc.smooth_sensitivity_release(votes, **kw)
  pool = acc.valid_release_orders(40.0, 10, acc.DEFAULT_ORDERS)
  rdp = acc.rdp_accountant(pool, conversion="classic").compose(
      acc.confident_gnmax_rdp(votes, 200.0, 150.0, 40.0, pool))
  assert float(chosen.order) == float(rdp.epsilon(1e-5)[1]) and float(chosen.order) in pool
  # Several orders: (λ, β) jointly, never worse than any single order.
  orders = np.array([8.0, 14.0, 20.0])
  joint = acc.smooth_sensitivity_release(votes, order=orders, **kw)
  singles = [acc.smooth_sensitivity_release(votes, order=lam, **kw) for lam in orders]
  best = min(singles, key=lambda r: float(r.cost) - math.log(1e-5) / (float(r.order) - 1))
  assert float(joint.order) == float(best.order)
  np.testing.assert_allclose(joint.epsilon, best.epsilon, rtol=1e-13)
  # Realised answers: all answered equals plain GNMax; fixed σ_ss and β are used as given.
  gn = acc.smooth_sensitivity_release(votes, sigma=40.0, order=20.0, delta=1e-5)
  real = acc.smooth_sensitivity_release(votes, sigma=40.0, order=20.0, delta=1e-5,
                                        answered=np.ones(40, bool))
  np.testing.assert_allclose(real.epsilon, gn.epsilon, rtol=1e-14)
  betas = np.linspace(0.001, 0.02, 20)  # (20 values: the default grid's compiled shape)
  fixed = acc.smooth_sensitivity_release(votes, sigma=40.0, order=20.0, delta=1e-5,
                                         betas=betas, sigma_ss=10.0)
  assert float(fixed.beta) in betas and float(fixed.sigma_ss) == 10.0
  np.testing.assert_allclose(fixed.rdp_release, acc.gnss_rdp(fixed.beta, 10.0, 20.0),
                             rtol=1e-14)


def _conds(jaxpr):
  """The number of ``cond`` equations in ``jaxpr`` and the jaxprs inside it."""
  return sum((e.primitive.name == "cond")
             + sum(_conds(sub) for sub in jax.extend.core.jaxprs_in_params(e.params))
             for e in jaxpr.eqns)


def test_a_gnmax_release_traces_no_threshold_step():
  """``confident`` is static in release_core: a GNMax release's program holds only the
  GNMax step's ``A(d)`` (one ``cond``, against two for Confident-GNMax, whose threshold
  step it would discard: a third of the compile), and its release is, bit for bit, that
  of the program with ``confident`` traced (one program for both mechanisms)."""
  votes = np.asarray(synthetic_votes(4, 11, 60, 5), np.float64)
  with jax.enable_x64(True):
    # Three orders and five classes: the constants' program of the orders-axis test above.
    orders = np.array([3.0, 5.0, 8.0])
    betas = np.array(ss.BETA_GRID)[None, :] / orders[:, None]
    votes, weights = ss._pad_rows(votes, (np.arange(11) % 3 > 0).astype(np.float64))
    constants = local.gnmax_constants(np.float64(3.0), orders, num_classes=5)
    args = lambda confident: (votes, weights, np.int32(11), np.float64(40.0), np.float64(5.0),
                              np.float64(3.0), orders, betas, np.float64(1e-5),
                              np.float64(1.0), constants, np.bool_(confident), np.bool_(True),
                              np.bool_(False))
    kw = dict(num_teachers=60, conversion="classic")
    for confident, conds in ((False, 1), (True, 2)):
      jaxpr = jax.make_jaxpr(lambda c=confident: ss.release_core(*args(c), **kw))().jaxpr
      assert _conds(jaxpr) == conds, confident
    static = ss.release_core(*args(False), **kw)
    traced = _fresh_jit(ss.release_core, tuple(kw))(*args(False), **kw)
  for name, x in static._asdict().items():
    np.testing.assert_array_equal(np.asarray(x), np.asarray(getattr(traced, name)), name)
  assert float(static.noise_std) > 0  # a release with a data-dependent GNMax step


def _primitives(jaxpr):
  """The names of the primitives in ``jaxpr`` and the jaxprs inside it."""
  return {e.primitive.name for e in jaxpr.eqns}.union(
      *(_primitives(sub) for e in jaxpr.eqns for sub in jax.extend.core.jaxprs_in_params(e.params)))


def test_a_gnmax_order_choice_traces_no_threshold_step():
  """``confident`` is static in _best_order_core, as in release_core: GNMax's choice of the
  order (``order=None``) traces none of the threshold step (no normal tail: ``erf``,
  ``erfc``), and it is still the order of the smallest data-dependent ε."""
  votes = synthetic_votes(8, 8, 250, 10)
  with jax.enable_x64(True):
    args = lambda confident: (votes.astype(np.float64), np.zeros(8), np.int32(8),
                              np.float64(200.0), np.float64(150.0), np.float64(40.0),
                              acc.DEFAULT_ORDERS, np.float64(1e-5), np.bool_(confident),
                              np.bool_(False))
    tails = {"erf", "erfc"}
    for confident in (False, True):
      jaxpr = jax.make_jaxpr(
          lambda c=confident: ss._best_order_core(*args(c), conversion="classic"))().jaxpr
      assert bool(_primitives(jaxpr) & tails) == confident, confident
    chosen = ss._best_order_core(*args(False), conversion="classic")
  rdp = acc.rdp_accountant(acc.DEFAULT_ORDERS, conversion="classic").compose(
      acc.gnmax_rdp(votes, 40.0, acc.DEFAULT_ORDERS))
  assert float(chosen) == float(rdp.epsilon(1e-5)[1])


@pytest.mark.slow
def test_release_padding_rows_never_count():
  """The votes of a release are padded to a bucket of rows (copies of row 0), so that one
  compiled release serves several numbers of queries: no padding row enters a sum."""
  votes = synthetic_votes(9, 7, 60, 5)
  kw = dict(num_teachers=60, threshold=40.0, sigma_threshold=5.0, sigma=3.0, order=3.0,
            delta=1e-5)
  costs = np.asarray(acc.confident_gnmax_rdp(votes, 40.0, 5.0, 3.0, 3.0))
  assert costs[0] != costs[4]  # the two orders below pad with different rows
  out = acc.smooth_sensitivity_release(votes[:5], **kw)
  compiled = ss.release_core._cache_size()
  flipped = acc.smooth_sensitivity_release(votes[4::-1], **kw)  # the same rows, another row 0
  for name, x in out._asdict().items():
    np.testing.assert_allclose(getattr(flipped, name), x, rtol=1e-12, err_msg=name)
  assert ss.padded_rows(5) == ss.padded_rows(7) == 8 and float(out.answered) < 5.0
  # The cost minimised is rdp + ε_ss + 2·SS·σ_ss (the slow test checks the conversions).
  assert float(out.noise_std) > 0
  np.testing.assert_allclose(float(out.cost), float(out.rdp) + float(out.rdp_release)
                             + 2 * float(out.noise_std), rtol=1e-12)
  realised = acc.smooth_sensitivity_release(votes[:7], answered=np.array([1, 0, 1, 1, 0, 1, 0],
                                                                         bool), **kw)
  assert float(realised.answered) == 4.0
  assert ss.release_core._cache_size() == compiled  # 5 and 7 rows: one program
  assert [ss.padded_rows(n) for n in (1, 9, 1024, 1025, 10_000)] == [8, 16, 1024, 2048, 10_240]


# ------------------------------------------------------------------ bad input

def _bad_cases():
  votes = np.array([[8, 1, 1], [5, 3, 2]])
  rel = dict(threshold=5.0, sigma_threshold=2.0, sigma=1.0, order=4.0, delta=1e-5)
  return [
      ("beta", lambda: acc.smooth_sensitivity(np.ones(3), 0.0)),
      ("beta", lambda: acc.smooth_sensitivity(np.ones(3), -0.1)),
      ("beta", lambda: acc.gnss_rdp(0.0, 1.0, 2.0)),
      ("order", lambda: acc.gnss_rdp(0.1, 1.0, 5.0)),     # 1/(2β) = 5
      ("order", lambda: acc.gnss_rdp(0.1, 1.0, 1.0)),
      ("order", lambda: acc.gnss_rdp(0.1, 1.0, np.array([2.0, 6.0]))),
      ("sigma", lambda: acc.gnss_rdp(0.1, 0.0, 2.0)),
      ("order", lambda: acc.gnmax_local_sensitivity(votes, 10, 1.0, 1.0)),
      ("order", lambda: acc.threshold_local_sensitivity(votes, 10, 5.0, 1.0, 0.5)),
      ("num_teachers", lambda: acc.gnmax_local_sensitivity(votes, 9, 1.0, 2.0)),
      ("num_teachers", lambda: acc.threshold_local_sensitivity(votes, 5, 5.0, 1.0, 2.0)),
      ("num_teachers", lambda: acc.smooth_sensitivity_release(votes, num_teachers=8, **rel)),
      ("votes", lambda: acc.gnmax_local_sensitivity(np.array([[8, -1, 3]]), 10, 1.0, 2.0)),
      ("votes", lambda: acc.threshold_local_sensitivity(np.array([8, -1, 3]), 10, 5.0, 1.0,
                                                        2.0)),
      ("votes", lambda: acc.gnmax_local_sensitivity(np.array([[8.5, 1, 0]]), 10, 1.0, 2.0)),
      ("votes", lambda: acc.smooth_sensitivity_release(np.array([[8, 1, 1], [5, 3, 1]]),
                                                       **rel)),
      ("sigma", lambda: acc.gnmax_local_sensitivity(votes, 10, 0.0, 2.0)),
      ("betas", lambda: acc.smooth_sensitivity_release(votes, betas=[0.2], **rel)),
      ("betas", lambda: acc.smooth_sensitivity_release(votes, betas=[0.0], **rel)),
      ("sigma_threshold", lambda: acc.smooth_sensitivity_release(
          votes, threshold=5.0, sigma=1.0, order=4.0, delta=1e-5)),
      ("answered", lambda: acc.smooth_sensitivity_release(votes, answered=[True], **rel)),
      ("delta", lambda: acc.smooth_sensitivity_release(votes, **{**rel, "delta": 0.0})),
      ("conversion", lambda: acc.smooth_sensitivity_release(votes, conversion="x", **rel)),
      ("sigma_ss", lambda: acc.smooth_sensitivity_release(votes, sigma_ss=-1.0, **rel)),
  ]


@pytest.mark.parametrize("name,call", _bad_cases())
def test_bad_input_names_the_argument(name, call):
  with pytest.raises(ValueError, match=name):
    call()


# ------------------------------------------------------------------ the MNIST-row script

@pytest.mark.slow
def test_release_epsilon_script(tmp_path):
  votes = synthetic_votes(10, 40, 250, 10)
  from pate_jax import votes as votes_lib  # pylint: disable=g-import-not-at-top
  votes_lib.save_votes(tmp_path / "votes.npz", votes, np.argmax(votes, axis=1),
                       dataset="synthetic")
  script = experiment.load_script(REPO / "experiments" / "release_epsilon.py")
  config = experiment.load_script(REPO / "configs" / "release_epsilon.py").get_config()
  config.num_queries, config.orders, config.joint_orders, config.draws = 40, "default", False, 8
  config.noise_seed = 0  # a research seed: the draws below are reproducible
  out = script.run(config, tmp_path)
  written = json.loads((tmp_path / "results.json").read_text())
  # It spends from no budget: a research measurement, private as a whole.
  assert written["disclosure"] == experiment.MEASUREMENT
  record = written["results"]
  # The published release's parameters are the config's (the order from the
  # data-independent rule), never chosen on the votes; the rest is in the private part.
  spec = record["release"]
  assert spec["sigma_ss"] == config.release.sigma_ss
  np.testing.assert_allclose(spec["beta"], 0.4 / spec["order"])
  other = synthetic_votes(11, 40, 250, 10)  # Other votes, same settings: the same parameters.
  votes_lib.save_votes(tmp_path / "other" / "votes.npz", other, np.argmax(other, axis=1),
                       dataset="synthetic")
  assert script.run(config, tmp_path / "other")["release"] == spec
  public = {k: v for k, v in record.items() if k != "private"}
  assert set(public) == {"dataset", "num_teachers", "num_queries", "noise", "noise_source",
                         "delta", "conversion", "orders", "num_answered", "epsilon_released",
                         "release", "epsilon_data_independent",
                         "epsilon_data_independent_order", "time_s"}
  assert record["noise_source"]["public"] and record["noise_source"]["noise_seed"] == 0
  release = out["private"]["expected_tf_privacy"]["release"]
  direct = acc.smooth_sensitivity_release(votes, threshold=200.0, sigma_threshold=150.0,
                                          sigma=40.0, order=release["order"], delta=1e-5)
  np.testing.assert_allclose(release["epsilon"], direct.epsilon, rtol=1e-14)
  # At the release's order the data-dependent RDP is below the data-independent one.
  lam = spec["order"]
  bound = 40 * lam / (2 * 150.0**2) + out["num_answered"] * lam / 40.0**2
  assert out["private"]["fixed"]["rdp"] <= bound * (1 + 1e-12)


@pytest.mark.parametrize("votes,t,sigma,order", [([6, 4, 0], 10, 6.0, 2.0),
                                                 ([3, 1, 1], 5, 5.0, 2.0)])
def test_a_left_walk_that_runs_out_of_votes_equals_the_loop(votes, t, sigma, order):
  # q stays above q0 even with every vote on the top class: A(d) = LS(q_d) = 0 up to and
  # including d = (votes outside the top), the step that empties the others; plateau after.
  with jax.enable_x64(True):
    out = np.asarray(acc.gnmax_local_sensitivity(np.array(votes), t, sigma, order))
  loop = reference.loop_gnmax_ls(np.array(votes), t, sigma, order)
  others = sum(votes) - max(votes)
  assert out[others] == 0.0 and out[others + 1] > 0.0
  np.testing.assert_allclose(out, loop, rtol=1e-9, atol=1e-300)


def _histograms(num_teachers, num_classes):
  """Every histogram of ``num_teachers`` votes over ``num_classes`` classes ``[N, C]``."""
  return np.array([h for h in itertools.product(range(num_teachers + 1), repeat=num_classes)
                   if sum(h) == num_teachers])


def _brute_force_ls(votes, cost):
  """``max`` over every histogram ``D'`` within ``d`` teachers of ``votes`` of the largest
  change of ``cost`` one more teacher makes at ``D'``, for ``d = 0..T-1``: the exact local
  sensitivities at distance d that ``A(d)`` bounds (``cost``: ``[N, C] -> [N]``)."""
  hists = _histograms(int(votes.sum()), len(votes))
  index = {tuple(h): i for i, h in enumerate(hists)}
  values = np.asarray(cost(hists))
  ls = np.zeros(len(hists))
  for i, h in enumerate(hists):
    for neighbour in _neighbours(h):
      ls[i] = max(ls[i], abs(values[index[tuple(neighbour)]] - values[i]))
  dist = np.abs(hists - votes).sum(axis=1) // 2
  return np.array([ls[dist <= d].max() for d in range(int(votes.sum()))])


@pytest.mark.parametrize("votes", [[5, 2, 1], [8, 0, 0]])
def test_threshold_local_sensitivity_is_the_brute_force_maximum_over_every_histogram(votes):
  """8 teachers, 3 classes, threshold 13, σ_T 1, λ 4: the step |r(v+1) - r(v)| grows with
  the top count v up to T, so the largest change within d teachers is the step into the
  highest reachable top count, min(m + d, T), and A(d) is exactly the brute-force maximum;
  with unanimous votes, A(0) is the one step down from T."""
  votes = np.array(votes)
  cost = lambda h: acc.confident_threshold_rdp(h, 13.0, 1.0, np.array([4.0]))[:, 0]
  truth = _brute_force_ls(votes, cost)
  out = np.asarray(acc.threshold_local_sensitivity(votes, 8, 13.0, 1.0, 4.0))
  assert truth[0] > 0 and truth[-1] > 0.7
  np.testing.assert_allclose(out, truth, rtol=1e-9)


@pytest.mark.parametrize("votes,sigma,order", [([6, 3, 1, 0], 1.0, 2.0),
                                               ([7, 2, 1, 0], 2.0, 3.0)])
def test_gnmax_local_sensitivity_bounds_the_brute_force_maximum_at_every_distance(
    votes, sigma, order):
  """A(d) >= the largest change of GNMax's data-dependent RDP one teacher makes at any
  histogram within d teachers of the votes (every histogram of 10 votes over 4 classes)."""
  votes = np.array(votes)
  truth = _brute_force_ls(votes, lambda h: acc.gnmax_rdp(h, sigma, np.array([order]))[:, 0])
  out = np.asarray(acc.gnmax_local_sensitivity(votes, 10, sigma, order))
  assert truth.max() > 0.2
  assert np.all(out >= truth * (1 - 1e-12)), (out, truth)


def test_tied_top_classes_use_q_capped_at_one_less_one_over_c():
  """Six of 30 classes tied at one vote each: the union bound (about 3) is capped at 1 - 1/C
  (gnmax_log_q, tf-privacy's compute_logq_gaussian), above q0, so β(q) = β(bu(q)) = λ/σ²
  and A(0) = λ/σ² - Theorem 6 at bl(1 - 1/C) (below q0): the reference's SciPy pieces."""
  votes, sigma, order = np.array([1] * 6 + [0] * 24), 0.25, 1.25
  log_q = math.log1p(-1.0 / 30)
  assert float(acc.gnmax_log_q(votes[None], sigma)[0]) == pytest.approx(log_q, rel=1e-12)
  log_bl = reference._bl(log_q, sigma, 30)
  assert log_bl < reference.loop_log_q0(sigma, order)
  out = np.asarray(acc.gnmax_local_sensitivity(votes, 6, sigma, order))
  np.testing.assert_allclose(out[0], order / sigma**2 - reference._theorem6(log_bl, sigma, order),
                             rtol=1e-9)


# ------------------------------------------------------------------ the release's sums and choices
# release_core composes per-query pieces (the data-dependent RDP of each step, their A(d)) by
# the module's formulas. The pieces are replaced by cheap stand-ins of known values (the real
# ones are the tests above), so that the composition compiles in well under a second and is
# compared with a plain loop over (λ, β) of the same formulas.

_T = 10  # teachers


def _fake_pieces(xp):
  """Stand-ins for the per-query pieces, in ``xp`` (jax.numpy in the release, numpy in the
  loop). GNMax: data-independent (its value at the unanimous histogram is λ/σ²) for
  λ >= 4. Threshold table r(v): equal to λ/(2σ_T²) at both ends for λ >= 4, at v = 0 only
  for 2.5 <= λ < 4 (data-dependent: both ends must match), at neither below. The A(d) are
  0 at d = 0 and vary with the votes and d."""
  top = lambda votes: xp.max(votes, axis=-1)

  def gnmax_rdp(votes, sigma, orders, data_dependent=True):
    a = xp.where(orders >= 4.0, 1.0, 0.5)
    return orders / sigma**2 * (a + (1.0 - a) * (1.0 - top(votes)[:, None] / _T) * 0.7)

  def threshold_rdp(votes, threshold, sigma_threshold, orders):
    return orders / (2.0 * sigma_threshold**2) * (0.2 + 0.06 * top(votes)[:, None])

  def table(threshold, sigma_threshold, orders, num_teachers):
    v = xp.arange(num_teachers + 1.0)[:, None] / num_teachers
    ends = xp.where(orders >= 4.0, 0.0, xp.where(orders >= 2.5, v, 0.3 + v))
    return orders / (2.0 * sigma_threshold**2) * (1.0 + ends)

  def threshold_ls(votes, threshold, sigma_threshold, orders, num_teachers):
    d = xp.arange(num_teachers, dtype=votes.dtype)
    return (0.004 * orders[None, :, None] * (1.0 + top(votes))[:, None, None]
            * (d * xp.exp(-0.25 * d))[None, None, :])

  def walk(votes, sigma, orders, log_q0, log_q1, plateau, num_teachers):
    d = xp.arange(num_teachers, dtype=votes.dtype)
    return (0.01 * orders[None, :, None] * (1.0 + _T - top(votes))[:, None, None]
            * xp.minimum(d, 3.0)[None, None, :])

  return dict(gnmax_rdp=gnmax_rdp, threshold_rdp=threshold_rdp, table=table,
              threshold_ls=threshold_ls, walk=walk)


def _fresh_jit(jitted, static_argnames):
  """``jitted``'s function compiled apart from it, with the stand-ins patched in. Not
  ``jax.jit(jitted.__wrapped__)``: jit's trace cache is keyed by the Python function, so
  that would share ``jitted``'s traces (a trace of the module's real pieces would be reused
  here, and one of the stand-ins by the module's later calls of the same shapes)."""
  return jax.jit(lambda *args, **kwargs: jitted.__wrapped__(*args, **kwargs),
                 static_argnames=static_argnames)


def _loop_release(f, votes, num_rows, threshold, sigma_threshold, sigma, orders, betas, delta,
                  confident, answered):
  """The module docstring's release, one order and one β at a time (numpy, floats)."""
  votes = np.asarray(votes, np.float64)[:num_rows]
  best = None
  for k, lam in enumerate(orders):
    o = np.array([lam])
    unanimous = np.zeros((1, votes.shape[1]))
    unanimous[0, 0] = _T
    close = lambda a, b: abs(a - b) <= 1e-8 + 1e-5 * abs(b)
    ind_answer, ind_thr = lam / sigma**2, lam / (2 * sigma_threshold**2)
    dep_answer = not close(float(f["gnmax_rdp"](unanimous, sigma, o)[0, 0]), ind_answer)
    r = np.asarray(f["table"](threshold, sigma_threshold, o, _T))[:, 0]
    dep_thr = confident and not (close(r[0], ind_thr) and close(r[-1], ind_thr))
    rdp, ls = 0.0, np.zeros(_T)
    for row, q in zip(votes, range(num_rows)):
      if answered is not None:
        weight = float(answered[q])
      elif confident:
        weight = scipy.stats.norm.cdf((round(row.max()) - threshold) / sigma_threshold)
      else:
        weight = 1.0
      if confident:
        rdp += (float(f["threshold_rdp"](row[None], threshold, sigma_threshold, o)[0, 0])
                if dep_thr else ind_thr)
      rdp += weight * (float(f["gnmax_rdp"](row[None], sigma, o)[0, 0]) if dep_answer
                       else ind_answer)
      if dep_thr:
        ls += np.asarray(f["threshold_ls"](row[None], threshold, sigma_threshold, o, _T))[0, 0]
      if dep_answer:
        ls += weight * np.asarray(f["walk"](row[None], sigma, o, 0, 0, 0, _T))[0, 0]
    term = -math.log(delta) / (lam - 1)
    if not ls.any():
      cand = dict(order=lam, beta=0.0, smooth_sensitivity=0.0, sigma_ss=math.inf,
                  noise_std=0.0, rdp=rdp, rdp_release=0.0, cost=rdp)
      cand["total"] = rdp + term
      best = cand if best is None or cand["total"] < best["total"] else best
      continue
    for beta in betas[k]:
      smooth = max(ls[d] * math.exp(-beta * d) for d in range(_T))
      sig = (lam * math.exp(2 * beta) / smooth)**(1 / 3)
      gnss = (lam * math.exp(2 * beta) / sig**2
              + (beta * lam - 0.5 * math.log(1 - 2 * lam * beta)) / (lam - 1))
      cost = rdp + gnss + 2 * smooth * sig
      cand = dict(order=lam, beta=beta, smooth_sensitivity=smooth, sigma_ss=sig,
                  noise_std=smooth * sig, rdp=rdp, rdp_release=gnss, cost=cost,
                  total=cost + term)
      best = cand if best is None or cand["total"] < best["total"] else best
  term = -math.log(delta) / (best["order"] - 1)
  best["epsilon_before"] = best["rdp"] + term
  best["epsilon"] = best["rdp"] + best["rdp_release"] + term
  return best


def test_the_release_sums_weighs_and_chooses_as_its_formulas_say(monkeypatch):
  """Over the first ``num_rows`` rows only: rdp and A(d) summed (GNMax's weighted by
  Pr[answered] or the realised answers), SS_β = max_d e^{-βd} A(d), σ_ss = (λe^{2β}/SS)^{1/3},
  (λ, β) minimising rdp + ε_ss + 2·SS·σ_ss + log(1/δ)/(λ-1); a step is data-independent
  only where its bound equals the data-independent one at both extreme histograms; where
  nothing is data-dependent, no noise. Against a loop of those formulas."""
  f = _fake_pieces(jnp)
  monkeypatch.setattr(ss._gnmax, "gnmax_rdp_core", f["gnmax_rdp"])
  monkeypatch.setattr(ss._gnmax, "confident_threshold_rdp_core", f["threshold_rdp"])
  monkeypatch.setattr(ss, "_threshold_rdp_table", f["table"])
  monkeypatch.setattr(ss, "threshold_local_sensitivity_core", f["threshold_ls"])
  monkeypatch.setattr(ss, "gnmax_walk_core", f["walk"])
  core = _fresh_jit(ss.release_core, ("num_teachers", "conversion"))
  votes = np.array([[7, 2, 1], [4, 3, 3], [10, 0, 0], [5, 5, 0], [6, 1, 3],
                    # rows past num_rows = 5: never in a sum (unlike any real row)
                    [0, 0, 10], [1, 9, 0], [2, 2, 6]], np.float64)
  answered = np.array([1, 0, 1, 1, 0, 1, 1, 1], np.float64)
  constants = tuple(np.zeros(2) for _ in range(3))
  names = ("order", "beta", "smooth_sensitivity", "sigma_ss", "noise_std", "rdp",
           "rdp_release", "epsilon_before", "epsilon", "cost")
  seen = set()
  for orders, delta, confident, realised in (
      ([2.0, 3.0], 1e-5, True, False), ([2.0, 3.0], 0.5, True, True),
      ([2.0, 3.0], 1e-3, False, False), ([3.0, 5.0], 1e-8, True, True),
      ([2.0, 5.0], 0.9, True, False)):
    orders = np.array(orders)
    betas = np.array([0.3, 0.42, 0.49])[None, :] / orders[:, None]  # K = 2, B = 3
    out = core(votes, answered, np.int32(5), 6.0, 2.0, 1.5, orders, betas, delta, 1.0,
               constants, np.bool_(confident), np.bool_(realised), np.bool_(False),
               num_teachers=_T, conversion="classic")
    want = _loop_release(_fake_pieces(np), votes, 5, 6.0, 2.0, 1.5, orders, betas, delta, confident,
                         answered if realised else None)
    for name in names:
      np.testing.assert_allclose(float(getattr(out, name)), want[name], rtol=1e-12,
                                 err_msg=name)
    weights = (answered[:5] if realised else scipy.stats.norm.cdf(
        (votes[:5].max(axis=1) - 6.0) / 2.0) if confident else np.ones(5))
    np.testing.assert_allclose(float(out.answered), weights.sum(), rtol=1e-12)
    seen.add((float(out.order), float(out.beta) == 0.0))
  # The cases reach both orders and a release with nothing data-dependent (order 5).
  assert {(2.0, False), (3.0, False), (5.0, True)} <= seen, seen


def test_the_default_order_has_the_smallest_data_dependent_epsilon(monkeypatch):
  """order None: the order of the pool with the smallest ε before the release (tf-privacy's),
  over the first ``num_rows`` rows, each weighted as in the release. Stand-in pieces as
  above, against a loop."""
  f, g = _fake_pieces(jnp), _fake_pieces(np)
  monkeypatch.setattr(ss._gnmax, "gnmax_rdp_core", f["gnmax_rdp"])
  monkeypatch.setattr(ss._gnmax, "confident_threshold_rdp_core", f["threshold_rdp"])
  best_order = _fresh_jit(ss._best_order_core, ("conversion",))
  votes = np.array([[7, 2, 1], [4, 3, 3], [10, 0, 0], [5, 5, 0], [6, 1, 3],
                    [0, 0, 10], [1, 9, 0], [2, 2, 6]], np.float64)
  answered = np.array([1, 0, 1, 1, 0, 1, 1, 1], np.float64)
  pool = np.array([1.5, 2.0, 3.0, 5.0, 8.0, 16.0])
  chosen = set()
  for delta, realised in ((1e-5, False), (1e-2, True), (1e-12, False)):
    weights = answered[:5] if realised else scipy.stats.norm.cdf(
        (votes[:5].max(axis=1) - 6.0) / 2.0)
    eps = [sum(float(g["threshold_rdp"](row[None], 6.0, 2.0, np.array([lam]))[0, 0])
               + w * float(g["gnmax_rdp"](row[None], 1.5, np.array([lam]))[0, 0])
               for row, w in zip(votes[:5], weights)) - math.log(delta) / (lam - 1)
           for lam in pool]
    out = float(best_order(votes, answered, np.int32(5), 6.0, 2.0, 1.5, pool, delta,
                           np.bool_(True), np.bool_(realised), conversion="classic"))
    assert out == pool[int(np.argmin(eps))], (delta, realised, out, eps)
    chosen.add(out)
  assert len(chosen) >= 2, chosen


@pytest.mark.parametrize("conversion", ["classic", "improved"])
def test_the_releases_delta_term_is_the_conversions(conversion):
  """ε - rdp of the release's RDP -> (ε, δ) conversion at each order, the one the
  accountant applies (classic: log(1/δ)/(λ-1); improved: Balle et al. 2020)."""
  orders, delta = np.array([1.5, 2.0, 8.0, 32.0]), 1e-5
  term = np.asarray(ss._delta_term(jnp.asarray(orders), delta, conversion))
  for lam, t in zip(orders, term):
    eps = float(acc.rdp_to_epsilon(np.array([3.0]), np.array([lam]), delta, conversion)[0])
    np.testing.assert_allclose(t, eps - 3.0, rtol=1e-13)


def test_the_release_stage_releases_the_realised_answers_at_the_fixed_parameters(
    tmp_path, monkeypatch):
  """The release stage (pate_jax.stages.release) hands the smooth-sensitivity release the
  answers it drew and the fixed λ, β and σ_ss (never ones chosen on the votes), reports
  those as its public parameters, and its data-independent ε is the closed form
  Q·λ/(2σ_T²) + answered·λ/σ², converted. The answers, the fixed parameters, the release,
  its draw and the paper's own analysis are stand-ins here (each is tested on its own), so
  nothing slow compiles."""
  from pate_jax import aggregation, budget  # pylint: disable=g-import-not-at-top
  from pate_jax import votes as votes_lib  # pylint: disable=g-import-not-at-top
  from pate_jax.stages import aggregate  # pylint: disable=g-import-not-at-top
  from pate_jax.stages import release as release_stage  # pylint: disable=g-import-not-at-top
  votes = synthetic_votes(10, 40, 250, 10)
  votes_lib.save_votes(tmp_path / "votes.npz", votes, np.argmax(votes, axis=1),
                       dataset="synthetic")
  config = experiment.load_script(REPO / "configs" / "release_epsilon.py").get_config()
  config.num_queries, config.orders, config.joint_orders, config.draws = 40, "default", False, 4
  config.noise_seed = 0
  answered = np.arange(40) % 3 == 1
  spec = budget.ReleaseSpec.make(18.5, 7.5)
  calls = []

  def stand_in(v, **kw):
    calls.append(kw)
    return acc.Release(*[np.float64(x) for x in (kw["order"], 0.02, 0.3, 6.0, 0.5, 1.0, 0.2,
                                                 1.5, 2.0, 5.0, 10.0, 0.0, 0.0)])

  monkeypatch.setattr(aggregation, "confident_gnmax",
                      lambda key, v, **kw: (np.where(answered, 0, -1), answered))
  monkeypatch.setattr(aggregate, "fixed_release", lambda *args: spec)
  monkeypatch.setattr(acc, "smooth_sensitivity_release", stand_in)
  monkeypatch.setattr(acc, "release_epsilon", lambda key, release, upper=np.inf: np.float64(
      release.epsilon))
  monkeypatch.setattr(acc, "valid_release_orders", lambda sigma, c, orders: np.asarray(orders))
  monkeypatch.setattr(acc, "confident_gnmax_rdp",
                      lambda v, *args: np.full((len(v), len(args[-1])), 0.01))
  out = release_stage.run(config, tmp_path)
  assert out["num_answered"] == answered.sum()
  fixed = calls[0]
  np.testing.assert_array_equal(fixed["answered"], answered)
  assert fixed["order"] == spec.order and fixed["sigma_ss"] == spec.sigma_ss
  np.testing.assert_array_equal(fixed["betas"], [spec.beta])
  assert out["release"] == spec._asdict()
  grid = np.asarray(acc.DEFAULT_ORDERS)
  rdp = 40 * grid / (2 * 150.0**2) + answered.sum() * grid / 40.0**2
  eps, best = acc.rdp_to_epsilon(rdp, grid, 1e-5, "classic")
  np.testing.assert_allclose(out["epsilon_data_independent"], float(eps), rtol=1e-12)
  assert out["epsilon_data_independent_order"] == float(best)
