"""The accounting benchmark: data-dependent PATE accounting for 10^6 queries, JAX vs a
per-query loop (``experiments/bench_accounting.py``).

Accounts for ``config.num_queries`` synthetic vote histograms (``num_teachers`` teachers,
``num_classes`` classes) with

* LNMax under the 2017 moments accountant (data-dependent, moments 1..8), and
* Confident-GNMax under the 2018 data-dependent RDP analysis (expected cost of the
  threshold check plus Pr[answered] × the GNMax cost, at ``DEFAULT_ORDERS``),

each composed over all queries and converted to (ε, δ). The JAX path is one jitted call
on device-resident float64 votes, timed after compilation (compile time reported
separately). The same accounting is also timed end to end through the validating public
functions (``lnmax_moments_epsilon``, ``confident_gnmax_rdp`` composed with an
``rdp_accountant``), on the device-resident votes and on the host numpy int32 votes
(host-to-device copy included), as ratios to the compiled kernel. Where the host path's
extra time goes is measured beside it: one ``jax.device_put`` of the host votes (blocked
until it has arrived) and one numpy copy of them, and the host path's ratio again less
the transfers (and the host copies) that the public functions make
(``pate_jax._checks._votes.host_votes_traffic``: each of the two validates the votes it is
given, so host votes cross to the device at least once per function). The baseline is a
per-query pure Python loop of the same formulas (``pate_jax.stages.bench.reference_loops``:
``math`` + ``scipy.special.log_ndtr`` on scalars), timed on the first
``config.loop_queries`` queries and extrapolated linearly to all (stated in the
results); its totals on that subset are checked against the JAX path.

``run(config, workdir)`` writes ``results.json`` (synthetic data only: publishable);
``plan(config)`` is ``--dry_run``; ``report(results)`` prints the headline.
"""

from __future__ import annotations

import os
import statistics
import time

from absl import logging
import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from pate_jax import _checks, experiment, rng
from pate_jax import accounting as acc
from pate_jax._checks import _votes as votes_checks
from pate_jax.stages.bench.reference_loops import loop_accounting, synthetic_votes

__all__ = ["run", "plan", "report", "check_config", "make_jax_accounting",
           "public_api_accounting"]

_MAX_MOMENT = 8
_NOISE = ("gamma", "sigma", "threshold", "sigma_threshold")  # config fields, in this order
_PUBLIC_CALLS = 2  # public functions in public_api_accounting that take the votes


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


def check_config(config, prefix: str = "config.") -> None:
  """Refuses, naming the field, what the benchmark cannot run, before anything is drawn or
  compiled: ``seed``; the integers ``num_queries``, ``num_teachers``, ``loop_queries``,
  ``repeats``, ``devices`` (>= 1) and ``num_classes`` (>= 2), ``num_queries`` a multiple of
  ``devices`` (the query axis is sharded over them); the noise ``gamma``, ``sigma``,
  ``threshold``, ``sigma_threshold`` (finite, > 0) and ``delta`` (in (0, 1)). ``prefix``:
  how the fields are named (``config.bench_accounting.`` in the GPU acceptance)."""
  rng.check_seed(config.seed, f"{prefix}seed")
  for name in ("num_queries", "num_teachers", "loop_queries", "repeats", "devices"):
    _checks.positive_int(config[name], f"{prefix}{name}")
  _checks.positive_int(config.num_classes, f"{prefix}num_classes", minimum=2)
  q, devices = int(config.num_queries), int(config.devices)
  if q % devices:
    raise ValueError(f"{prefix}num_queries must be divisible by {prefix}devices (the query "
                     f"axis is sharded over them); got {q} and {devices}")
  for name in _NOISE:
    _checks.positive(config[name], f"{prefix}{name}")
  _checks.delta(config.delta, f"{prefix}delta")


def run(config, workdir: str, prefix: str = "config.") -> dict:
  """Times the JAX accounting, the public API and the loop baseline; writes results.json.
  ``prefix`` as :func:`check_config`'s."""
  check_config(config, prefix)
  q, t, c = int(config.num_queries), int(config.num_teachers), int(config.num_classes)
  params = {k: float(config[k]) for k in (*_NOISE, "delta")}
  orders = np.asarray(acc.DEFAULT_ORDERS, np.float64)
  votes = synthetic_votes(config.seed, q, t, c)
  devices, repeats = int(config.devices), int(config.repeats)
  if devices > 1:
    jax.config.update("jax_num_cpu_devices", devices)  # before the backend starts

  with jax.enable_x64(True):
    account = make_jax_accounting(*(params[k] for k in _NOISE), params["delta"], orders)
    votes_dev = jnp.asarray(votes, jnp.float64)
    if devices > 1:  # shard the query axis; the sums over queries become all-reduces
      mesh = Mesh(np.array(jax.devices()[:devices]), ("queries",))
      votes_dev = jax.device_put(votes_dev, NamedSharding(mesh, PartitionSpec("queries", None)))
    votes_dev = jax.block_until_ready(votes_dev)
    start = time.perf_counter()
    out = jax.block_until_ready(account(votes_dev))
    compile_and_first_run = time.perf_counter() - start
    runs, cpu_runs = experiment.timed(lambda: account(votes_dev), repeats)
    eps_ln, moment, eps_conf, order, _ = (np.asarray(x) for x in out)

  # End to end through the validating public API, on the device-resident votes and on the
  # host numpy votes: one warm-up call each (compilation), then the median of the repeats.
  public_runs = {}
  for where, data in (("device", votes_dev), ("host", votes)):
    jax.block_until_ready(public_api_accounting(data, orders=orders, **params))
    public_runs[where] = experiment.timed(
        lambda: public_api_accounting(data, orders=orders, **params), repeats)[0]
  public_device = statistics.median(public_runs["device"])
  public_host = statistics.median(public_runs["host"])
  host_votes = host_votes_costs(votes, repeats)

  # Python loop on a subset, extrapolated.
  n_loop = min(int(config.loop_queries), q)
  subset = votes[:n_loop]
  start, cpu_start = time.perf_counter(), time.process_time()
  alpha_loop, rdp_loop = loop_accounting(subset, *(params[k] for k in _NOISE), orders,
                                         max_moment=_MAX_MOMENT)
  loop_time, loop_cpu = time.perf_counter() - start, time.process_time() - cpu_start
  loop_extrapolated = loop_time * q / n_loop
  # Agreement of the loop and JAX on the subset.
  moments = acc.moments_accountant(_MAX_MOMENT)
  alpha_jax = np.asarray(moments.compose(acc.lnmax_log_moments(
      subset, params["gamma"], moments.orders)).cost)
  rdp_jax = np.asarray(acc.rdp_accountant(orders).compose(acc.confident_gnmax_rdp(
      subset, params["threshold"], params["sigma_threshold"], params["sigma"], orders)).cost)
  max_rel_diff = float(max(np.max(np.abs(alpha_loop / alpha_jax - 1)),
                           np.max(np.abs(rdp_loop / rdp_jax - 1))))

  jax_time, jax_cpu = statistics.median(runs), statistics.median(cpu_runs)
  loop_cpu_extrapolated = loop_cpu * q / n_loop
  public_goal = 2.0 if jax.default_backend() == "cpu" else 10.0
  results = {
      "num_queries": q, "num_teachers": t, "num_classes": c, "num_orders": int(orders.size),
      "max_moment": _MAX_MOMENT,
      "lnmax_2017": {"epsilon": float(eps_ln), "best_moment": int(moment),
                     "grid": [1, _MAX_MOMENT], "best_at_grid_edge": int(moment) == _MAX_MOMENT,
                     "delta": params["delta"], "gamma": params["gamma"]},
      "confident_gnmax_2018": {"epsilon": float(eps_conf), "best_order": float(order),
                               "grid": [float(orders.min()), float(orders.max())],
                               "best_at_grid_edge": float(order) in (float(orders.min()),
                                                                     float(orders.max())),
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
      **host_votes_breakdown(host_votes, public_host, jax_time),
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
  # The resolved config plus the orders (acc.DEFAULT_ORDERS) and the loop subset actually used.
  record = {**config.to_dict(), "loop_queries": n_loop, "orders": orders.tolist()}
  path = experiment.write_results(workdir, results, config=record, seed=config.seed,
                                  disclosure=experiment.NO_PRIVATE_DATA)
  logging.info("bench_accounting: wrote %s", path)
  return results


def host_votes_costs(votes: np.ndarray, repeats: int) -> dict:
  """Median seconds of one host-to-device transfer of ``votes`` (``jax.device_put``,
  blocked until it has arrived) and of one numpy copy of them (each after a warm-up), and
  how many of each the public API makes of host votes (:data:`_PUBLIC_CALLS` functions)."""
  copies, transfers = votes_checks.host_votes_traffic(votes.nbytes)
  jax.block_until_ready(jax.device_put(votes))
  put = experiment.timed(lambda: jax.device_put(votes), repeats)[0]
  np.array(votes, copy=True)
  copy = experiment.timed(lambda: np.array(votes, copy=True), repeats)[0]
  return {"device_put_seconds": statistics.median(put), "copy_seconds": statistics.median(copy),
          "transfers": _PUBLIC_CALLS * transfers, "copies": _PUBLIC_CALLS * copies}


def host_votes_breakdown(costs: dict, public_host: float, jax_time: float) -> dict:
  """The results' fields that say where the host-votes path's time goes: the measured
  transfer and copy, their counts, and the path's ratio to the kernel less them."""
  less_transfers = public_host - costs["transfers"] * costs["device_put_seconds"]
  less_both = less_transfers - costs["copies"] * costs["copy_seconds"]
  return {
      "host_votes_device_put_seconds_median": costs["device_put_seconds"],
      "host_votes_numpy_copy_seconds_median": costs["copy_seconds"],
      "public_api_host_votes_transfers": costs["transfers"],
      "public_api_host_votes_numpy_copies": costs["copies"],
      "public_api_over_kernel_host_votes_less_transfers": less_transfers / jax_time,
      "public_api_over_kernel_host_votes_less_transfers_and_copies": less_both / jax_time,
      "public_api_host_votes_less_transfers_definition": (
          "(host-votes path - transfers x device_put [- numpy copies x copy]) / kernel; "
          f"{_PUBLIC_CALLS} public functions each validate and transfer the votes"),
  }


def plan(config, prefix: str = "config.") -> dict:
  """``--dry_run``: the synthetic histograms' sizes, the repeats, and the temporary memory
  of the one compiled accounting call (XLA's memory analysis on abstract float64 votes).
  ``prefix`` as :func:`check_config`'s."""
  check_config(config, prefix)
  q, t, c = int(config.num_queries), int(config.num_teachers), int(config.num_classes)
  orders = np.asarray(acc.DEFAULT_ORDERS, np.float64)
  out = {"num_queries": q, "num_teachers": t, "num_classes": c, "num_orders": int(orders.size),
         "devices": int(config.devices), "repeats": int(config.repeats),
         "loop_queries": min(int(config.loop_queries), q),
         "votes_bytes": q * c * 8, "rdp_cost_matrix_bytes": q * int(orders.size) * 8}
  with jax.enable_x64(True):
    account = make_jax_accounting(*(float(config[k]) for k in _NOISE), float(config.delta),
                                  orders)
    out["accounting_temp_bytes"] = experiment.compiled_temp_bytes(
        account, jax.ShapeDtypeStruct((q, c), jnp.float64))
  return out


def report(r: dict) -> None:
  """Prints the timings, the speedup over the loop and the two ε."""
  jax_time, n, q = r["jax_seconds_median"], r["loop_queries_timed"], r["num_queries"]
  print(f"JAX on {r['jax_backend']} (compiled, median of {len(r['jax_seconds_all_runs'])}): "
        f"{jax_time:.4f} s; compile+first run {r['jax_compile_and_first_run_seconds']:.2f} s")
  dev, host = (r[f"public_api_end_to_end_seconds_{w}_votes"] for w in ("device", "host"))
  print(f"public API end to end (median of {len(r['public_api_end_to_end_all_runs']['host'])}): "
        f"device votes {dev:.4f} s ({dev / jax_time:.2f}x the kernel), host numpy votes "
        f"{host:.4f} s ({host / jax_time:.2f}x)")
  if "public_api_host_votes_transfers" in r:  # results written before these fields lack them
    print(f"  host votes: {r['public_api_host_votes_transfers']} transfers of "
          f"{r['host_votes_device_put_seconds_median'] * 1e3:.3f} ms (device_put) and "
          f"{r['public_api_host_votes_numpy_copies']} numpy copies of "
          f"{r['host_votes_numpy_copy_seconds_median'] * 1e3:.3f} ms; less the transfers "
          f"{r['public_api_over_kernel_host_votes_less_transfers']:.2f}x the kernel, less "
          f"both {r['public_api_over_kernel_host_votes_less_transfers_and_copies']:.2f}x")
  print(f"Python loop: {r['loop_seconds_on_subset']:.2f} s for {n} queries -> "
        f"{r['loop_seconds_extrapolated']:.0f} s extrapolated to {q}; speedup "
        f"{r['speedup_vs_loop']:.0f}x (CPU time: JAX {r['jax_cpu_seconds_median']:.3f} s, loop "
        f"{r['loop_cpu_seconds_extrapolated']:.0f} s, {r['speedup_vs_loop_cpu_time']:.0f}x); "
        f"max rel diff on subset {r['loop_vs_jax_max_relative_difference_on_subset']:.2e}; "
        f"load average {r['load_average_1_5_15min_at_end'][0]:.1f} on {r['cpu_count']} cores")
  ln, conf = r["lnmax_2017"], r["confident_gnmax_2018"]
  print(f"eps LNMax (2017) = {ln['epsilon']:.4f} (moment {ln['best_moment']}); "
        f"eps Confident-GNMax (2018) = {conf['epsilon']:.4f} (order {conf['best_order']:g}); "
        f"delta = {ln['delta']:g}")

