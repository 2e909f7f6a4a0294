"""Tests for pate_jax.attacks: Q(H), Monte Carlo answers, reconstruction, validation."""

from __future__ import annotations

import math
import pathlib
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.test_util import check_grads
from scipy import integrate, special, stats

from pate_jax import attacks as A

PAPER = (pathlib.Path(__file__).resolve().parent.parent.parent / "shared" / "papers"
         / "pate-histogram-leakage-attack.txt")
KEY = jax.random.key(0)
TABLE, NAMES = A.table1_histograms()
MEDIUM = A.table1_histogram("mnist/M2")  # [6, 7, 6, 30, 4, 181, 0, 10, 5, 1]
SIGMAS = np.array([0.01, 1.0, 40.0, 400.0])


def _quad_q(h, s, noise):
  """Theorem 1 by scipy.integrate.quad (independent oracle)."""
  if noise == "gaussian":
    pdf = lambda x: np.exp(-0.5 * x * x) / math.sqrt(2 * math.pi)
    cdf = special.ndtr
  else:
    pdf = lambda x: 0.5 * np.exp(-np.abs(x))
    cdf = lambda x: np.where(x < 0, 0.5 * np.exp(np.minimum(x, 0)),
                             1 - 0.5 * np.exp(-np.maximum(x, 0)))
  out = []
  for k in range(len(h)):
    others = np.delete(h, k)

    def f(a, k=k, others=others):
      return pdf((a - h[k]) / s) / s * np.prod(cdf((a - others) / s))

    out.append(integrate.quad(f, h.min() - 40 * s, h.max() + 40 * s,
                              points=sorted(set(h.tolist())), limit=500,
                              epsabs=1e-14, epsrel=1e-12)[0])
  return np.array(out)


# --- Table 1 -----------------------------------------------------------------------------


def test_table1_has_30_histograms_of_250_votes_in_consensus_groups():
  assert TABLE.shape == (30, 10) and TABLE.dtype == np.int32
  np.testing.assert_array_equal(TABLE.sum(1), 250)
  assert NAMES[0] == "mnist/L1" and NAMES[14] == "mnist/H5" and NAMES[29] == "svhn/H5"
  np.testing.assert_array_equal(A.table1_histogram("svhn/M3"), [0, 0, 0, 6, 0, 243, 0, 0, 0, 1])
  mnist = TABLE[:15].max(1)
  assert mnist[:5].max() < mnist[5:10].min() and mnist[5:10].max() < mnist[10:].min()
  with pytest.raises(ValueError, match="dataset"):
    A.table1_histograms("cifar")


# --- Q(H) --------------------------------------------------------------------------------


@pytest.mark.parametrize("method", ["trapezoid", "accurate"])
def test_two_class_closed_forms(method):
  h = np.array([[30.0, 10.0], [7.0, 7.0]])
  s = 12.0
  q = np.asarray(A.output_distribution(h, s, method))
  # Gaussian: P(H0 + Z0 > H1 + Z1) = Φ((H0 - H1) / (√2 σ)).
  np.testing.assert_allclose(q[:, 0], stats.norm.cdf((h[:, 0] - h[:, 1]) / (math.sqrt(2) * s)),
                             atol=1e-6)
  # Laplace (scale b): P(Z1 - Z0 < d) = 1 - exp(-d/b) (1 + d/(2b)) / 2 for d >= 0.
  q = np.asarray(A.output_distribution(h, s, method, "laplace"))
  d = h[:, 0] - h[:, 1]
  np.testing.assert_allclose(q[:, 0], 1 - 0.5 * np.exp(-d / s) * (1 + d / (2 * s)), atol=1e-6)


def test_accurate_matches_scipy_quad():
  for noise in ("gaussian", "laplace"):
    for idx, s in ((5, 40.0), (27, 60.0), (3, 3.0)):
      h = TABLE[idx].astype(np.float64)
      q = np.asarray(A.output_distribution(h, s, "accurate", noise))
      assert q.dtype == np.float64
      np.testing.assert_allclose(q, _quad_q(h, s, noise), atol=1e-11)


@pytest.mark.parametrize("noise", ["gaussian", "laplace"])
def test_trapezoid_sums_to_one_and_matches_accurate(noise):
  # The errors reported in _output_distribution.DEFAULT_POINTS (float32 adds ~1e-7).
  q_t = np.asarray(A.output_distribution(TABLE[None], SIGMAS[:, None], "trapezoid", noise))
  q_a = np.asarray(A.output_distribution(TABLE[None], SIGMAS[:, None], "accurate", noise))
  assert q_t.shape == (4, 30, 10) and q_t.dtype == np.float32
  np.testing.assert_allclose(q_a.sum(-1), 1.0, atol=1e-12)
  np.testing.assert_allclose(q_t.sum(-1), 1.0, atol=1e-6)
  np.testing.assert_allclose(q_t, q_a, atol=1e-6)
  assert np.all(q_t >= 0)


def test_uniform_histogram_gives_uniform_q_and_shift_invariance():
  q = A.output_distribution(np.full((1, 7), 3.0), 5.0)
  np.testing.assert_allclose(q, 1 / 7, atol=1e-6)
  # Theorem 2: Q(H + c) = Q(H).
  np.testing.assert_allclose(A.output_distribution(MEDIUM + 17.5, 40.0),
                             A.output_distribution(MEDIUM, 40.0), atol=1e-6)


def test_broadcasting_over_sigma_equals_loop():
  batched = A.output_distribution(TABLE[None, :4], SIGMAS[:, None])
  for i, s in enumerate(SIGMAS):
    np.testing.assert_allclose(batched[i], A.output_distribution(TABLE[:4], s), atol=1e-7)


def test_gradients_match_finite_differences():
  with jax.enable_x64(True):
    h = jnp.asarray([12.0, 3.0, 30.0, 7.0], jnp.float64)
    for noise, points in (("gaussian", None), ("laplace", 201)):
      f = jax.jit(lambda x, s, noise=noise, points=points: A.output_distribution(
          x, s, noise=noise, num_points=points))
      check_grads(f, (h, 9.0), order=1, modes=("rev",), atol=1e-6, rtol=1e-5)
    # The objective's gradient has zero sum (Q is shift invariant).
    q_bar = jnp.asarray(A.output_distribution(h, 9.0, "accurate"))
    x0 = jnp.full(4, 13.0) + jnp.arange(4.0)
    g = jax.jit(jax.grad(A.objective))(x0, q_bar, 9.0)
    assert abs(float(g.sum())) < 1e-12 * float(jnp.abs(g).max()) + 1e-15
    check_grads(jax.jit(lambda x: A.objective(x, q_bar, 9.0)), (x0,), order=1, modes=("rev",),
                atol=1e-6, rtol=1e-5)


def test_tiny_sigma_is_argmax_and_finite_gradient():
  q = np.asarray(A.output_distribution(MEDIUM, 1e-3))
  np.testing.assert_allclose(q, np.eye(10)[5], atol=1e-6)
  g = jax.grad(lambda x: A.output_distribution(x, 1e-3)[5])(jnp.asarray(MEDIUM, jnp.float32))
  assert np.all(np.isfinite(g))


# --- Monte Carlo ---------------------------------------------------------------------------


def _within(freq, p, n, k=5.0):
  return np.abs(freq - p) <= k * np.sqrt(p * (1 - p) / n) + 1e-6


def test_gnmax_frequencies_match_q():
  m = 20_000
  hists = TABLE[[0, 6, 17]]
  q_bar = np.asarray(A.sample_answers(KEY, hists, 40.0, m))
  q = np.asarray(A.output_distribution(hists, 40.0, "accurate"))
  np.testing.assert_allclose(q_bar.sum(-1), 1.0, atol=1e-6)
  assert np.all(_within(q_bar, q, m))
  # Another key gives other draws; the same key the same ones.
  np.testing.assert_array_equal(q_bar, A.sample_answers(KEY, hists, 40.0, m))
  assert not np.array_equal(q_bar, A.sample_answers(jax.random.key(1), hists, 40.0, m))


def test_sampling_uses_the_aggregator_and_consistent_answers_defeat_it():
  from pate_jax import aggregation as agg
  m = 500
  counts, answered = A.answer_counts(KEY, MEDIUM[None], 40.0, m)
  # Histogram 0 is answered by aggregator key fold_in(KEY, 0), query ids 0..M-1.
  labels = agg.gnmax(jax.random.fold_in(KEY, 0), np.tile(MEDIUM, (m, 1)), 40.0)
  np.testing.assert_array_equal(counts[0], np.bincount(np.asarray(labels), minlength=10))
  assert int(answered[0]) == m
  q_bar = np.asarray(A.sample_answers(KEY, TABLE[:6], 100.0, m, consistent=True))
  assert np.all(np.sort(q_bar, -1)[:, -1] == 1.0)


def test_confident_gnmax_observes_answered_queries_only():
  m, thr, s_thr = np.array([20_000, 8_000]), 200.0, 150.0  # Queries per histogram.
  hists = TABLE[[0, 12]]
  q_bar, answered = A.sample_confident_answers(KEY, hists, thr, s_thr, 40.0, m)
  p_ans = stats.norm.sf((thr - hists.max(1)) / s_thr)
  assert np.all(_within(np.asarray(answered) / m, p_ans, m))
  q = np.asarray(A.output_distribution(hists, 40.0, "accurate"))
  assert np.all(_within(np.asarray(q_bar), q, np.asarray(answered)[:, None]))


# --- Reconstruction ----------------------------------------------------------------------


@pytest.mark.slow
def test_paper_reconstruction_from_exact_q_and_from_samples():
  sigmas = np.array([40.0, 100.0])
  q_exact = np.asarray(A.output_distribution(MEDIUM, 100.0, "accurate"), np.float32)
  # With step halving and no loss threshold, exact Q gives H back.
  r = A.reconstruct_details(q_exact, 100.0, 250, tol=0.0, min_step=1e-2, max_iter=500)
  assert float(A.normalized_l1_error(MEDIUM, r.histogram)) < 0.004
  np.testing.assert_allclose(float(r.histogram.sum()), 250, rtol=1e-5)
  # The paper's rule (loss < 0.01, 10 then 1 vote steps) from 10^4 answers.
  q_bar = A.sample_answers(KEY, MEDIUM, sigmas[:, None], 10_000)
  r = A.reconstruct_details(q_bar, sigmas[:, None], 250)
  err = np.asarray(A.normalized_l1_error(MEDIUM, r.histogram))
  assert np.all(err < 0.2), err
  assert np.all(np.asarray(r.loss) < 0.02)
  assert set(np.asarray(r.status).ravel().tolist()) <= {A.Stop.CONVERGED, A.Stop.NO_DECREASE}


@pytest.fixture(scope="module")
def q_exact():
  """MEDIUM's exact answer distribution at σ = 60, float32: what the variants reconstruct
  from (each variant is a program of its own, compiled in its own test)."""
  return np.asarray(A.output_distribution(MEDIUM, 60.0, "accurate"), np.float32)


def test_projected_variant(q_exact):
  proj = A.reconstruct_details(q_exact, 60.0, 250, project=True, tol=0.0, min_step=1e-2)
  assert float(A.normalized_l1_error(MEDIUM, proj.histogram)) < 0.01
  assert np.all(np.asarray(proj.histogram) >= -1e-4)


def test_optax_variant(q_exact):
  opt = A.reconstruct_details(q_exact, 60.0, 250, method="optax", tol=0.0)
  assert float(A.normalized_l1_error(MEDIUM, opt.histogram)) < 0.01


def test_stop_on_negative_never_returns_a_negative_estimate(q_exact):
  neg = A.reconstruct_details(q_exact, 60.0, 250, stop_on_negative=True, tol=0.0)
  assert np.all(np.asarray(neg.histogram) >= -1e-3)
  assert int(neg.status) in (A.Stop.NEGATIVE, A.Stop.NO_DECREASE)


def test_project_to_simplex():
  x = jnp.array([3.0, -1.0, 0.5, 10.0])
  p = np.asarray(A.project_to_simplex(x, 6.0))
  assert np.all(p >= 0) and abs(p.sum() - 6.0) < 1e-5
  # Closed form: the active set {0, 3}: θ = (3 + 10 - 6) / 2 = 3.5.
  np.testing.assert_allclose(p, [0.0, 0.0, 0.0, 6.0], atol=1e-6)
  np.testing.assert_allclose(A.project_to_simplex(jnp.array([1.0, 2.0, 3.0]), 6.0),
                             [1.0, 2.0, 3.0], atol=1e-6)
  # All coordinates stay active: θ = (9 - 6) / 3 = 1.
  np.testing.assert_allclose(A.project_to_simplex(jnp.array([4.0, 2.0, 3.0]), 6.0),
                             [3.0, 1.0, 2.0], atol=1e-5)


def test_normalized_l1_error_and_consensus():
  np.testing.assert_allclose(A.normalized_l1_error([3.0, 1.0], [2.0, 2.0]), 0.25)
  np.testing.assert_allclose(A.normalized_l1_error(TABLE, TABLE), 0.0)
  np.testing.assert_allclose(A.consensus(MEDIUM), 181 / 250)
  np.testing.assert_array_equal(A.classify_low_consensus(TABLE[[0, 14]]), [True, False])


# --- Privacy cost of the attack ----------------------------------------------------------


def test_budget_allows_exactly_the_largest_affordable_number_of_queries():
  rdp = A.per_query_rdp(TABLE[[0, 14]], sigma=40.0, threshold=200.0, sigma_threshold=150.0)
  m = A.max_queries_within_budget(rdp, 1.97, delta=1e-5)
  assert np.all(m > 100)
  eps_m, _ = A.queries_epsilon(rdp, m, delta=1e-5)
  eps_next, _ = A.queries_epsilon(rdp, m + 1, delta=1e-5)
  assert np.all(eps_m <= 1.97) and np.all(eps_next > 1.97)
  # A higher-consensus histogram costs less per query, so it affords more.
  assert m[1] > m[0]


@pytest.mark.parametrize("conversion", ["improved", "classic"])
@pytest.mark.parametrize("sigma, confident", [(5.0, False), (40.0, False), (40.0, True),
                                              (100.0, True)])
def test_closed_form_budget_is_the_largest_affordable_count(sigma, confident, conversion):
  """``M* = max_λ ⌊(ε_max − c_λ)/r_λ⌋`` is the M with ε(M) <= ε_max < ε(M + 1) (ε is monotone).

  The closed form replaced a bisection on M; on 6,760 rows (these settings, budgets
  0.05..8, caps, random RDP curves) both gave the same counts.
  """
  rdp = A.per_query_rdp(TABLE, sigma=sigma, threshold=200.0 if confident else None,
                        sigma_threshold=150.0 if confident else None)
  checked = 0
  for budget in (0.05, 0.3, 1.97, 8.0):
    m = A.max_queries_within_budget(rdp, budget, delta=1e-5, conversion=conversion)
    assert m.dtype == np.int64 and m.shape == (30,)
    some, below_cap = m > 0, m < 10**7  # near-unanimous histograms at small σ hit the cap
    checked += int((some & below_cap).sum())
    eps_m, _ = A.queries_epsilon(rdp[some], m[some], delta=1e-5, conversion=conversion)
    eps_next, _ = A.queries_epsilon(rdp[below_cap], m[below_cap] + 1, delta=1e-5,
                                    conversion=conversion)
    assert np.all(eps_m <= budget) and np.all(eps_next > budget)
  assert checked >= 4  # rows with 0 < M* < cap, where both sides of the bound are tested


def test_closed_form_budget_edges():
  orders = np.array([2.0, 8.0, 32.0])
  rdp = np.array([[1.0, 0.0, 1.0],          # a free order: every query is affordable
                  [np.inf, np.inf, np.inf],  # one query costs infinitely much
                  [1e3, 1e3, 1e3],          # one query exceeds the budget
                  [0.1, 0.01, 0.2]])
  m = A.max_queries_within_budget(rdp, 2.0, delta=1e-5, orders=orders, max_queries=10**6)
  np.testing.assert_array_equal(m[:3], [10**6, 0, 0])
  # Hand computation: c_λ = log1p(-1/λ) - (log δ + log λ)/(λ - 1) is 10.1, 1.21, 0.23;
  # λ = 2 leaves no slack, λ = 32 allows ⌊1.77 / 0.2⌋ = 8 queries, λ = 8 the most.
  c8 = math.log1p(-1 / 8) - (math.log(1e-5) + math.log(8)) / 7
  assert m[3] == math.floor((2.0 - c8) / 0.01)
  assert A.max_queries_within_budget(rdp[3:], 2.0, delta=1e-5, orders=orders,
                                     max_queries=5)[0] == 5


@pytest.mark.parametrize("conversion", ["improved", "classic"])
def test_conversion_offset_is_the_accountants(conversion):
  """c_λ of the closed form is rdp_to_epsilon's per-order offset (a lone order at rdp = 10)."""
  from pate_jax import accounting
  from pate_jax.attacks import _privacy
  orders = A.ATTACK_ORDERS
  lone = np.where(np.eye(orders.size, dtype=bool), 10.0, np.inf)
  eps, _ = accounting.rdp_to_epsilon(lone, orders, 1e-5, conversion=conversion)
  np.testing.assert_allclose(_privacy._conversion_offset(orders, 1e-5, conversion),
                             np.asarray(eps) - 10.0, rtol=0, atol=1e-12)


# --- Bad input -----------------------------------------------------------------------------


@pytest.mark.parametrize("call, match", [
    (lambda: A.output_distribution([[3.0, -1.0]], 1.0), "non-negative"),
    (lambda: A.output_distribution([[3.0, np.nan]], 1.0), "finite"),
    (lambda: A.output_distribution([[3.0, 1.0]], 0.0), "sigma"),
    (lambda: A.output_distribution([[3.0, 1.0]], -2.0), "sigma"),
    (lambda: A.output_distribution([[3.0, 1.0]], np.nan), "sigma"),
    (lambda: A.output_distribution([[3.0]], 1.0), "C >= 2"),
    (lambda: A.output_distribution([[3.0, 1.0]], 1.0, method="simpson"), "method"),
    (lambda: A.output_distribution([[3.0, 1.0]] * 3, [1.0, 2.0]), "broadcast"),
    (lambda: A.sample_answers(KEY, [[3, 1]], 1.0, 0), "num_queries"),
    (lambda: A.sample_answers(KEY, [[3, 1]], 1.0, -5), "num_queries"),
    (lambda: A.sample_answers(KEY, [[3, 1]], 1.0, 2.5), "num_queries"),
    (lambda: A.sample_answers(KEY, [[3, -1]], 1.0, 10), "non-negative"),
    (lambda: A.sample_answers(KEY, [[3, 1]], 0.0, 10), "sigma"),
    (lambda: A.sample_confident_answers(KEY, [[3, 1]], np.inf, 1.0, 1.0, 10), "threshold"),
    (lambda: A.reconstruct([[0.5, 0.5]], 1.0, 10, num_classes=3), "classes"),
    (lambda: A.reconstruct([[0.5, 0.6]], 1.0, 10), "sum to 1"),
    (lambda: A.reconstruct([[1.5, -0.5]], 1.0, 10), "non-negative"),
    (lambda: A.reconstruct([[0.5, 0.5]], 1.0, 0), "num_teachers"),
    (lambda: A.reconstruct([[0.5, 0.5]], -1.0, 10), "sigma"),
    (lambda: A.reconstruct([[0.5, 0.5]], 1.0, 10, method="sgd"), "method"),
    (lambda: A.normalized_l1_error([[1.0, 2.0]], [[1.0, 2.0, 0.0]]), "classes"),
    (lambda: A.max_queries_within_budget(np.ones((1, 3)), -1.0, delta=1e-5), "budget"),
    (lambda: A.max_queries_within_budget(np.ones((1, 3)), 1.0, delta=1e-5), "rdp must have"),
    (lambda: A.max_queries_within_budget([[np.nan, 1, 1]], 1.0, delta=1e-5, orders=[2, 3, 4]),
     "rdp must be >= 0"),
    (lambda: A.max_queries_within_budget([[-1, 1, 1]], 1.0, delta=1e-5, orders=[2, 3, 4]),
     "rdp must be >= 0"),
    (lambda: A.max_queries_within_budget([[1, 1, 1]], 1.0, delta=1.5, orders=[2, 3, 4]),
     "delta"),
    (lambda: A.max_queries_within_budget([[1, 1, 1]], 1.0, delta=1e-5, orders=[2, 3, 4],
                                         conversion="tight"), "conversion"),
])
def test_bad_input_raises(call, match):
  with pytest.raises(ValueError, match=match):
    call()


def test_no_recompilation_for_new_values_of_the_same_shapes(caplog):
  hists = TABLE[:3]

  def attack(i):
    q_bar = A.sample_answers(jax.random.key(i), hists, 30.0 + i, 300)
    A.output_distribution(hists + i, 30.0 + i)
    return A.reconstruct(q_bar, 30.0 + i, 250, max_iter=20)

  attack(0)
  with jax.log_compiles(True), caplog.at_level("DEBUG"):
    attack(1)
    attack(2)
  compiled = [r.getMessage() for r in caplog.records if "ompil" in r.getMessage()]
  assert not compiled, compiled


def test_low_consensus_is_strictly_below_the_threshold():
  # Section 2: "PhD" iff the consensus is *below* 75 %; 3 of 4 and 189 of 252 votes are 75 %.
  h = np.array([[3, 1, 0], [189, 60, 3], [188, 61, 3], [190, 59, 3]])
  np.testing.assert_allclose(A.consensus(h), [0.75, 0.75, 188 / 252, 190 / 252], rtol=1e-6)
  assert np.all(np.asarray(A.consensus(h[:2])) == 0.75)  # exact in float32 too
  np.testing.assert_array_equal(A.classify_low_consensus(h), [False, False, True, False])
  np.testing.assert_array_equal(A.classify_low_consensus(h[:1], 0.8), [True])


def test_table1_is_the_papers_table_row_for_row():
  """Each consensus group's rows against the paper's Table 1 (its text, parsed): a pair of
  counts transposed keeps a row's sum of 250, and only this finds it. The paper lists a
  group's MNIST H1-5 then SVHN H1-5; its low group alternates MNIST and SVHN."""
  if not PAPER.exists():
    pytest.skip(f"{PAPER} not found (../shared/papers)")
  text = PAPER.read_text()
  block = text[text.index("Chosen histograms for evaluation"):text.index("Table 1: The 30")]
  parts = re.split(r"^(High|Median|Low) consensus$", block, flags=re.M)
  assert parts[1::2] == ["High", "Median", "Low"]
  for group, body in zip(parts[1::2], parts[2::2]):
    rows = [[int(x) for x in r.split(",")] for r in re.findall(r"\[([\d, ]+)\]", body)]
    assert len(rows) == 10, group
    mnist, svhn = (rows[0::2], rows[1::2]) if group == "Low" else (rows[:5], rows[5:])
    for dataset, paper_rows in (("mnist", mnist), ("svhn", svhn)):
      for i, row in enumerate(paper_rows):
        name = f"{dataset}/{group[0]}{i + 1}"
        np.testing.assert_array_equal(A.table1_histogram(name), row, err_msg=name)
  assert len(NAMES) == len(set(NAMES)) == len(TABLE) == 30


def test_objectives_are_the_papers_and_the_released_codes_distances():
  """J = ‖Q(Ĥ) - q̄‖₂ (the paper's) and, with normalize, ‖Q/‖Q‖ - q̄/‖q̄‖‖₂ (the released
  code's), against numpy with the closed form Q_0 = Φ((H_0 - H_1)/(√2 σ)) of two classes;
  q̄ a row of frequencies (‖q̄‖ < 1)."""
  from pate_jax.attacks import _reconstruct as R  # pylint: disable=g-import-not-at-top
  h, sigma, q_bar = np.array([150.0, 60.0]), 40.0, np.array([0.8, 0.2])
  q = stats.norm.cdf(np.array([1.0, -1.0]) * (h[0] - h[1]) / (math.sqrt(2) * sigma))
  unit = lambda x: x / np.linalg.norm(x)  # noqa: E731
  objective = jax.jit(R.objective, static_argnames="normalize")
  for normalize, want in ((False, np.linalg.norm(q - q_bar)),
                          (True, np.linalg.norm(unit(q) - unit(q_bar)))):
    got = objective(jnp.asarray(h, jnp.float32), jnp.asarray(q_bar, jnp.float32),
                    jnp.asarray(sigma, jnp.float32), normalize=normalize)
    np.testing.assert_allclose(float(got), want, rtol=1e-5)


def test_optax_with_one_step_returns_that_step_when_it_lowers_the_loss():
  """max_iter = 1: the loop scores only the start x0 = N/C; the one SGD step
  x1 = x0 - lr ∇J(x0) is scored after the loop and returned, being better. Two classes
  from the uniform start: Q = [½, ½], so ∇J = φ(0)/(√2 σ) (Q - q̄)ᵀ[[1, -1], [-1, 1]]/‖Q - q̄‖
  in closed form."""
  import optax  # pylint: disable=g-import-not-at-top
  sigma, lr, q_bar = 40.0, 20.0, np.array([0.9, 0.1])
  r = np.full(2, 0.5) - q_bar
  grad = stats.norm.pdf(0.0) / (math.sqrt(2) * sigma) * (r[0] - r[1]) * np.array([1.0, -1.0])
  x1 = 125.0 - lr * grad / np.linalg.norm(r)
  out = A.reconstruct_details(q_bar.astype(np.float32), sigma, 250.0, method="optax",
                              max_iter=1, optimizer=optax.sgd(lr), tol=0.0)
  np.testing.assert_allclose(out.histogram, x1, rtol=1e-5)
  q1 = stats.norm.cdf(np.array([1.0, -1.0]) * (x1[0] - x1[1]) / (math.sqrt(2) * sigma))
  np.testing.assert_allclose(float(out.loss), np.linalg.norm(q1 - q_bar), rtol=1e-4)


def test_answer_counts_stop_at_the_number_of_queries_inside_a_chunk():
  """M = 500 queries in chunks of 300: the last chunk holds ids 300..599, and row b counts
  exactly the answers of its own aggregator (keyed fold_in(KEY, b)) to ids 0..499."""
  from pate_jax import aggregation as agg  # pylint: disable=g-import-not-at-top
  m = 500
  counts, answered = A.answer_counts(KEY, np.stack([MEDIUM, MEDIUM]), 40.0, m, chunk_size=300)
  np.testing.assert_array_equal(answered, [m, m])
  for b in range(2):
    labels = agg.gnmax(jax.random.fold_in(KEY, b), np.tile(MEDIUM, (m, 1)), 40.0)
    np.testing.assert_array_equal(counts[b], np.bincount(np.asarray(labels), minlength=10))
