"""A per-query scalar reference of the accountants (``math`` + SciPy, Python loops).

The same formulas as the vectorised cores — the 2017 LNMax moments (Papernot et al.
2017, Theorems 1-3, Lemma 4) and the 2018 Confident-GNMax data-dependent RDP
(Papernot et al. 2018, Theorem 6, Proposition 10, Section 4.1) — written one query
and one order at a time, the way the original PATE scripts compute them. It is the
baseline of ``experiments/bench_accounting.py`` and an independent cross-check of
the JAX path; it is not used by the library itself.
"""

from __future__ import annotations

import math

import numpy as np
from scipy.special import log_ndtr


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
  terms = [float(log_ndtr(-(counts[top] - n) / (math.sqrt(2.0) * sigma)))
           for j, n in enumerate(counts) if j != top]
  log_q = min(_logsumexp(terms), math.log1p(-1.0 / len(counts)))
  gn = loop_rdp_from_log_q(log_q, sigma, orders)
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
