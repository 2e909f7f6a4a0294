"""Benchmark: smooth-sensitivity release of Confident-GNMax's ε, JAX vs a per-query loop.

Releases the data-dependent ε of ``config.num_queries`` synthetic vote histograms
(``num_teachers`` teachers, ``num_classes`` classes;
``pate_jax.accounting.reference.synthetic_votes``) answered by Confident-GNMax
(T, σ_T, σ of the 2018 paper's MNIST row) with
:func:`pate_jax.accounting.smooth_sensitivity_release`: per-query data-dependent RDP,
local sensitivities at every distance ``d = 0..T-1`` of both steps, their expected sum,
smooth sensitivity over the β grid, GNSS noise (Papernot et al. 2018, Sec. 4, Apps. B-C).

Timed after compilation (compilation reported separately): the release through the
public API on host votes, and the two local-sensitivity arrays ``[Q, T]`` alone. The
baseline is the same maths as a straightforward per-query, per-distance Python loop
(:func:`loop_release` below: ``math``/``scipy`` on scalars, the walk of Algorithms
4-5 one vote at a time, as tf-privacy's ``smooth_sensitivity_table.py`` does), timed
on the first ``config.loop_queries`` queries and extrapolated linearly; its release
on that subset is checked against the JAX one.

Usage:
  python experiments/bench_smooth_sensitivity.py \\
      --config configs/bench_smooth_sensitivity.py --workdir runs/bench_smooth_sensitivity
"""

from __future__ import annotations

import math
import os
import statistics
import time

from absl import logging
import jax
import numpy as np
import scipy.optimize
import scipy.special

from pate_jax import accounting as acc
from pate_jax import experiment
from pate_jax.accounting._smooth_sensitivity import BETA_GRID
from pate_jax.accounting.reference import loop_rdp_from_log_q, synthetic_votes

# ----------------------------------------------------------------------------- the loop baseline


def loop_log_q(counts, sigma):
  """Union bound on ``log Pr[GNMax ≠ argmax]`` of one histogram (2018, Prop. 7)."""
  top = int(np.argmax(counts))
  terms = [scipy.special.log_ndtr(-(counts[top] - n) / (math.sqrt(2.0) * sigma))
           for j, n in enumerate(counts) if j != top]
  return min(float(scipy.special.logsumexp(terms)), math.log1p(-1.0 / len(counts)))


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
  """``A(d)`` of the threshold step of one histogram (all reachable top counts)."""
  def r(v_max):
    z = (v_max - threshold) / sigma
    log_q = min(float(scipy.special.log_ndtr(z)), float(scipy.special.log_ndtr(-z)))
    return loop_rdp_from_log_q(log_q, math.sqrt(2.0) * sigma, [order])[0]

  table = [r(v) for v in range(num_teachers + 1)]

  def ls_at(v):
    near = [abs(table[w] - table[v]) for w in (v - 1, v + 1) if 0 <= w <= num_teachers]
    return max(near)

  top = int(round(max(counts)))
  out = np.zeros(num_teachers)
  for d in range(num_teachers):
    valid = [w for w in (top - d, top + d) if 0 <= w <= num_teachers]
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
    log_q = min(float(scipy.special.log_ndtr(z)), float(scipy.special.log_ndtr(-z)))
    return loop_rdp_from_log_q(log_q, math.sqrt(2.0) * sigma_threshold, [order])[0]

  data_ind_thr = close(thr_rdp(0), ind_thr) and close(thr_rdp(num_teachers), ind_thr)
  rdp = 0.0
  ls = np.zeros(num_teachers)
  for counts in votes.tolist():
    top = round(max(counts))
    weight = math.exp(float(scipy.special.log_ndtr((top - threshold) / sigma_threshold)))
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


# ----------------------------------------------------------------------------- benchmark


def run(config, workdir: str) -> dict:
  q, t, c = int(config.num_queries), int(config.num_teachers), int(config.num_classes)
  params = {k: float(config[k]) for k in ("threshold", "sigma_threshold", "sigma", "delta")}
  votes = synthetic_votes(config.seed, q, t, c)
  repeats = int(config.repeats)
  order = float(config.order)
  release = lambda: acc.smooth_sensitivity_release(votes, num_teachers=t, order=order,
                                                   **params)
  start = time.perf_counter()
  out = jax.block_until_ready(release())
  compile_and_first_run = time.perf_counter() - start
  runs, cpu_runs = experiment.timed(release, repeats)
  local = lambda: (acc.gnmax_local_sensitivity(votes, t, params["sigma"], order),
                   acc.threshold_local_sensitivity(votes, t, params["threshold"],
                                                   params["sigma_threshold"], order))
  jax.block_until_ready(local())
  ls_runs, _ = experiment.timed(local, repeats)

  n_loop = min(int(config.loop_queries), q)
  start, cpu_start = time.perf_counter(), time.process_time()
  loop = loop_release(votes[:n_loop], t, params["threshold"], params["sigma_threshold"],
                      params["sigma"], order, params["delta"])
  loop_time, loop_cpu = time.perf_counter() - start, time.process_time() - cpu_start
  subset = acc.smooth_sensitivity_release(votes[:n_loop], num_teachers=t, order=order,
                                          **params)
  rel = {k: abs(float(getattr(subset, k)) / loop[k] - 1.0)
         for k in ("rdp", "smooth_sensitivity", "sigma_ss", "epsilon", "beta")}

  jax_time, jax_cpu = statistics.median(runs), statistics.median(cpu_runs)
  loop_extrapolated = loop_time * q / n_loop
  results = {
      "num_queries": q, "num_teachers": t, "num_classes": c, "order": order,
      "release": {k: float(x) for k, x in out._asdict().items()},
      "jax_seconds_median": jax_time,
      "jax_seconds_all_runs": runs,
      "jax_cpu_seconds_median": jax_cpu,
      "jax_compile_and_first_run_seconds": compile_and_first_run,
      "local_sensitivities_seconds_median": statistics.median(ls_runs),
      "loop_queries_timed": n_loop,
      "loop_seconds_on_subset": loop_time,
      "loop_cpu_seconds_on_subset": loop_cpu,
      "loop_seconds_extrapolated": loop_extrapolated,
      "loop_extrapolation": f"linear: loop time on the first {n_loop} queries x {q / n_loop:g}",
      "speedup_vs_loop": loop_extrapolated / jax_time,
      "loop_vs_jax_relative_difference_on_subset": rel,
      "goal_jax_seconds_at_most_5": jax_time <= 5.0,
      "jax_backend": jax.default_backend(),
      "load_average_1_5_15min_at_end": list(os.getloadavg()),
      "cpu_count": os.cpu_count(),
  }
  record = {**config.to_dict(), "loop_queries": n_loop}
  path = experiment.write_results(workdir, results, config=record, seed=config.seed)
  logging.info("bench_smooth_sensitivity: wrote %s", path)
  return results


def report(r: dict) -> None:
  rel = r["release"]
  print(f"release of {r['num_queries']} queries x {r['num_teachers']} teachers x "
        f"{r['num_classes']} classes at order {r['order']:g}: JAX "
        f"{r['jax_seconds_median']:.3f} s (median of {len(r['jax_seconds_all_runs'])}, CPU "
        f"{r['jax_cpu_seconds_median']:.3f} s), compile+first run "
        f"{r['jax_compile_and_first_run_seconds']:.1f} s; local sensitivities alone "
        f"{r['local_sensitivities_seconds_median']:.3f} s")
  print(f"Python loop: {r['loop_seconds_on_subset']:.1f} s for {r['loop_queries_timed']} "
        f"queries -> {r['loop_seconds_extrapolated']:.0f} s extrapolated; speedup "
        f"{r['speedup_vs_loop']:.0f}x; max rel diff on the subset "
        f"{max(r['loop_vs_jax_relative_difference_on_subset'].values()):.1e}; load average "
        f"{r['load_average_1_5_15min_at_end'][0]:.1f} on {r['cpu_count']} cores")
  print(f"eps before {rel['epsilon_before']:.3f} -> with the release {rel['epsilon']:.3f} "
        f"+/- {rel['noise_std']:.3f} (beta {rel['beta']:.4f}, SS {rel['smooth_sensitivity']:.4g}, "
        f"sigma_ss {rel['sigma_ss']:.3f})")


if __name__ == "__main__":
  experiment.run_main(run, report=report)
