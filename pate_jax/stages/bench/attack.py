"""The attack benchmark: speed and quadrature accuracy of the histogram-extraction attack.

``run(config, workdir)`` measures, after one warm-up (compiling) call with another key:
  * ``single``: one histogram end to end -- 10^4 GNMax queries
    (:func:`pate_jax.attacks.sample_answers`) + the paper's reconstruction
    (:func:`pate_jax.attacks.reconstruct_details`), through the public,
    validating API, ``repeats`` times with fresh keys;
  * ``sweep``: the 30 Table-1 histograms × 4 σ (120 attacks) in one call per
    stage, for each reconstruction method;
  * ``q_eval``: one trapezoid Q(H) and one accurate Q(H);
  * ``quadrature``: max |Q_trapezoid - Q_accurate| and max |Σ Q_trapezoid - 1| in
    float64 over Table 1 × ``quadrature_sigmas`` for several node counts;
  * ``gradients``: the autodiff Jacobian ∂Q/∂H of the trapezoid rule (what the
    MLE's Newton steps and the Fisher information use) against central finite
    differences of the accurate quadrature, and the Fisher information
    ``Jᵀ diag(1/Q) J`` from both, float64, Table 1 × ``gradient_sigmas``;
  * ``single_mle`` (with ``single_methods``): one histogram end to end with the
    maximum-likelihood reconstruction, on the config's fresh Dirichlet histograms.
Wall-clock and process CPU seconds are both recorded, with the 1/5/15-minute
load averages before and after (the 2 cores are shared), into ``results.json``
(no private data: the histograms are Table 1's and fresh Dirichlet draws). The
baselines timed here (one histogram at a time through the public, validating API) live
in this module, not in the library.
"""

from __future__ import annotations

import os
import time

import jax
import numpy as np

from pate_jax import attacks, experiment, rng

__all__ = ["run", "plan", "bench_single", "bench_sweep", "bench_q", "quadrature",
           "gradients"]


_METHOD_KWARGS = {"paper": {}, "projected": {"project": True}, "optax": {"method": "optax"},
                  "mle": {"method": "mle"}}


def _timed(fn):
  w0, c0 = time.perf_counter(), time.process_time()
  out = jax.block_until_ready(fn())
  return out, time.perf_counter() - w0, time.process_time() - c0


def _attack(key, hists, sigma, m, kwargs):
  q_bar = attacks.sample_answers(key, hists, sigma, m)
  return attacks.reconstruct_details(q_bar, sigma, attacks.TABLE1_NUM_TEACHERS, **kwargs)


def bench_single(config, key, truth, method="paper", hist=None):
  h = attacks.table1_histogram(config.single_histogram) if hist is None else hist
  s, m = config.single_sigma, config.num_queries
  kw = _METHOD_KWARGS[method]
  _, first, _ = _timed(lambda: _attack(jax.random.fold_in(key, 10_000), h, s, m, kw))
  walls, cpus, errors, steps = [], [], [], []
  for r in experiment.progress(range(config.repeats), desc=f"single {method}"):
    rec, wall, cpu = _timed(lambda r=r: _attack(jax.random.fold_in(key, r), h, s, m, kw))
    walls.append(wall)
    cpus.append(cpu)
    errors.append(float(attacks.normalized_l1_error(h, rec.histogram)))
    steps.append(int(rec.num_steps))
  # Stage split (one more run).
  q_bar, t_mc, _ = _timed(lambda: attacks.sample_answers(jax.random.fold_in(key, 99), h, s, m))
  _, t_rec, _ = _timed(lambda: attacks.reconstruct_details(q_bar, s, 250, **kw))
  return {"histogram": np.asarray(h).tolist(), "method": method, "sigma": s, "num_queries": m,
          "first_call_seconds": first, "wall_seconds": walls, "cpu_seconds": cpus,
          "median_wall_seconds": float(np.median(walls)),
          "median_cpu_seconds": float(np.median(cpus)),
          "monte_carlo_seconds": t_mc, "reconstruction_seconds": t_rec,
          "errors": errors, "steps": steps}


def bench_sweep(config, key, hists, method):
  sig = np.asarray(config.sigmas)[:, None]
  kwargs = _METHOD_KWARGS[method]
  m = config.num_queries
  _, first, _ = _timed(lambda: _attack(jax.random.fold_in(key, 10_000), hists[None], sig, m,
                                       kwargs))
  walls, cpus, mean_errors = [], [], []
  for r in range(config.sweep_repeats):
    rec, wall, cpu = _timed(lambda r=r: _attack(jax.random.fold_in(key, r), hists[None], sig, m,
                                                kwargs))
    walls.append(wall)
    cpus.append(cpu)
    mean_errors.append(float(np.mean(attacks.normalized_l1_error(hists[None], rec.histogram))))
  n = hists.shape[0] * sig.shape[0]
  return {"num_attacks": n, "first_call_seconds": first, "wall_seconds": walls,
          "cpu_seconds": cpus, "median_wall_seconds": float(np.median(walls)),
          "wall_seconds_per_histogram": float(np.median(walls)) / n,
          "max_steps": int(np.max(rec.num_steps)), "mean_errors": mean_errors}


def bench_q(config, hists):
  h, s = attacks.table1_histogram(config.single_histogram), config.single_sigma
  out = {}
  for method in ("trapezoid", "accurate"):
    _timed(lambda method=method: attacks.output_distribution(h, s, method))
    times = [_timed(lambda method=method: attacks.output_distribution(h, s, method))[1]
             for _ in range(20)]
    out[method] = {"median_seconds": float(np.median(times))}
  return out


def quadrature(config, hists):
  sig = np.asarray(config.quadrature_sigmas)[:, None]
  rows = []
  with jax.enable_x64(True):
    for noise, points in (("gaussian", config.quadrature_points),
                          ("laplace", config.quadrature_points_laplace)):
      q_acc = np.asarray(attacks.output_distribution(hists[None], sig, "accurate", noise))
      for n in points:
        q_t = np.asarray(attacks.output_distribution(np.asarray(hists, np.float64)[None], sig,
                                                     "trapezoid", noise, num_points=n))
        rows.append({"noise": noise, "num_points": int(n),
                     "max_abs_error": float(np.abs(q_t - q_acc).max()),
                     "max_sum_error": float(np.abs(q_t.sum(-1) - 1).max()),
                     "accurate_max_sum_error": float(np.abs(q_acc.sum(-1) - 1).max())})
        print(f"{noise:8s} {n:5d} nodes: max|Q_t - Q_acc| = {rows[-1]['max_abs_error']:.2e}, "
              f"max|ΣQ_t - 1| = {rows[-1]['max_sum_error']:.2e}")
  return rows


def gradients(config, hists):
  """Autodiff ∂Q/∂H of the trapezoid rule vs central differences of the accurate Q."""
  from pate_jax.attacks import _output_distribution as od  # pylint: disable=g-import-not-at-top
  rows = []
  with jax.enable_x64(True):
    h = np.asarray(hists, np.float64)
    for s in config.gradient_sigmas:
      jac = np.asarray(jax.jit(jax.vmap(jax.jacfwd(lambda x, s=s: od.trapezoid_single(x, s))))(
          h))
      acc = jax.jit(jax.vmap(lambda x, s=s: od.accurate_single(x, s)))
      eps = config.gradient_step * s
      cols = []
      for i in range(h.shape[1]):
        e = np.zeros(h.shape[1])
        e[i] = eps
        cols.append((np.asarray(acc(h + e)) - np.asarray(acc(h - e))) / (2 * eps))
      fd = np.stack(cols, -1)                                                  # [B, C, C]
      err = np.abs(jac - fd).max((1, 2))
      scale = np.abs(fd).max((1, 2))
      q = np.asarray(acc(h))
      f_fd = np.einsum("bkc,bk,bkd->bcd", fd, 1.0 / np.maximum(q, 1e-300), fd)
      f_ad = np.asarray(attacks.fisher_information(h, s))
      informative = scale > 1e-6       # rows whose Jacobian is not all ~0 (σ ≪ gaps)
      f_norm = np.linalg.norm(f_fd, axis=(1, 2))
      f_err = np.linalg.norm(f_ad - f_fd, axis=(1, 2)) / np.where(informative, f_norm, 1.0)
      rel = err / np.where(informative, scale, 1.0)
      rows.append({
          "sigma": float(s), "max_abs_jacobian_error": float(err.max()),
          "max_abs_jacobian": float(scale.max()),
          "max_relative_jacobian_error": float(rel[informative].max())
          if informative.any() else None,
          "num_informative_histograms": int(informative.sum()),
          "fisher_relative_error_max": float(f_err[informative].max())
          if informative.any() else None,
          "fisher_relative_error_median": float(np.median(f_err[informative]))
          if informative.any() else None})
      r = rows[-1]
      print(f"σ={s:g}: max|J_AD - J_FD| = {r['max_abs_jacobian_error']:.1e} (max|J| "
            f"{r['max_abs_jacobian']:.1e}); relative per histogram ≤ "
            f"{r['max_relative_jacobian_error']}; Fisher relative error max "
            f"{r['fisher_relative_error_max']}, median {r['fisher_relative_error_median']}")
  return rows


def plan(config) -> dict:
  """``--dry_run``: the histograms, σ grid, queries per attack, methods and repeats, and
  the size of the sweep's sampled answers."""
  hists, _ = attacks.table1_histograms()
  n, m = int(hists.shape[0]), int(config.num_queries)
  return {"histograms": n, "num_classes": int(hists.shape[-1]),
          "sigmas": tuple(config.sigmas), "num_queries": m, "methods": tuple(config.methods),
          "single_methods": tuple(config.get("single_methods") or ()),
          "repeats": int(config.repeats), "sweep_repeats": int(config.sweep_repeats),
          "sweep_attacks": n * len(config.sigmas),
          "sweep_noisy_answers_per_repeat": n * len(config.sigmas) * m}


def run(config, workdir: str) -> dict:
  """Every measurement of the module docstring, printed as it is taken, into
  ``results.json``."""
  key = rng.stream(rng.root_key(config.seed), "attack_answers")
  hists, names = attacks.table1_histograms()
  results = {"load_average_before": os.getloadavg(), "cpu_count": os.cpu_count()}
  results["single"] = bench_single(config, jax.random.fold_in(key, 0), hists)
  s = results["single"]
  print(f"single histogram end to end: median {s['median_wall_seconds']:.3f} s wall "
        f"({s['median_cpu_seconds']:.3f} s CPU); first call {s['first_call_seconds']:.1f} s")
  results["sweep"] = {}
  for method in experiment.progress(config.methods, desc="sweep"):
    r = bench_sweep(config, jax.random.fold_in(key, 1), hists, method)
    results["sweep"][method] = r
    print(f"sweep 30x{len(config.sigmas)} [{method}]: median {r['median_wall_seconds']:.2f} s "
          f"wall ({r['wall_seconds_per_histogram'] * 1e3:.1f} ms/histogram); first call "
          f"{r['first_call_seconds']:.1f} s; mean error {np.mean(r['mean_errors']):.4f}")
  if config.get("single_methods"):
    fresh, _ = attacks.dirichlet_histograms(
        rng.stream(rng.root_key(config.seed), "attack_sample"), config.fresh_alphas, 1)
    results["single_fresh"] = {}
    for method in config.single_methods:
      out = [bench_single(config, jax.random.fold_in(key, 2), hists, method, h) for h in fresh]
      results["single_fresh"][method] = out
      print(f"single fresh histogram end to end [{method}] (α = {config.fresh_alphas}): "
            "median " + ", ".join(f"{o['median_wall_seconds']:.3f}" for o in out) + " s wall; "
            "first call " + ", ".join(f"{o['first_call_seconds']:.1f}" for o in out) + " s")
  results["q_eval"] = bench_q(config, hists)
  print("Q(H) one histogram:", {k: f"{v['median_seconds'] * 1e3:.2f} ms"
                                for k, v in results["q_eval"].items()})
  results["quadrature"] = quadrature(config, hists)
  if config.get("gradient_sigmas"):
    results["gradients"] = gradients(config, hists)
  results["load_average_after"] = os.getloadavg()
  print("load average before/after:", results["load_average_before"],
        results["load_average_after"])
  experiment.write_results(workdir, results, config=config, seed=config.seed,
                           disclosure=experiment.NO_PRIVATE_DATA)
  return results

