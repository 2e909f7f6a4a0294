"""Benchmark: data-dependent PATE accounting for 10^6 queries, JAX vs a per-query loop.

Accounts for ``--num_queries`` synthetic vote histograms (``--num_teachers`` teachers,
``--num_classes`` classes) with

* LNMax under the 2017 moments accountant (data-dependent, moments 1..8), and
* Confident-GNMax under the 2018 data-dependent RDP analysis (expected cost of the
  threshold check plus Pr[answered] × the GNMax cost, at ``DEFAULT_ORDERS``),

each composed over all queries and converted to (ε, δ). The JAX path is one jitted
call on device-resident float64 votes; it is timed after compilation (compile time
reported separately). The same accounting is also timed end to end through the
validating public functions (``lnmax_moments_epsilon``, ``confident_gnmax_rdp`` composed
with an ``rdp_accountant``), once on the device-resident votes and once on the
host numpy int32 votes (host-to-device copy included), and reported as ratios to the
compiled kernel. The baseline is a per-query pure Python loop
(``pate_jax.accounting.reference``: ``math`` + ``scipy.special.log_ndtr`` on scalars)
implementing the same formulas;
it is timed on the first ``--loop_queries`` queries and the time is extrapolated
linearly to all queries (stated in the results). The loop's totals on that subset are
checked against the JAX path on the same subset.

Usage:
  python -m experiments.bench_accounting --workdir /tmp/bench_accounting
"""

from __future__ import annotations

import os
import statistics
import time

import jax
import jax.numpy as jnp
import numpy as np
from absl import app, flags
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from pate_jax import accounting as acc
from pate_jax.accounting.reference import loop_accounting, synthetic_votes
from pate_jax.experiment import write_results

_WORKDIR = flags.DEFINE_string("workdir", None, "Directory for results.json.", required=True)
_NUM_QUERIES = flags.DEFINE_integer("num_queries", 10**6, "Number of synthetic queries.")
_NUM_TEACHERS = flags.DEFINE_integer("num_teachers", 250, "Teachers per histogram.")
_NUM_CLASSES = flags.DEFINE_integer("num_classes", 10, "Classes.")
_LOOP_QUERIES = flags.DEFINE_integer("loop_queries", 20000,
                                     "Queries timed in the Python loop (then extrapolated).")
_REPEATS = flags.DEFINE_integer("repeats", 5, "Timed repetitions of the compiled JAX call.")
_SEED = flags.DEFINE_integer("seed", 0, "Seed of the synthetic histograms.")
_DEVICES = flags.DEFINE_integer(
    "devices", 1, "CPU devices to shard the query axis over (jax_num_cpu_devices; XLA runs "
    "one device's program on one thread, so 2 uses both cores of a 2-core machine).")
_GAMMA = flags.DEFINE_float("gamma", 0.05, "LNMax inverse Laplace scale (2017 MNIST: 0.05).")
_SIGMA = flags.DEFINE_float("sigma", 40.0, "GNMax noise σ (2018 MNIST: 40).")
_THRESHOLD = flags.DEFINE_float("threshold", 200.0, "Confident-GNMax threshold T (2018: 200).")
_SIGMA_THRESHOLD = flags.DEFINE_float("sigma_threshold", 150.0, "Threshold noise σ_T (2018: 150).")
_DELTA = flags.DEFINE_float("delta", 1e-5, "Target δ.")
_MAX_MOMENT = 8


# ----------------------------------------------------------------------------- JAX path


def make_jax_accounting(gamma, sigma, threshold, sigma_threshold, delta, orders):
  """The accounting as one jitted call (under ``jit`` the public functions skip
  validation and run their cores)."""
  orders = jnp.asarray(orders)

  @jax.jit
  def account(votes):
    eps_ln, moment = acc.lnmax_moments_epsilon(votes, gamma, delta, max_moment=_MAX_MOMENT)
    costs = acc.confident_gnmax_rdp(votes, threshold, sigma_threshold, sigma, orders)
    composed = acc.rdp_accountant(orders).compose(costs)
    eps_conf, order = composed.epsilon(delta)
    return eps_ln, moment, eps_conf, order, composed.cost

  return account


def public_api_accounting(votes, gamma, sigma, threshold, sigma_threshold, delta, orders):
  """The same through the validating public functions (host or device votes)."""
  eps_ln, moment = acc.lnmax_moments_epsilon(votes, gamma, delta, max_moment=_MAX_MOMENT)
  costs = acc.confident_gnmax_rdp(votes, threshold, sigma_threshold, sigma, orders)
  eps_conf, order = acc.rdp_accountant(orders).compose(costs).epsilon(delta)
  return eps_ln, moment, eps_conf, order


# ----------------------------------------------------------------------------- main


def main(argv):
  del argv
  q, t, c = _NUM_QUERIES.value, _NUM_TEACHERS.value, _NUM_CLASSES.value
  params = dict(gamma=_GAMMA.value, sigma=_SIGMA.value, threshold=_THRESHOLD.value,
                sigma_threshold=_SIGMA_THRESHOLD.value, delta=_DELTA.value)
  orders = np.asarray(acc.DEFAULT_ORDERS, np.float64)
  votes = synthetic_votes(_SEED.value, q, t, c)
  devices = _DEVICES.value
  if devices > 1:
    if q % devices:
      raise ValueError(f"num_queries={q} must be divisible by devices={devices}")
    jax.config.update("jax_num_cpu_devices", devices)  # before the backend starts

  with jax.enable_x64(True):
    account = make_jax_accounting(params["gamma"], params["sigma"], params["threshold"],
                                  params["sigma_threshold"], params["delta"], orders)
    votes_dev = jnp.asarray(votes, jnp.float64)
    if devices > 1:  # shard the query axis; the sums over queries become all-reduces
      mesh = Mesh(np.array(jax.devices()[:devices]), ("queries",))
      votes_dev = jax.device_put(votes_dev, NamedSharding(mesh, PartitionSpec("queries", None)))
    votes_dev = jax.block_until_ready(votes_dev)
    start = time.perf_counter()
    out = jax.block_until_ready(account(votes_dev))
    compile_and_first_run = time.perf_counter() - start
    runs, cpu_runs = [], []
    for _ in range(_REPEATS.value):
      start, cpu_start = time.perf_counter(), time.process_time()
      out = jax.block_until_ready(account(votes_dev))
      runs.append(time.perf_counter() - start)
      cpu_runs.append(time.process_time() - cpu_start)
    eps_ln, moment, eps_conf, order, _ = (np.asarray(x) for x in out)

  # End to end through the validating public API, on the device-resident votes and on the
  # host numpy votes: one warm-up call each (compilation), then the median of the repeats.
  public_runs = {}
  for where, data in (("device", votes_dev), ("host", votes)):
    jax.block_until_ready(public_api_accounting(data, orders=orders, **params))
    public_runs[where] = []
    for _ in range(_REPEATS.value):
      start = time.perf_counter()
      jax.block_until_ready(public_api_accounting(data, orders=orders, **params))
      public_runs[where].append(time.perf_counter() - start)
  public_device = statistics.median(public_runs["device"])
  public_host = statistics.median(public_runs["host"])

  # Python loop on a subset, extrapolated.
  n_loop = min(_LOOP_QUERIES.value, q)
  subset = votes[:n_loop]
  start, cpu_start = time.perf_counter(), time.process_time()
  alpha_loop, rdp_loop = loop_accounting(subset, params["gamma"], params["sigma"],
                                         params["threshold"], params["sigma_threshold"], orders,
                                         max_moment=_MAX_MOMENT)
  loop_time = time.perf_counter() - start
  loop_cpu = time.process_time() - cpu_start
  loop_extrapolated = loop_time * q / n_loop
  # Agreement of the loop and JAX on the subset.
  moments = acc.moments_accountant(_MAX_MOMENT)
  alpha_jax = np.asarray(moments.compose(acc.lnmax_log_moments(
      subset, params["gamma"], moments.orders)).cost)
  rdp_jax = np.asarray(acc.rdp_accountant(orders).compose(acc.confident_gnmax_rdp(
      subset, params["threshold"], params["sigma_threshold"], params["sigma"], orders)).cost)
  max_rel_diff = float(max(np.max(np.abs(alpha_loop / alpha_jax - 1)),
                           np.max(np.abs(rdp_loop / rdp_jax - 1))))

  jax_time = statistics.median(runs)
  jax_cpu = statistics.median(cpu_runs)
  loop_cpu_extrapolated = loop_cpu * q / n_loop
  public_goal = 2.0 if jax.default_backend() == "cpu" else 10.0
  results = {
      "num_queries": q, "num_teachers": t, "num_classes": c, "num_orders": int(orders.size),
      "max_moment": _MAX_MOMENT,
      "lnmax_2017": {"epsilon": float(eps_ln), "best_moment": int(moment),
                     "delta": params["delta"], "gamma": params["gamma"]},
      "confident_gnmax_2018": {"epsilon": float(eps_conf), "best_order": float(order),
                               "delta": params["delta"], "sigma": params["sigma"],
                               "threshold": params["threshold"],
                               "sigma_threshold": params["sigma_threshold"]},
      "jax_devices": devices,
      "jax_seconds_median": jax_time,
      "jax_seconds_all_runs": runs,
      "jax_compile_and_first_run_seconds": compile_and_first_run,
      "public_api_end_to_end_seconds_device_votes": public_device,
      "public_api_end_to_end_seconds_host_votes": public_host,
      "public_api_end_to_end_all_runs": public_runs,
      "public_api_over_kernel_device_votes": public_device / jax_time,
      "public_api_over_kernel_host_votes": public_host / jax_time,
      "jax_backend": jax.default_backend(),
      "loop_queries_timed": n_loop,
      "loop_seconds_on_subset": loop_time,
      "loop_seconds_extrapolated": loop_extrapolated,
      "loop_extrapolation": f"linear: loop time on the first {n_loop} queries x {q / n_loop:g}",
      "speedup_vs_loop": loop_extrapolated / jax_time,
      "jax_cpu_seconds_median": jax_cpu,
      "loop_cpu_seconds_extrapolated": loop_cpu_extrapolated,
      "speedup_vs_loop_cpu_time": loop_cpu_extrapolated / jax_cpu,
      "load_average_1_5_15min_at_end": list(os.getloadavg()),
      "cpu_count": os.cpu_count(),
      "loop_vs_jax_max_relative_difference_on_subset": max_rel_diff,
      "goal_jax_seconds_at_most_2": jax_time <= 2.0,
      "goal_speedup_at_least_100": loop_extrapolated / jax_time >= 100.0,
      # Public API end to end within 2x the kernel on CPU, 10x on an accelerator.
      "goal_public_api_over_kernel_at_most": public_goal,
      "goal_public_api_met": max(public_device, public_host) / jax_time <= public_goal,
  }
  config = {"num_queries": q, "num_teachers": t, "num_classes": c, "loop_queries": n_loop,
            "devices": devices,
            "repeats": _REPEATS.value, "orders": orders.tolist(), **params}
  path = write_results(_WORKDIR.value, results, config=config, seed=_SEED.value)
  print(f"JAX on {jax.default_backend()} (compiled, median of {len(runs)}): {jax_time:.4f} s; "
        f"compile+first run {compile_and_first_run:.2f} s")
  print(f"public API end to end (median of {_REPEATS.value}): device votes {public_device:.4f} s "
        f"({public_device / jax_time:.2f}x the kernel), host numpy votes {public_host:.4f} s "
        f"({public_host / jax_time:.2f}x)")
  print(f"Python loop: {loop_time:.2f} s for {n_loop} queries -> {loop_extrapolated:.0f} s "
        f"extrapolated to {q}; speedup {loop_extrapolated / jax_time:.0f}x "
        f"(CPU time: JAX {jax_cpu:.3f} s, loop {loop_cpu_extrapolated:.0f} s, "
        f"{loop_cpu_extrapolated / jax_cpu:.0f}x); max rel diff on subset {max_rel_diff:.2e}; "
        f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
  print(f"eps LNMax (2017) = {float(eps_ln):.4f} (moment {int(moment)}); "
        f"eps Confident-GNMax (2018) = {float(eps_conf):.4f} (order {float(order):g}); "
        f"delta = {params['delta']:g}")
  print(f"wrote {path}")


if __name__ == "__main__":
  app.run(main)
