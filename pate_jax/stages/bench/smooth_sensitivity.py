"""The smooth-sensitivity benchmark: the release of Confident-GNMax's ε, JAX vs a per-query
loop (``experiments/bench_smooth_sensitivity.py``).

Releases the data-dependent ε of ``config.num_queries`` synthetic vote histograms
(``num_teachers`` teachers, ``num_classes`` classes;
``pate_jax.stages.bench.reference_loops.synthetic_votes``) answered by Confident-GNMax
(T, σ_T, σ of the 2018 paper's MNIST row) with
:func:`pate_jax.accounting.smooth_sensitivity_release`: per-query data-dependent RDP,
local sensitivities at every distance ``d = 0..T-1`` of both steps, their expected sum,
smooth sensitivity over the β grid, GNSS noise (Papernot et al. 2018, Sec. 4, Apps. B-C).

Timed after compilation (compilation reported separately): the release through the
public API on host votes, and the two local-sensitivity arrays ``[Q, T]`` alone. The
baseline is the same maths as a straightforward per-query, per-distance Python loop
(:func:`pate_jax.stages.bench.reference_loops.loop_release`: ``math``/``scipy`` on scalars, the
walk of Algorithms 4-5 one vote at a time, as tf-privacy's ``smooth_sensitivity_table.py`` does), timed
on the first ``config.loop_queries`` queries and extrapolated linearly; its release
on that subset is checked against the JAX one.

``run(config, workdir)`` writes ``results.json`` (synthetic data only: publishable);
``plan(config)`` is ``--dry_run``; both refuse a bad setting naming its field first
(:func:`check_config`); ``report(results)`` prints the headline.
"""

from __future__ import annotations

import os
import statistics
import time

from absl import logging
import jax

from pate_jax import _checks as checks
from pate_jax import accounting as acc
from pate_jax import experiment, rng
from pate_jax.stages.bench.reference_loops import loop_release, synthetic_votes

__all__ = ["run", "plan", "report", "check_config", "relative_difference"]


def relative_difference(value: float, reference: float) -> float:
  """``|value / reference - 1|``; 0 where the two are equal (a release whose smooth
  sensitivity and β are 0, or whose σ_SS is inf, as at a threshold of 0 or an order near 1,
  divided by zero), ``|value|`` where only the reference is 0."""
  if value == reference:
    return 0.0
  return abs(value / reference - 1.0) if reference else abs(value)


def check_config(config) -> None:
  """Refuses, naming the field, what the benchmark cannot run, before any histogram is drawn
  (a seed of 'x' failed in numpy's SeedSequence, a count of 0 or a negative threshold in
  the loop baseline, after the timed release; a bad order, noise or delta was refused by
  the release naming its own argument, and not by the dry run)."""
  rng.check_seed(config.seed, "config.seed")
  for name in ("num_queries", "num_teachers", "loop_queries", "repeats"):
    checks.positive_int(config[name], f"config.{name}")
  checks.positive_int(config.num_classes, "config.num_classes", minimum=2)
  if not checks.scalar(config.threshold, "config.threshold") >= 0:
    raise ValueError(f"config.threshold must be >= 0 (votes); got {config.threshold!r}")
  for name in ("sigma_threshold", "sigma"):
    checks.positive(config[name], f"config.{name}")
  checks.delta(config.delta, "config.delta")
  order = checks.scalar(config.order, "config.order")
  if not 1 < order < float("inf"):
    raise ValueError(f"config.order must be a finite real number > 1; got {config.order!r}")
  acc.check_release_order(float(config.sigma), int(config.num_classes), float(order),
                          "config.order")


def run(config, workdir: str) -> dict:
  """Times the release, the local sensitivities and the loop baseline; writes results.json."""
  check_config(config)
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
  rel = {k: relative_difference(float(getattr(subset, k)), loop[k])
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
  path = experiment.write_results(workdir, results, config=record, seed=config.seed,
                                  disclosure=experiment.NO_PRIVATE_DATA)
  logging.info("bench_smooth_sensitivity: wrote %s", path)
  return results


def plan(config) -> dict:
  """``--dry_run``: the synthetic histograms' sizes, the repeats, and the temporary memory
  of the compiled release (XLA's memory analysis on abstract votes)."""
  check_config(config)
  q, t, c = int(config.num_queries), int(config.num_teachers), int(config.num_classes)
  params = {k: float(config[k]) for k in ("threshold", "sigma_threshold", "sigma", "delta")}
  out = {"num_queries": q, "num_teachers": t, "num_classes": c, "order": float(config.order),
         "repeats": int(config.repeats), "loop_queries": min(int(config.loop_queries), q),
         "votes_bytes": q * c * synthetic_votes(config.seed, 1, t, c).dtype.itemsize}
  with jax.enable_x64(True):  # the release computes in float64 (like run's call)
    out["release_temp_bytes"] = experiment.compiled_temp_bytes(
        lambda v: acc.smooth_sensitivity_release(v, num_teachers=t, order=float(config.order),
                                                 **params),
        jax.ShapeDtypeStruct((q, c), jax.numpy.float64))
  return out


def report(r: dict) -> None:
  """Prints the timings, the speedup over the loop and the released ε."""
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

