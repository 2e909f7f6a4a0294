"""The benchmarks' loop baselines and the tests' oracle: a per-query scalar reference of
the accountants (``math`` + SciPy, Python loops).

Benchmark code, beside the stages that time it (``pate_jax.stages.bench.accounting``,
``smooth_sensitivity``), never imported by the core library.

The same formulas as the vectorised cores — the 2017 LNMax moments (Papernot et al.
2017, Theorems 1-3, Lemma 4) and the 2018 Confident-GNMax data-dependent RDP
(Papernot et al. 2018, Theorem 6, Proposition 10, Section 4.1) — written one query
and one order at a time, the way the original PATE scripts compute them. It is the
baseline of ``experiments/bench_accounting.py`` and an independent cross-check of
the JAX path. Likewise the per-distance walk of
the smooth-sensitivity release (Papernot et al. 2018, Apps. B-C): the baseline of
``experiments/bench_smooth_sensitivity.py`` and the oracle of its tests.
"""

from __future__ import annotations

import math

import numpy as np
import scipy.optimize
import scipy.special
from scipy.special import log_ndtr

from pate_jax.accounting._smooth_sensitivity import BETA_GRID


def synthetic_votes(seed: int, num_queries: int, num_teachers: int, num_classes: int):
  """Histograms from unanimous to split: class probabilities ~ Dirichlet(a), a log-uniform
  in [0.01, 3] per query, votes ~ Multinomial(num_teachers, probabilities)."""
  rng = np.random.default_rng(seed)
  conc = np.exp(rng.uniform(math.log(0.01), math.log(3.0), size=(num_queries, 1)))
  probs = rng.gamma(np.broadcast_to(conc, (num_queries, num_classes)))
  probs /= probs.sum(axis=1, keepdims=True)
  return rng.multinomial(num_teachers, probs).astype(np.int32)



def _log1mexp(x):
  """log(1 - e^x), x <= 0."""
  if x == -math.inf:
    return 0.0
  return math.log(-math.expm1(x)) if x > -math.log(2.0) else math.log1p(-math.exp(x))


def _logaddexp(a, b):
  m = max(a, b)
  if m == -math.inf:
    return -math.inf
  return m + math.log1p(math.exp(-abs(a - b)))


def _logsumexp(values):
  m = max(values)
  if m == -math.inf:
    return -math.inf
  return m + math.log(sum(math.exp(v - m) for v in values))


def loop_lnmax_log_moments(counts, gamma, max_moment: int = 8):
  """Theorems 1, 3 and Lemma 4 (Papernot et al. 2017) for one query: α(1..8)."""
  top = int(np.argmax(counts))
  terms = []
  for j, n in enumerate(counts):
    if j != top:
      z = gamma * (counts[top] - n)
      terms.append(math.log(2.0 + z) - z - math.log(4.0))
  log_q = min(_logsumexp(terms), math.log1p(-1.0 / len(counts)))
  eps = 2.0 * gamma
  out = []
  for l in range(1, max_moment + 1):
    pure = eps * l
    if log_q < math.log(0.5) and log_q + eps < 0.0:
      log1mq = _log1mexp(log_q)
      log_ratio = log1mq - _log1mexp(log_q + eps)
      log_t = _logaddexp(log1mq + l * log_ratio, log_q + pure)
    else:
      log_t = pure
    out.append(min(0.5 * eps * eps * l * (l + 1), log_t, pure))
  return out


def loop_rdp_from_log_q(log_q, sigma, orders):
  """Theorem 6 + Proposition 10 (Papernot et al. 2018) for one query, all orders."""
  var = sigma * sigma
  if log_q == -math.inf:
    return [0.0] * len(orders)
  out = []
  mu2 = sigma * math.sqrt(-log_q)
  mu1 = mu2 + 1.0
  eps1, eps2 = mu1 / var, mu2 / var
  applies = (mu2 > 1.0 and -log_q > eps2 and log_q <= (mu2 - 1.0) * eps2 - mu2 * (
      math.log1p(1.0 / (mu1 - 1.0)) + math.log1p(1.0 / (mu2 - 1.0))))
  if applies:
    log1mq = _log1mexp(log_q)
    log_a = log1mq - _log1mexp((log_q + eps2) * (1.0 - 1.0 / mu2))
    log_b = eps1 - log_q / (mu1 - 1.0)
  for lam in orders:
    data_independent = lam / var
    if applies and mu1 > lam:
      dependent = _logaddexp(log1mq + (lam - 1.0) * log_a, log_q + (lam - 1.0) * log_b)
      out.append(min(dependent / (lam - 1.0), data_independent))
    else:
      out.append(data_independent)
  return out


def loop_confident_rdp(counts, threshold, sigma_threshold, sigma, orders):
  """Expected Confident-GNMax cost of one query (2018, Section 4.1)."""
  top = int(np.argmax(counts))
  z = (counts[top] - threshold) / sigma_threshold
  log_pr = float(log_ndtr(z))
  log_q_thr = min(log_pr, float(log_ndtr(-z)))
  thr = loop_rdp_from_log_q(log_q_thr, math.sqrt(2.0) * sigma_threshold, orders)
  gn = loop_rdp_from_log_q(loop_log_q(counts, sigma), sigma, orders)
  pr = math.exp(log_pr)
  return [t + pr * g for t, g in zip(thr, gn)]


def loop_accounting(votes, gamma, sigma, threshold, sigma_threshold, orders,
                    max_moment: int = 8):
  """Summed LNMax log-moments ``[max_moment]`` and Confident-GNMax RDP ``[len(orders)]``
  of every row of ``votes``, one query at a time."""
  alpha = [0.0] * max_moment
  rdp = [0.0] * len(orders)
  for counts in votes.tolist():
    for i, a in enumerate(loop_lnmax_log_moments(counts, gamma, max_moment)):
      alpha[i] += a
    for k, r in enumerate(loop_confident_rdp(counts, threshold, sigma_threshold, sigma, orders)):
      rdp[k] += r
  return np.array(alpha), np.array(rdp)


# ------------------------------------------ smooth sensitivity (Papernot et al. 2018, App. B-C)


def loop_log_q(counts, sigma):
  """Union bound on ``log Pr[GNMax ≠ argmax]`` of one histogram (2018, Prop. 7)."""
  top = int(np.argmax(counts))
  terms = [log_ndtr(-(counts[top] - n) / (math.sqrt(2.0) * sigma))
           for j, n in enumerate(counts) if j != top]
  return min(float(_logsumexp(terms)), math.log1p(-1.0 / len(counts)))


def _theorem6(log_q, sigma, order):
  var = sigma * sigma
  mu2 = sigma * math.sqrt(-log_q)
  mu1 = mu2 + 1.0
  eps1, eps2 = mu1 / var, mu2 / var
  log1q = math.log1p(-math.exp(log_q))
  log_a = log1q - math.log1p(-math.exp((log_q + eps2) * (1.0 - 1.0 / mu2)))
  log_b = eps1 - log_q / (mu1 - 1.0)
  return float(np.logaddexp(log1q + (order - 1.0) * log_a,
                            log_q + (order - 1.0) * log_b)) / (order - 1.0)


def loop_log_q0(sigma, order):
  """Where Theorem 6 meets ``λ/σ²``: Brent's method on a bracket grown by 1.5."""
  f = lambda lq: _theorem6(lq, sigma, order) - order / sigma**2
  upper = min(-(1.0 + 1.0 / sigma)**2, -((order - 0.99) / sigma)**2, -1.0 / sigma**2)
  if f(upper) < 0:
    return upper
  lower = 2.0 * upper
  while f(lower) > 0:
    lower *= 1.5
  return scipy.optimize.brentq(f, lower, upper)


def _bl(log_q, sigma, num_classes):
  q = math.exp(log_q)
  return math.log((num_classes - 1) / 2 * scipy.special.erfc(
      1 / sigma + scipy.special.erfcinv(2 * q / (num_classes - 1))))


def _bu(log_q, sigma, num_classes):
  q = math.exp(log_q)
  return math.log(min(1.0, (num_classes - 1) / 2 * scipy.special.erfc(
      -1 / sigma + scipy.special.erfcinv(2 * q / (num_classes - 1)))))


def loop_gnmax_ls(counts, num_teachers, sigma, order):
  """``A(d)``, ``d = 0..T-1``, of one histogram: the walk one vote at a time."""
  c = len(counts)
  log_q0 = loop_log_q0(sigma, order)
  log_q1 = _bl(log_q0, sigma, c)
  rdp = lambda lq: _theorem6(lq, sigma, order) if lq < log_q0 else order / sigma**2

  def ls_at(lq):
    if log_q1 <= lq <= log_q0:
      lq = log_q1
    b = rdp(lq)
    return max(rdp(_bu(lq, sigma, c)) - b, b - rdp(_bl(lq, sigma, c)))

  out = np.full(num_teachers, ls_at(log_q1))
  state = sorted((int(x) for x in counts), reverse=True)
  lq = loop_log_q(state, sigma)
  out[0] = ls_at(lq)
  left, right = lq > log_q0, lq < log_q1
  d = 0
  while (left and lq > log_q0 and sum(state[1:]) > 0) or (right and lq < log_q1):
    d += 1
    step = 1 if left else -1
    state[0] += step
    state[1] -= step
    state[1:] = sorted(state[1:], reverse=True)
    lq = loop_log_q(state, sigma)
    out[d] = ls_at(lq)
  return out


def loop_threshold_ls(counts, num_teachers, threshold, sigma, order):
  """``A(d)`` of the threshold step of one histogram: the largest step ``ls(w)`` over every
  top count ``w`` that ``d`` changed teachers can reach, ``|w - top| <= d``."""
  def r(v_max):
    z = (v_max - threshold) / sigma
    log_q = min(float(log_ndtr(z)), float(log_ndtr(-z)))
    return loop_rdp_from_log_q(log_q, math.sqrt(2.0) * sigma, [order])[0]

  table = [r(v) for v in range(num_teachers + 1)]

  def ls_at(v):
    near = [abs(table[w] - table[v]) for w in (v - 1, v + 1) if 0 <= w <= num_teachers]
    return max(near)

  top = int(round(max(counts)))
  out = np.zeros(num_teachers)
  for d in range(num_teachers):
    valid = [w for w in range(top - d, top + d + 1) if 0 <= w <= num_teachers]
    if valid:
      out[d] = max(ls_at(w) for w in valid)
  return out


def loop_release(votes, num_teachers, threshold, sigma_threshold, sigma, order, delta):
  """The Confident-GNMax release at one order (expected cost), one query at a time."""
  unanimous = [num_teachers] + [0] * (votes.shape[1] - 1)
  ind_answer = order / sigma**2
  ind_thr = order / (2 * sigma_threshold**2)
  close = lambda a, b: abs(a - b) <= 1e-8 + 1e-5 * abs(b)
  data_ind_answer = close(loop_rdp_from_log_q(loop_log_q(unanimous, sigma), sigma,
                                              [order])[0], ind_answer)

  def thr_rdp(v_max):
    z = (v_max - threshold) / sigma_threshold
    log_q = min(float(log_ndtr(z)), float(log_ndtr(-z)))
    return loop_rdp_from_log_q(log_q, math.sqrt(2.0) * sigma_threshold, [order])[0]

  data_ind_thr = close(thr_rdp(0), ind_thr) and close(thr_rdp(num_teachers), ind_thr)
  rdp = 0.0
  ls = np.zeros(num_teachers)
  for counts in votes.tolist():
    top = round(max(counts))
    weight = math.exp(float(log_ndtr((top - threshold) / sigma_threshold)))
    rdp += ind_thr if data_ind_thr else thr_rdp(top)
    rdp += weight * (ind_answer if data_ind_answer else loop_rdp_from_log_q(
        loop_log_q(counts, sigma), sigma, [order])[0])
    if not data_ind_thr:
      ls += loop_threshold_ls(counts, num_teachers, threshold, sigma_threshold, order)
    if not data_ind_answer:
      ls += weight * loop_gnmax_ls(counts, num_teachers, sigma, order)
  epsilon_before = rdp + math.log(1 / delta) / (order - 1)
  if not ls.any():  # Nothing data-dependent: the exact ε is public, no noise.
    return {"cost": rdp, "beta": 0.0, "smooth_sensitivity": 0.0, "sigma_ss": math.inf,
            "rdp_release": 0.0, "rdp": rdp, "epsilon_before": epsilon_before,
            "epsilon": epsilon_before}
  best = None
  for beta in np.array(BETA_GRID) / order:
    ss = float(np.max(ls * np.exp(-beta * np.arange(num_teachers))))
    sigma_ss = (order * math.exp(2 * beta) / ss)**(1 / 3)
    gnss = (order * math.exp(2 * beta) / sigma_ss**2
            + (beta * order - 0.5 * math.log(1 - 2 * order * beta)) / (order - 1))
    cost = rdp + gnss + 2 * ss * sigma_ss
    if best is None or cost < best["cost"]:
      best = {"cost": cost, "beta": beta, "smooth_sensitivity": ss, "sigma_ss": sigma_ss,
              "rdp_release": gnss}
  best["rdp"] = rdp
  best["epsilon_before"] = epsilon_before
  best["epsilon"] = epsilon_before + best["rdp_release"]
  return best
