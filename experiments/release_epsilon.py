"""Release a Confident-GNMax labelling's data-dependent ε privately (smooth sensitivity).

Reads ``votes.npz`` (the teachers stage), takes its first ``config.num_queries`` rows
and reports, for Confident-GNMax (Papernot et al. 2018, Sec. 4 and Apps. B-C):

* ``expected``: tf-privacy's table analysis -- the threshold cost of every query plus the
  GNMax cost weighted by ``Pr[answered]`` -- at the order with the smallest
  data-dependent ε (tf-privacy's rule), its smooth-sensitivity release
  (:func:`pate_jax.accounting.smooth_sensitivity_release`), and one noisy ε drawn
  from it (:func:`pate_jax.accounting.release_epsilon`);
* ``realised``: the same for one run of the mechanism (answers drawn from the run's
  ``aggregation`` stream, as ``experiments/aggregate.py`` does), accounting the threshold
  for every query and GNMax for the answered ones (the ledger's accounting), through
  :func:`pate_jax.accounting.release_record`;
* optionally ``joint``: (λ, β) chosen together over ``DEFAULT_ORDERS``;
* the data-independent ε of the realised run, for comparison.

Only the ``epsilon_released`` values (and the data-independent ε) may be published.

Usage:
  python experiments/release_epsilon.py --config configs/release_epsilon.py \\
      --workdir runs/release_mnist --config.votes_dir=runs/pate_mnist_cpu/teachers
"""

from __future__ import annotations

import pathlib
import time
from typing import Any

from absl import logging
import jax
import numpy as np

from pate_jax import accounting as acc
from pate_jax import aggregation
from pate_jax import experiment
from pate_jax import mechanisms
from pate_jax import rng
from pate_jax import votes as votes_lib

# tf-privacy's ICLR2018/smooth_sensitivity_table.py orders: 2, 2.5, ..., 100 and 100
# log-spaced orders from 100 to 500.
TF_PRIVACY_ORDERS = np.concatenate([np.arange(2.0, 100.5, 0.5),
                                    np.logspace(np.log10(100.0), np.log10(500.0), 100)])

def release_key(root: jax.Array) -> jax.Array:
  """The key of the release noise: the run's ``epsilon_release`` stream (pate_jax.rng)."""
  return rng.stream(root, "epsilon_release")


def _floats(release: acc.Release) -> dict[str, float]:
  return {k: float(np.asarray(x)) for k, x in release._asdict().items()}


def run(config: Any, workdir: str | pathlib.Path) -> dict[str, Any]:
  t0 = time.perf_counter()
  data = votes_lib.load_votes(config.votes_dir or workdir)
  n = int(config.num_queries)
  if not 0 < n <= data["num_pool"]:
    raise ValueError(f"config.num_queries must be in [1, num_pool={data['num_pool']}], got {n}")
  votes = np.asarray(data["votes"][:n])
  params = {k: float(config[k]) for k in ("threshold", "sigma_threshold", "sigma")}
  delta, conversion = float(config.delta), str(config.conversion)
  grid = TF_PRIVACY_ORDERS if config.orders == "tf_privacy" else acc.DEFAULT_ORDERS
  root = rng.root_key(config.seed)
  noise_key = release_key(root)
  kw = dict(threshold=params["threshold"], sigma_threshold=params["sigma_threshold"],
            sigma=params["sigma"], delta=delta, conversion=conversion)

  # tf-privacy: expected costs, the order with the smallest data-dependent ε.
  expected_rdp = acc.rdp_accountant(grid, conversion=conversion).compose(
      acc.confident_gnmax_rdp(votes, params["threshold"], params["sigma_threshold"],
                              params["sigma"], grid))
  _, order = expected_rdp.epsilon(delta)
  expected = acc.smooth_sensitivity_release(votes, order=float(order), **kw)
  keys = jax.random.split(jax.random.fold_in(noise_key, 1), int(config.draws))
  draws = np.asarray(jax.vmap(lambda k: acc.release_epsilon(k, expected))(keys))
  results: dict[str, Any] = {
      "dataset": data["dataset"], "num_teachers": data["num_teachers"], "num_queries": n,
      "noise": params, "delta": delta, "conversion": conversion, "orders": config.orders,
      "expected": {
          "release": _floats(expected),
          "epsilon_released": float(acc.release_epsilon(jax.random.fold_in(noise_key, 0),
                                                        expected)),
          "released_draws_mean": float(draws.mean()),
          "released_draws_std": float(draws.std()),
      },
  }

  # One run of the mechanism (the aggregation stream), accounted as the ledger does.
  _, answered = aggregation.confident_gnmax(rng.stream(root, "aggregation"), votes, **params)
  answered = np.asarray(answered)
  _, order_realised = acc.rdp_accountant(grid, conversion=conversion).compose(
      mechanisms.CONFIDENT_GNMAX.cost(votes, answered, params, grid, True)).epsilon(delta)
  record = acc.release_record(jax.random.fold_in(noise_key, 2), votes,
                              mechanism="confident_gnmax", params=params, delta=delta,
                              answered=answered, order=float(order_realised),
                              conversion=conversion)
  independent, order_ind = acc.rdp_accountant(grid, conversion=conversion).compose(
      mechanisms.CONFIDENT_GNMAX.cost(votes, answered, params, grid, False)).epsilon(delta)
  results["realised"] = {
      **record, "num_answered": int(answered.sum()),
      "epsilon_data_independent": float(independent),
      "epsilon_data_independent_order": float(order_ind),
  }
  if config.joint_orders:
    joint = acc.smooth_sensitivity_release(votes, order=acc.DEFAULT_ORDERS, **kw)
    results["joint"] = {"release": _floats(joint), "epsilon_released": float(
        acc.release_epsilon(jax.random.fold_in(noise_key, 3), joint))}
  results["time_s"] = time.perf_counter() - t0
  path = experiment.write_results(workdir, results, config=config, seed=config.seed)
  logging.info("release_epsilon: wrote %s", path)
  return results


def plan(config: Any) -> dict[str, Any]:
  """``--dry_run``: the queries released, the order grid, the noise draws, and the size of
  the [queries × orders] cost matrix the accountant composes (or that the votes are
  missing)."""
  grid = TF_PRIVACY_ORDERS if config.orders == "tf_privacy" else acc.DEFAULT_ORDERS
  n = int(config.num_queries)
  out: dict[str, Any] = {
      "num_queries": n, "orders": config.orders, "num_orders": int(np.size(grid)),
      "draws": int(config.draws), "joint_orders": bool(config.joint_orders),
      "noise": {k: float(config[k]) for k in ("threshold", "sigma_threshold", "sigma")},
      "rdp_cost_matrix_bytes": n * int(np.size(grid)) * 8}  # float64
  sizes, data = experiment.votes_plan(
      config.votes_dir, "config.votes_dir (run() would read <workdir>/votes.npz)")
  out.update(sizes)
  if data is not None:
    out["num_queries_within_pool"] = 0 < n <= data["num_pool"]
  return out


def report(r: dict[str, Any]) -> None:
  e = r["expected"]["release"]
  print(f"{r['dataset']}, {r['num_queries']} queries, {r['num_teachers']} teachers, "
        f"Confident-GNMax {r['noise']}, delta {r['delta']:g} ({r['conversion']}):")
  print(f"  expected (tf-privacy): E[answered] {e['answered']:.1f}, order {e['order']:g}: eps "
        f"{e['epsilon_before']:.3f} -> {e['epsilon']:.3f} +/- {e['noise_std']:.3f} "
        f"(beta {e['beta']:.4f}, SS {e['smooth_sensitivity']:.4g}, sigma_ss "
        f"{e['sigma_ss']:.2f}); released {r['expected']['epsilon_released']:.3f}")
  x = r["realised"]
  p = x["private"]
  print(f"  realised: {x['num_answered']} answered, order {x['order']:g}: eps "
        f"{p['epsilon_data_dependent']:.3f} -> {p['epsilon_with_release_cost']:.3f} +/- "
        f"{p['noise_std']:.3f}; released {x['epsilon_released']:.3f}; data-independent "
        f"{x['epsilon_data_independent']:.3f}")
  if "joint" in r:
    j = r["joint"]["release"]
    print(f"  joint (order, beta): order {j['order']:g}: eps {j['epsilon_before']:.3f} -> "
          f"{j['epsilon']:.3f} +/- {j['noise_std']:.3f}; released "
          f"{r['joint']['epsilon_released']:.3f}")


if __name__ == "__main__":
  experiment.run_main(run, report=report, plan=plan)
