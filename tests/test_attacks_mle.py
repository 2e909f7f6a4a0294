"""Maximum-likelihood reconstruction, Fisher information and the Cramér–Rao bound."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from pate_jax import aggregation as agg
from pate_jax import attacks as A
from pate_jax.attacks import _answer_probabilities as ap
from pate_jax.attacks import _cramer_rao
from pate_jax.attacks import _likelihood as lk
from pate_jax.attacks import _output_distribution as od
from pate_jax.attacks import _reconstruct as R
from pate_jax.attacks._stop import Stop

KEY = jax.random.key(0)
TABLE, NAMES = A.table1_histograms()
SMALL = np.array([12, 3, 30, 7])          # 52 votes, 4 classes
CONF = {"threshold": 25.0, "sigma_threshold": 10.0}


def _exact_frequencies(h, sigma, confident=False, **thr):
  """π(H) of the model itself (trapezoid Q), float64: the n → ∞ limit of q̄."""
  t, st = thr.get("threshold", 0.0), thr.get("sigma_threshold", 1.0)
  f = jax.jit(jax.vmap(lambda x: jnp.exp(ap.log_answer_probabilities(x, sigma, t, st,
                                                                    confident=confident))))
  p = np.asarray(f(jnp.asarray(h, jnp.float64)))
  return p / p.sum(-1, keepdims=True)


@pytest.mark.slow
def test_mle_recovers_h_from_exact_frequencies():
  hists = np.stack([TABLE[NAMES.index("mnist/M2")], TABLE[NAMES.index("svhn/L5")],
                    [0, 0, 3, 0, 0, 240, 0, 7, 0, 0], [20, 25, 30, 15, 40, 35, 25, 20, 30, 10]])
  with jax.enable_x64(True):
    q = _exact_frequencies(hists, 40.0)
    rec = A.reconstruct_details(q, 40.0, 250, method="mle", tol=0.0, max_iter=60)
    err = np.asarray(A.normalized_l1_error(hists, rec.histogram))
    assert np.all(err < 1e-5), err
    assert np.all(np.asarray(rec.loss) < 1e-12)         # KL(q̄ ‖ π(Ĥ))
    # Confident-GNMax: the ⊥ fraction is one more category.
    q = _exact_frequencies(hists[:2], 40.0, confident=True, threshold=200.0,
                           sigma_threshold=150.0)
    rec = A.reconstruct_details(q, 40.0, 250, method="mle", tol=0.0, max_iter=60,
                                threshold=200.0, sigma_threshold=150.0)
    assert np.all(np.asarray(A.normalized_l1_error(hists[:2], rec.histogram)) < 1e-5)
    q = _exact_frequencies(hists, 40.0)
  # Default float32 and tolerance: the same to a fraction of a vote.
  rec = A.reconstruct_details(q.astype(np.float32), 40.0, 250, method="mle")
  np.testing.assert_allclose(rec.histogram, hists, atol=0.2)
  assert set(np.asarray(rec.status).tolist()) == {A.Stop.CONVERGED}


# The model's Q(H) of one histogram, compiled once: op by op, each of its operations was a
# program of its own to build.
_trapezoid = jax.jit(od.trapezoid_single, static_argnums=(2, 3, 4))


def _fd_jacobian(h, sigma, eps=1e-3):
  """Central differences of the accurate Q (an oracle independent of the trapezoid)."""
  cols = []
  for i in range(h.size):
    e = np.zeros(h.size)
    e[i] = eps
    cols.append((np.asarray(A.output_distribution(h + e, sigma, "accurate"))
                 - np.asarray(A.output_distribution(h - e, sigma, "accurate"))) / (2 * eps))
  return np.stack(cols, -1)


@pytest.mark.slow
def test_fisher_matches_finite_differences_and_the_score_covariance():
  h, s, m = SMALL.astype(np.float64), 9.0, 40_000
  fisher = np.asarray(A.fisher_information(h, s))
  assert fisher.dtype == np.float64
  j = _fd_jacobian(h, s)
  q = np.asarray(A.output_distribution(h, s, "accurate"))
  np.testing.assert_allclose(fisher, j.T @ np.diag(1 / q) @ j, rtol=1e-6, atol=1e-12)
  np.testing.assert_allclose(fisher @ np.ones(4), 0.0, atol=1e-12)    # Theorem 2
  with jax.enable_x64(True):
    for thr in ({}, CONF):
      confident = bool(thr)
      f = np.asarray(A.fisher_information(h, s, **thr))
      # Scores ∇ log π_x(H) of answers x of the real aggregator.
      g = np.asarray(jax.jit(jax.jacfwd(lambda x: ap.log_answer_probabilities(
          x, s, thr.get("threshold", 0.0), thr.get("sigma_threshold", 1.0),
          confident=confident)))(jnp.asarray(h)))
      votes = np.tile(SMALL, (m, 1))
      if confident:
        labels, answered = agg.confident_gnmax(KEY, votes, CONF["threshold"],
                                               CONF["sigma_threshold"], s)
        labels = np.where(np.asarray(answered), np.asarray(labels), 4)   # ⊥ is category C
      else:
        labels = np.asarray(agg.gnmax(KEY, votes, s))
      scores = g[labels]
      emp = scores.T @ scores / m
      assert np.linalg.norm(emp - f) < 0.05 * np.linalg.norm(f), (emp, f)
      np.testing.assert_allclose(scores.mean(0), 0.0, atol=4 * np.sqrt(np.diag(f) / m).max())
  # ⊥ carries information about the absolute level: 1 is no longer a null direction.
  assert np.linalg.norm(f @ np.ones(4)) > 1e-3 * np.linalg.norm(f)


@pytest.mark.slow
def test_mle_covariance_approaches_the_cramer_rao_bound():
  h, s, n, runs = np.array([60.0, 50.0, 40.0]), 15.0, 2_000, 400
  with jax.enable_x64(True):
    p = _exact_frequencies(h[None], s)[0]
    keys = jax.random.split(KEY, runs)
    counts = np.asarray(jax.vmap(lambda k: jax.random.multinomial(k, n, p))(keys))
    est = np.asarray(A.reconstruct(counts / n, s, h.sum(), method="mle"))
    bound = np.asarray(_cramer_rao.cramer_rao_covariance_single(A.fisher_information(h, s), n))
    cr = A.cramer_rao(h, s, n)
  assert not bool(cr.near_boundary)
  emp = np.cov(est.T)
  assert np.linalg.norm(emp - bound) < 0.2 * np.linalg.norm(bound), (emp, bound)
  np.testing.assert_allclose(np.sqrt(np.diag(emp)), np.asarray(cr.std), rtol=0.12)
  np.testing.assert_allclose(est.mean(0), h, atol=3 * np.sqrt(np.diag(bound) / runs).max())
  err = np.asarray(A.normalized_l1_error(h, est)).mean()
  np.testing.assert_allclose(err, float(cr.error), rtol=0.12)


def test_cramer_rao_scaling_flags_and_queries_needed():
  hists = TABLE[[5, 27]]                     # mnist/M1; svhn/M3 (mostly zeros)
  sig = np.array([40.0, 80.0])[:, None]
  cr = A.cramer_rao(hists[None], sig, 10_000)
  one = A.cramer_rao(hists[None], sig, 1)
  np.testing.assert_allclose(cr.error, np.asarray(one.error) / 100, rtol=1e-12)
  np.testing.assert_allclose(cr.queries_for_error,
                             np.ceil((np.asarray(one.error)[..., None] / [0.05, 0.1]) ** 2))
  np.testing.assert_array_equal(A.cramer_rao_l1(hists[None], sig, 10_000), cr.error)
  assert cr.std.shape == (2, 2, 10) and cr.queries_for_error.shape == (2, 2, 2)
  assert bool(np.all(np.asarray(cr.near_boundary)[:, 1]))      # svhn/M3 has empty classes
  # Knowing the empty classes can only lower the bound.
  assert np.all(np.asarray(cr.error_known_zeros) <= np.asarray(cr.error) * (1 + 1e-9))
  # Batched over σ equals a loop of calls with one scalar σ (each on the two histograms twice
  # over: the batched call's 4 rows, so that its compiled programs serve them too); the
  # Fisher information is symmetric PSD.
  for i, s in enumerate(sig[:, 0]):
    alone = A.cramer_rao(np.stack([hists, hists]), s, 10_000).error
    np.testing.assert_allclose(np.stack([cr.error[i]] * 2), alone, rtol=1e-12)
  f = np.asarray(A.fisher_information(hists[None], sig))
  np.testing.assert_allclose(f, np.swapaxes(f, -1, -2), atol=1e-15)
  assert np.all(np.linalg.eigvalsh(f) > -1e-12)


@pytest.mark.slow
def test_mle_batches_over_sigma_in_float32():
  hists = TABLE[[0, 7, 18]]                   # mnist/L1, mnist/M3, svhn/L4
  sig = np.array([40.0, 80.0])[:, None]
  q = A.sample_answers(KEY, hists[None], sig, 10_000)
  rec = A.reconstruct_details(q, sig, 250, method="mle")
  assert rec.histogram.shape == (2, 3, 10) and rec.histogram.dtype == np.float32
  np.testing.assert_allclose(np.asarray(rec.histogram).sum(-1), 250, rtol=1e-5)
  assert np.all(np.asarray(rec.histogram) >= 0)
  assert set(np.asarray(rec.status).ravel().tolist()) == {A.Stop.CONVERGED}
  for i in range(2):   # Batched equals one call per σ (to float32 rounding, flat classes).
    one = A.reconstruct(q[i], sig[i, 0], 250, method="mle")
    np.testing.assert_allclose(rec.histogram[i], one, atol=0.2)
  err = np.asarray(A.normalized_l1_error(hists[None], rec.histogram))
  assert err.mean() < 0.05, err


def test_mle_frequencies_and_validation():
  full = A.mle_frequencies([[3, 1, 0]], [4], 10)
  np.testing.assert_allclose(full, [[0.3, 0.1, 0.0, 0.6]])
  with pytest.raises(ValueError, match="num_sent"):
    A.mle_frequencies([[3, 1]], [4], 3)
  q = [[0.5, 0.5]]
  for kwargs, match in (({"project": True}, "project"),
                        ({"stop_on_negative": True}, "stop_on_negative"),
                        ({"normalize": True}, "normalize"),
                        ({"noise": "laplace"}, "noise"),
                        ({"damping": 0.0}, "damping"),
                        ({"max_step": -1.0}, "max_step"),
                        ({"threshold": 1.0}, "given together"),
                        ({"threshold": 1.0, "sigma_threshold": 1.0, "num_classes": 2},
                         "3 classes")):
    with pytest.raises(ValueError, match=match):
      A.reconstruct(q, 1.0, 10, method="mle", **kwargs)
  with pytest.raises(ValueError, match="only used with method='mle'"):
    A.reconstruct(q, 1.0, 10, threshold=1.0, sigma_threshold=1.0)
  with pytest.raises(ValueError, match="targets"):
    A.cramer_rao([[3.0, 1.0]], 1.0, 10, targets=[[0.1]])
  with pytest.raises(ValueError, match="num_queries"):
    A.cramer_rao([[3.0, 1.0]], 1.0, 0)
  with pytest.raises(ValueError, match="at least one vote"):
    A.cramer_rao([[0.0, 0.0]], 1.0, 10)


@pytest.mark.slow
def test_dirichlet_histograms():
  h, names = A.dirichlet_histograms(KEY, (0.05, 1.0), 2)   # the sampler of the next test
  assert h.shape == (4, 10) and h.dtype == np.int32
  np.testing.assert_array_equal(h.sum(1), 250)
  assert names[0] == "dirichlet0.05/0" and names[3] == "dirichlet1/1"
  assert (h[:2] == 0).sum() > (h[2:] == 0).sum()          # small α: sparse histograms
  np.testing.assert_array_equal(h, A.dirichlet_histograms(KEY, (0.05, 1.0), 2)[0])
  with pytest.raises(ValueError, match="alphas"):
    A.dirichlet_histograms(KEY, (0.0,), 3)
  with pytest.raises(ValueError, match="alphas must be distinct"):  # names would repeat
    A.dirichlet_histograms(KEY, (1.0, 0.3, 1.0), 1)
  with pytest.raises(ValueError, match="num_per_alpha"):
    A.dirichlet_histograms(KEY, (1.0,), 0)


@pytest.mark.slow
def test_fresh_histograms_query_sweep_and_figure(tmp_path):
  h, names = A.dirichlet_histograms(KEY, (0.3, 1.0), 2)
  variants = {"mle": {"method": "mle"}}
  keys = A.seed_keys(KEY, 1)
  budget = {"threshold": 200.0, "sigma_threshold": 150.0, "sigma": 40.0, "delta": 1e-5,
            "budget": 1.97}
  res = A.fresh_histograms(keys, h, names, sigma=40.0, num_queries=2_000, variants=variants,
                           budget=budget)
  assert res["headline_variant"] == "mle" and len(res["histograms"]) == 4
  row = res["histograms"][0]
  assert set(row["error_mean"]) == {"mle"} and row["error_mean"]["mle"] < 0.2
  assert set(row["queries_for_error"]) == {"0.05", "0.1", "0.05_known_zeros",
                                           "0.1_known_zeros"}
  assert row["queries_allowed"] > 0
  assert list(res["summary"]["cramer_rao"]["mean_error_by_group"]) == ["dirichlet0.3",
                                                                       "dirichlet1"]
  sweep = A.query_sweep(keys, h, [n.split("/")[0] for n in names], sigma=40.0,
                        query_counts=(300, 3_000), variants=variants)
  assert sweep["error_mean"]["mle"].shape == (2,)
  assert sweep["cramer_rao_error"][1] < sweep["cramer_rao_error"][0]
  path = A.plot_error_vs_queries(tmp_path / "sweep.png", sweep, "test")
  assert (tmp_path / "sweep.png").stat().st_size > 0 and path.endswith("sweep.png")


def test_log_output_distribution_is_the_trapezoid_q_in_log_space():
  h = jnp.asarray(TABLE[:3], jnp.float32)
  log_q = jax.jit(jax.vmap(lambda x: ap.log_output_distribution(x, 40.0)))(h)
  np.testing.assert_allclose(np.exp(log_q), A.output_distribution(h, 40.0), rtol=2e-5,
                             atol=1e-9)
  # Far in the tail Q_k underflows, its logarithm does not.
  tail = jax.jit(ap.log_output_distribution)(jnp.asarray([250.0, 0.0]), jnp.asarray(5.0))
  assert np.isfinite(float(tail[1])) and float(tail[1]) < -100
  assert float(A.output_distribution([250.0, 0.0], 5.0)[1]) == 0.0


def test_confident_answer_probabilities_weigh_q_by_the_threshold_check():
  """Confident-GNMax's π: ⊥ with Pr[max H + N(0, σ_T²) < T], class k with
  Pr[passed]·Q_k; the threshold's noise is σ_T, not the answer's σ."""
  import scipy.stats  # pylint: disable=g-import-not-at-top
  h, sigma, t, st = jnp.asarray(SMALL, jnp.float32), 40.0, 25.0, 10.0
  pi = np.exp(np.asarray(jax.jit(lambda x: ap.log_answer_probabilities(
      x, sigma, t, st, confident=True))(h)))
  passed = scipy.stats.norm.cdf((SMALL.max() - t) / st)
  np.testing.assert_allclose(pi[-1], 1 - passed, rtol=1e-5)
  q = np.asarray(A.output_distribution(h, sigma))
  np.testing.assert_allclose(pi[:-1], passed * q / q.sum(), rtol=1e-4)


@pytest.mark.slow
def test_mle_against_consistent_answers_puts_all_votes_on_the_answer():
  # The defense: M cached answers are one draw, q̄ is one-hot; maximising Q_k(H) over
  # the simplex gives H = N e_k, and the bound does not improve with M.
  one_hot = np.eye(10, dtype=np.float32)[[5, 2, 7, 0]]
  est = np.asarray(A.reconstruct(one_hot, 40.0, 250, method="mle"))
  np.testing.assert_allclose(est, 250 * one_hot, atol=0.5)
  h = TABLE[[5]]
  fresh, cached = A.cramer_rao(h, 40.0, 10_000), A.cramer_rao(h, 40.0, 1)
  np.testing.assert_allclose(cached.error, 100 * np.asarray(fresh.error), rtol=1e-12)


@pytest.mark.slow
def test_chart_newton_system_is_the_hessian_in_theta():
  """Closed form vs autodiff of θ ↦ f(N softmax θ), f a non-trivial quadratic."""
  with jax.enable_x64(True):
    r = np.random.default_rng(0)
    c, total = 4, 250.0
    a = jnp.asarray(r.normal(size=c))
    b = jnp.asarray(r.normal(size=(c, c)))
    b = b @ b.T / 100
    f = lambda h: a @ h + 0.5 * h @ b @ h + jnp.sum(jnp.sin(h / 50))  # noqa: E731
    theta = jnp.asarray(r.normal(size=c))
    h = total * jax.nn.softmax(theta)
    # Each side compiled as one program (op by op, every operation was one to build).
    g, hess = jax.jit(lk.chart_newton_system)(theta, total, jax.jit(jax.grad(f))(h),
                                               jax.jit(jax.hessian(f))(h))
    ft = lambda t: f(total * jax.nn.softmax(t))  # noqa: E731
    np.testing.assert_allclose(g, jax.jit(jax.grad(ft))(theta), rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(hess, jax.jit(jax.hessian(ft))(theta), rtol=1e-9, atol=1e-9)


@pytest.mark.slow
def test_optax_returns_the_last_iterate_when_it_is_best():
  """max_iter=1: the loop scores only the start, so the result is the one SGD step
  x1 = x0 - lr ∇J(x0) (scored after the loop), shifted to sum N."""
  with jax.enable_x64(True):
    h = jnp.array([200.0, 40.0, 10.0])
    q = np.asarray(_trapezoid(h, jnp.asarray(40.0), "gaussian", None, None))
    lr = 50.0
    x0 = jnp.full(3, 250.0 / 3)
    x1 = x0 - lr * jax.jit(jax.grad(R.objective))(x0, jnp.asarray(q), jnp.asarray(40.0))
    objective = jax.jit(R.objective)
    assert objective(x1, q, 40.0) < objective(x0, q, 40.0)
    out = R.reconstruct_details(q, 40.0, 250.0, method="optax", max_iter=1,
                                optimizer=optax.sgd(lr), tol=0.0)
    np.testing.assert_allclose(out.histogram, x1 + (250.0 - x1.sum()) / 3, rtol=1e-9)


@pytest.mark.slow
def test_min_step_does_not_continue_past_a_negative_estimate():
  """The paper's budget-limited attacker stops before an estimate turns negative; the
  min_step extension halves only after steps that failed for another reason."""
  with jax.enable_x64(True):
    h = jnp.array([125.0, 125.0, 0.0])
    q = np.asarray(_trapezoid(h, jnp.asarray(10.0), "gaussian", None, None))
    kw = dict(stop_on_negative=True, tol=0.0)
    paper = R.reconstruct_details(q, 10.0, 250.0, **kw)
    halving = R.reconstruct_details(q, 10.0, 250.0, min_step=1e-3, **kw)
    assert int(paper.status) == int(halving.status) == int(Stop.NEGATIVE)
    np.testing.assert_array_equal(halving.histogram, paper.histogram)


@pytest.mark.slow
def test_mle_reaches_a_boundary_histogram_in_few_newton_steps():
  """The 4x and 2x step sizes extrapolate towards H_k = 0 (a Newton step there shrinks
  H_k by only a factor e): from the uniform start, 10 steps (the docstring's 10-20)."""
  h = jnp.array([240.0, 10.0, 0.0])
  q = np.asarray(_trapezoid(h, jnp.asarray(40.0), "gaussian", None, None))
  out = R.reconstruct_details(q, 40.0, 250.0, method="mle")
  assert int(out.status) == int(Stop.CONVERGED) and int(out.num_steps) <= 15
  np.testing.assert_allclose(out.histogram, h, atol=0.05)


def test_known_zeros_bound_of_a_unanimous_histogram_is_zero():
  # svhn/M3: 250 votes on one class. Knowing the nine empty classes and the total fixes H:
  # the known-zeros bound is exactly 0, while the plain bound is large.
  h = TABLE[27]
  assert np.count_nonzero(h) == 1
  cr = A.cramer_rao(h, 40.0, 10_000)
  assert float(cr.error_known_zeros) == 0.0 and float(cr.queries_for_error_known_zeros[0]) == 0.0
  assert float(cr.error) > 0.5


def test_near_boundary_is_two_standard_deviations():
  h = TABLE[5]                                   # mnist/M1, smallest class 1 vote
  for n in (10**5, 10**6, 10**7):                # min H_i/std_i grows as sqrt(n): 0.52, 1.65, 5.2
    cr = A.cramer_rao(h, 40.0, n)
    ratio = np.min(h / np.asarray(cr.std))
    assert bool(cr.near_boundary) == bool(ratio < 2.0)
  assert 1.0 < np.min(h / np.asarray(A.cramer_rao(h, 40.0, 10**6).std)) < 2.0


def test_mle_frequencies_with_every_query_answered_has_no_bottom():
  np.testing.assert_allclose(A.mle_frequencies([[3, 1]], [4], 4), [[0.75, 0.25, 0.0]])
  np.testing.assert_allclose(A.mle_frequencies([3, 1], 4, 8), [0.375, 0.125, 0.5])


def test_mle_frequencies_broadcast_per_row_and_refuse_counts_that_are_not_the_answers():
  """Per-row queries sent with one answered count broadcast; counts that do not sum to the
  answered number (rows that would sum past 1) or a negative answered count are refused
  here, naming the arguments, not later in the reconstruction."""
  np.testing.assert_allclose(A.mle_frequencies([[3, 1], [2, 2]], 4, [8, 4]),
                             [[0.375, 0.125, 0.5], [0.5, 0.5, 0.0]])
  with pytest.raises(ValueError, match="sum to num_answered"):
    A.mle_frequencies([[3, 1]], [2], 10)
  with pytest.raises(ValueError, match="num_answered >= 0"):
    A.mle_frequencies([[0, 0]], [-1], 10)
  with pytest.raises(ValueError, match="must broadcast over the rows"):
    A.mle_frequencies([[3, 1], [2, 2], [1, 3]], [4, 4], 8)
  with pytest.raises(ValueError, match="must broadcast over the rows"):
    A.mle_frequencies([[3, 1]], [4], [])  # would drop the row
  with pytest.raises(ValueError, match="must broadcast over the rows"):
    A.mle_frequencies(3.0, 3, 4)
  with pytest.raises(ValueError, match="num_sent must be finite"):
    A.mle_frequencies([[3, 1]], [4], np.inf)


def test_negative_log_likelihood_of_two_classes_is_the_closed_form():
  """C = 2: Q_0 = Φ((H_0 - H_1)/(√2 σ)), and with the threshold check class k has P·Q_k and
  ⊥ has 1 - P, P = Φ((max H - T)/σ_T); -ℓ = -Σ q̄_k log π_k (a scipy oracle)."""
  import scipy.stats  # pylint: disable=g-import-not-at-top
  h, sigma, t, st = np.array([160.0, 90.0]), 40.0, 150.0, 30.0
  q = np.array([0.5, 0.2, 0.3])
  z = (h[0] - h[1]) / (np.sqrt(2.0) * sigma)
  log_q = scipy.stats.norm.logcdf([z, -z])
  log_p = scipy.stats.norm.logcdf([(h.max() - t) / st, (t - h.max()) / st])
  plain = -np.dot(q[:2] / 0.7, log_q)
  confident = -(np.dot(q[:2], log_p[0] + log_q) + q[2] * log_p[1])
  with jax.enable_x64(True):
    nll = jax.jit(lambda x, qb, c: lk.negative_log_likelihood(  # noqa: E731
        x, qb, jnp.asarray(sigma), jnp.asarray(t), jnp.asarray(st), confident=c),
                  static_argnums=2)
    np.testing.assert_allclose(nll(jnp.asarray(h), jnp.asarray(q[:2] / 0.7), False), plain,
                               rtol=1e-6)
    np.testing.assert_allclose(nll(jnp.asarray(h), jnp.asarray(q), True), confident,
                               rtol=1e-6)


def _quadratic_in_theta(theta, a, b, total):
  h = total * np.exp(theta - theta.max()) / np.exp(theta - theta.max()).sum()
  return a @ h + 0.5 * h @ b @ h


def test_chart_newton_system_matches_central_differences_in_theta():
  """∇_θ and ∇²_θ of θ ↦ f(N softmax θ) from f's own in H, against numpy central differences
  of a quadratic f; ∇_H f ≠ 0, so the chart's curvature term matters."""
  r = np.random.default_rng(1)
  c, total, eps = 4, 250.0, 1e-4
  a, b = r.normal(size=c), r.normal(size=(c, c))
  b = b @ b.T / 1e3
  theta = r.normal(size=c)
  h = total * np.exp(theta) / np.exp(theta).sum()
  with jax.enable_x64(True):
    g, hess = jax.jit(lk.chart_newton_system)(jnp.asarray(theta), jnp.asarray(total),
                                              jnp.asarray(a + b @ h), jnp.asarray(b))
  f = lambda t: _quadratic_in_theta(t, a, b, total)  # noqa: E731
  e = np.eye(c) * eps
  fd_g = np.array([(f(theta + e[i]) - f(theta - e[i])) / (2 * eps) for i in range(c)])
  fd_h = np.array([[(f(theta + e[i] + e[j]) - f(theta + e[i] - e[j]) - f(theta - e[i] + e[j])
                     + f(theta - e[i] - e[j])) / (4 * eps ** 2) for j in range(c)]
                   for i in range(c)])
  np.testing.assert_allclose(g, fd_g, rtol=1e-6, atol=1e-6)
  np.testing.assert_allclose(hess, fd_h, rtol=1e-4, atol=1e-3)
  np.testing.assert_allclose(np.asarray(hess).sum(1), 0.0, atol=1e-9)   # annihilates 1


def test_newton_direction_is_the_saddle_free_step_on_the_tangent_space():
  """A diagonal Hessian with a negative curvature: each coordinate steps -g_k/|H_kk| (down
  hill), centred. A Hessian singular along 1 (as in θ): the Newton step -H⁺g for g ⟂ 1."""
  step = jax.jit(lambda x, hess: lk.newton_direction(x, hess, 1e-6))  # noqa: E731
  g, d = np.array([1.0, -2.0, 0.5, 0.0]), np.array([2.0, -4.0, 0.25, 1.0])
  delta = np.asarray(step(jnp.asarray(g, jnp.float32), jnp.diag(jnp.asarray(d, jnp.float32))))
  want = -g / np.abs(d)
  np.testing.assert_allclose(delta, want - want.mean(), rtol=1e-5, atol=1e-6)
  assert float(np.dot(g, delta)) < 0                       # a descent direction
  r = np.random.default_rng(2)
  m = r.normal(size=(4, 4))
  proj = np.eye(4) - 0.25
  hess = proj @ (m @ m.T + np.eye(4)) @ proj
  g = proj @ r.normal(size=4)
  delta = step(jnp.asarray(g, jnp.float32), jnp.asarray(hess, jnp.float32))
  np.testing.assert_allclose(delta, -np.linalg.pinv(hess) @ g, rtol=1e-4, atol=1e-5)


def test_dirichlet_histograms_follow_their_concentration_and_their_own_keys():
  """Rows are N votes; α = 0.01 puts (nearly) all of them on one class, α = 100 spreads
  them about evenly (p ≈ uniform: 10 of 50 per class); concentration i draws with
  fold_in(key, i), so two nearly equal α give different rows; names count 0..n-1 per α."""
  h, names = A.dirichlet_histograms(KEY, (0.01, 100.0, 100.5), 4, num_teachers=50,
                                    num_classes=5)
  assert h.shape == (12, 5) and h.dtype == np.int32
  np.testing.assert_array_equal(h.sum(1), 50)
  assert names == [f"dirichlet{a}/{j}" for a in ("0.01", "100", "100.5") for j in range(4)]
  assert np.all(h[:4].max(1) >= 45) and np.all(h[4:].max(1) <= 25)
  assert not np.array_equal(h[4:8], h[8:])
  with pytest.raises(ValueError, match="alphas"):
    A.dirichlet_histograms(KEY, (0.0,), 1)


def test_mle_reports_the_kl_of_its_estimate_and_stops_at_max_iter():
  """Two classes, exact frequencies of H = [200, 50]: started at H the solver converges
  there (KL 0); started uniform with max_iter = 3 it stops after 3 steps, MAX_ITER. Either
  way its loss is KL(q̄ ‖ π(Ĥ)) of the Ĥ it returns (closed form Q_0 = Φ(d/(√2 σ)))."""
  import scipy.stats  # pylint: disable=g-import-not-at-top
  h, sigma = np.array([200.0, 50.0]), 40.0
  pi = lambda x: scipy.stats.norm.cdf(  # noqa: E731
      np.array([1.0, -1.0]) * (x[0] - x[1]) / (np.sqrt(2.0) * sigma))
  q = pi(h)
  kl = lambda x: np.sum(q * np.log(q / pi(x)))  # noqa: E731
  out = A.reconstruct_details(np.stack([q, q]).astype(np.float32), sigma, 250.0, method="mle",
                              max_iter=3, init=[h, [125.0, 125.0]])
  est = np.asarray(out.histogram, np.float64)
  np.testing.assert_allclose(est[0], h, atol=1e-3)
  np.testing.assert_allclose(est.sum(1), 250.0, rtol=1e-6)
  assert np.asarray(out.status).tolist() == [A.Stop.CONVERGED, A.Stop.MAX_ITER]
  assert int(out.num_steps[1]) == 3
  np.testing.assert_allclose(out.loss, [kl(est[0]), kl(est[1])], atol=1e-7)
  assert kl(est[1]) > 1e-7                                   # not there yet after 3 steps


def _two_class_pi(h, sigma):
  """Closed form of GNMax's answer distribution for C = 2: Q_0 = Φ((H_0 - H_1)/(√2 σ))."""
  import scipy.stats  # pylint: disable=g-import-not-at-top
  return scipy.stats.norm.cdf(np.array([1.0, -1.0]) * (h[0] - h[1]) / (np.sqrt(2.0) * sigma))


def test_three_newton_steps_reach_the_mle_of_exact_two_class_frequencies():
  """q̄ = π(H) exactly (closed form), so the MLE is H. Three Newton steps (the compile of
  the max_iter = 3 test above) from the uniform start reach a near-boundary H = [240, 10]
  to half a vote (the 4x and 2x step sizes extrapolate towards the boundary); from one vote
  off an interior H the full Newton steps land on it and stop CONVERGED before max_iter;
  a start on the boundary (a class with no votes) is moved inside the chart, not to NaN."""
  sigma = 40.0
  h = np.array([[240.0, 10.0], [200.0, 50.0]])
  q = np.stack([_two_class_pi(x, sigma) for x in h]).astype(np.float32)
  out = A.reconstruct_details(q, sigma, 250.0, method="mle", max_iter=3,
                              init=[[125.0, 125.0], [199.0, 51.0]])
  est = np.asarray(out.histogram, np.float64)
  np.testing.assert_allclose(est[0], h[0], atol=0.5)
  np.testing.assert_allclose(est[1], h[1], atol=0.01)
  assert int(out.status[1]) == A.Stop.CONVERGED
  out = A.reconstruct_details(q[::-1], sigma, 250.0, method="mle", max_iter=3,
                              init=[[250.0, 0.0], [250.0, 0.0]])
  est = np.asarray(out.histogram, np.float64)
  assert np.all(np.isfinite(est))
  np.testing.assert_allclose(est, h[::-1], atol=0.5)


def test_newton_direction_keeps_the_own_step_of_a_class_with_tiny_curvature():
  """Scaled to unit diagonal before the eigenvalue floor: a class whose row of the Hessian
  is 1e-9 of the others' (a share p_k near the boundary) still gets its own Newton step
  -g_k/H_kk, not one shrunk by damping·max|λ| (the floor of the unscaled matrix)."""
  step = jax.jit(lambda x, hess: lk.newton_direction(x, hess, 1e-6))  # noqa: E731
  g, d = np.array([1.0, 2e-9, -1.5]), np.array([1.0, 1e-9, 0.5])
  delta = np.asarray(step(jnp.asarray(g, jnp.float32), jnp.diag(jnp.asarray(d, jnp.float32))))
  want = -g / d
  np.testing.assert_allclose(delta, want - want.mean(), rtol=1e-5, atol=1e-6)


def test_mle_stops_converged_where_float32_cannot_resolve_a_lower_likelihood():
  """Exact two-class frequencies (closed form), float32, a start one vote off H: the Newton
  steps reach H to a few hundredths of a vote, where no step size lowers -ℓ by more than
  its rounding; the solver then stops CONVERGED (module docstring), not MAX_ITER after
  re-accepting steps that only tie -ℓ. On the host's CPU: the ties are float32 roundings,
  which another backend's fusions may round otherwise."""
  for sigma, top in (((60.0, 90.0), (100.0, 100.0)), ((130.0, 130.0), (75.0, 100.0))):
    sigma, h = np.array(sigma), np.stack([np.array(top), 250.0 - np.array(top)], 1)
    q = np.stack([_two_class_pi(x, s) for x, s in zip(h, sigma)]).astype(np.float32)
    with jax.default_device(jax.devices("cpu")[0]):
      out = A.reconstruct_details(q, sigma, 250.0, method="mle", max_iter=3,
                                  init=h + [[-1.0, 1.0]])
    np.testing.assert_allclose(out.histogram, h, atol=0.05)
    assert np.asarray(out.status).tolist() == [A.Stop.CONVERGED] * 2


def test_log_probability_of_a_near_unanimous_answer_keeps_float32_precision():
  """C = 2, closed form log Q_0 = log Φ((H_0 - H_1)/(√2 σ)) (scipy). Near unanimity log Q_top
  ≈ -Q_other is tiny (-5e-6, -4e-7): in float32 it keeps 0.3 % relative precision (through
  log1p of the other classes' mass), which the quadrature's own logarithm does not."""
  import scipy.stats  # pylint: disable=g-import-not-at-top
  log_pi = jax.jit(lambda x, s: ap.log_answer_probabilities(  # noqa: E731
      x, s, 0.0, 1.0, confident=False))
  for h, sigma in (([250.0, 0.0], 40.0), ([20.0, 230.0], 30.0)):
    z = (h[0] - h[1]) / (np.sqrt(2.0) * sigma)
    want = scipy.stats.norm.logcdf([z, -z])
    got = np.asarray(log_pi(jnp.asarray(h, jnp.float32), jnp.float32(sigma)), np.float64)
    np.testing.assert_allclose(got, want, rtol=3e-3)


def test_mle_started_at_a_unanimous_histogram_stays_there():
  """q̄ = π(H) of H = N e_k (closed form), started at H itself: the zero class starts just
  inside the chart (a thousandth of N/C), so the solver stays within 0.05 vote of H and
  reports CONVERGED within the three steps."""
  sigma = 40.0
  h = np.array([[250.0, 0.0], [0.0, 250.0]])
  q = np.stack([_two_class_pi(x, sigma) for x in h]).astype(np.float32)
  out = A.reconstruct_details(q, sigma, 250.0, method="mle", max_iter=3, init=h)
  np.testing.assert_allclose(out.histogram, h, atol=0.05)
  assert np.asarray(out.status).tolist() == [A.Stop.CONVERGED] * 2


def test_cramer_rao_bound_is_the_pseudo_inverse_of_the_fisher_information_on_the_simplex():
  """The bound against numpy: I = Jᵀ diag(1/Q) J with J = ∂Q/∂H by central differences of
  the trapezoid Q (float64; at H + 1, as Q depends on differences only); Σ_n = (P n I P)⁺
  with P the projector onto Σ v = 0 (on the classes with votes, for the known-zeros
  bound); error = √(2/π) Σ_i √(Σ_n)_ii / (2N). At σ = 14, mnist/M1's I is ill-conditioned
  on the tangent space (eigenvalues 2e-4 of the largest) but not singular: still finite."""
  h, sigma, n, eps = TABLE[NAMES.index("svhn/M2")].astype(np.float64), 40.0, 10_000, 1e-3
  c = h.size
  with jax.enable_x64(True):
    e = np.eye(c) * eps
    q = np.asarray(A.output_distribution(np.concatenate([h + 1 + e, h + 1 - e, h[None]]),
                                         sigma))
  jac = (q[:c] - q[c:2 * c]).T / (2 * eps)                       # [k, i] = ∂Q_k/∂H_i
  fisher = jac.T @ (jac / q[-1][:, None])
  np.testing.assert_allclose(A.fisher_information(h, sigma), fisher, rtol=1e-4,
                             atol=1e-6 * np.abs(fisher).max())
  for h, sigma in ((h, sigma), (TABLE[NAMES.index("mnist/M1")].astype(np.float64), 14.0)):
    f = np.asarray(A.fisher_information(h, sigma))
    cr = A.cramer_rao(h, sigma, n, targets=(0.05,))
    for free, err, std in ((np.ones(c, bool), cr.error, cr.std),
                           (h > 0, cr.error_known_zeros, None)):
      m = free.astype(np.float64)
      proj = np.diag(m) - np.outer(m, m) / m.sum()
      cov = np.linalg.pinv(proj @ (n * f) @ proj, hermitian=True)
      want = np.sqrt(2.0 / np.pi) * np.sqrt(np.diag(cov)).sum() / (2.0 * h.sum())
      np.testing.assert_allclose(err, want, rtol=1e-6)
      if std is not None:
        np.testing.assert_allclose(std, np.sqrt(np.diag(cov)), rtol=1e-6)
    err = np.asarray(cr.error, np.float64)
    np.testing.assert_allclose(cr.queries_for_error, np.ceil(n * (err / 0.05) ** 2), rtol=1e-9)


def test_mle_core_without_a_usable_newton_step_stops_at_once_and_not_converged():
  """A row whose likelihood is not finite (σ = NaN, past the public checks) has no usable
  Newton step: it stops after one step at its start with ZERO_GRADIENT, not CONVERGED,
  while the other row of the batch runs on to max_iter."""
  f32 = lambda x: jnp.asarray(np.asarray(x, np.float32))  # noqa: E731
  h, loss, steps, status = lk.mle_core(
      f32([[0.5, 0.5], [0.8, 0.2]]), f32([np.nan, 40.0]), f32([0.0, 0.0]), f32([1.0, 1.0]),
      f32([250.0, 250.0]), f32(np.zeros((2, 2))), confident=False, tol=1e-10, max_iter=3,
      damping=1e-6, max_step=4.0, width=None, num_points=None)
  np.testing.assert_array_equal(np.asarray(h)[0], [125.0, 125.0])
  assert np.isnan(float(loss[0])) and int(steps[0]) == 1
  assert np.asarray(status).tolist() == [A.Stop.ZERO_GRADIENT, A.Stop.MAX_ITER]
