"""The release stage: a Confident-GNMax labelling's data-dependent ε, released privately.

``run(config, workdir)`` takes the first ``config.num_queries`` rows of ``votes.npz``, answers
them once with Confident-GNMax (Papernot et al. 2018, Section 4) and releases the
data-dependent ε of the realised answers with smooth sensitivity (GNSS, Appendices B-C) at
an order λ, a β and a σ_ss fixed before the data is seen (``config.release``; the order by
default from the data-independent rule of :func:`pate_jax.budget.default_release_order`).
Every release is at an order where conditions C5 and C6 of the smooth-sensitivity analysis
(2018, App. B.4.2) hold for σ and the votes' classes; a config's order where either fails
is refused before anything is answered.

It spends from no privacy budget: run again on the same teachers, it answers and releases
again, and the average of many runs' released ε and answered counts tends to their
un-noised values. So the whole of results.json is private, a research measurement
(:data:`pate_jax.experiment.MEASUREMENT`), and so is every line printed; a publishable
release of Confident-GNMax labels and their ε is the aggregate stage's
(:mod:`pate_jax.stages.aggregate`), charged to the teachers' ledger. results.json: the one
released ε, δ, the fixed λ, β, σ_ss, the conversion, the number of queries answered, the
data-independent ε, the noise source; in ``private`` the un-noised data-dependent ε before and
with the release's cost, the smooth sensitivity, the noise's spread over ``config.draws``
draws, and the paper's own analysis -- tf-privacy's expected cost with its order and β
chosen on the votes (how 2018's Table 2 value was computed, itself a function of the
private votes) and (λ, β) chosen jointly over the default orders, both among the
orders where C5 and C6 hold.

Noise (the answers and the release) is secret unless ``config.noise_seed`` names a
research seed.
"""

from __future__ import annotations

import pathlib
import time
from typing import Any

import jax
import numpy as np

from pate_jax import _checks
from pate_jax import accounting as acc
from pate_jax import aggregation
from pate_jax import budget as budget_lib
from pate_jax import experiment
from pate_jax import mechanisms
from pate_jax import reporting
from pate_jax import rng
from pate_jax import votes as votes_lib
from pate_jax.stages import aggregate

__all__ = ["run", "plan", "report", "check_config", "TF_PRIVACY_ORDERS"]

# tf-privacy's ICLR2018/smooth_sensitivity_table.py orders: 2, 2.5, ..., 100 and 100
# log-spaced orders from 100 to 500.
TF_PRIVACY_ORDERS = np.concatenate([np.arange(2.0, 100.5, 0.5),
                                    np.logspace(np.log10(100.0), np.log10(500.0), 100)])


def _floats(release: acc.Release) -> dict[str, float]:
  return {k: float(np.asarray(x)) for k, x in release._asdict().items()}


def check_config(config: Any) -> None:
  """The fields of this stage, refused before the votes are read (naming the field, and
  by ``--dry_run``): an unknown ``orders`` was read as the default grid and reported under
  its own name, ``draws`` 0 reported a NaN spread and -1 failed inside JAX; a fractional
  ``num_queries`` was truncated; a bad δ, conversion, threshold or threshold noise was
  refused, naming the library's argument, only after the mechanism had answered, and the
  release's ``order``, ``beta`` and ``sigma_ss`` as ``release order`` once the votes were
  read (:func:`pate_jax.stages.aggregate.check_release`)."""
  _checks.positive_int(config.num_queries, "config.num_queries")
  _checks.scalar(config.threshold, "config.threshold")
  _checks.positive(config.sigma_threshold, "config.sigma_threshold")
  _checks.positive(config.sigma, "config.sigma")
  _checks.delta(config.delta, "config.delta")
  _checks.choice(config.conversion, "config.conversion", acc.CONVERSIONS)
  _checks.choice(config.orders, "config.orders", ("tf_privacy", "default"))
  _checks.positive_int(config.draws, "config.draws")
  _checks.boolean(config.joint_orders, "config.joint_orders")
  aggregate.check_release(config.release)


def _grid(config: Any) -> np.ndarray:
  return TF_PRIVACY_ORDERS if config.orders == "tf_privacy" else np.asarray(acc.DEFAULT_ORDERS)


def _spec(config: Any, params: dict[str, float], num_classes: int) -> budget_lib.ReleaseSpec:
  """The release's fixed parameters: the config's, or the data-independent rule's order
  (either refused unless conditions C5 and C6 hold there: :func:`aggregate.fixed_release`)."""
  return aggregate.fixed_release(config.release, mechanisms.CONFIDENT_GNMAX, params,
                                 config.num_queries, config.delta, _grid(config),
                                 str(config.conversion), num_classes)


def run(config: Any, workdir: str | pathlib.Path) -> dict[str, Any]:
  t0 = time.perf_counter()
  check_config(config)
  data = votes_lib.load_votes(config.votes_dir or workdir)
  n = int(config.num_queries)
  if not 0 < n <= data["num_pool"]:
    raise ValueError(f"config.num_queries must be in [1, num_pool={data['num_pool']}], got {n}")
  votes = np.asarray(data["votes"][:n])
  params = {k: float(config[k]) for k in ("threshold", "sigma_threshold", "sigma")}
  delta, conversion = float(config.delta), str(config.conversion)
  noise_seed = rng.check_noise_seed(config.get("noise_seed"), "config.noise_seed")
  num_classes = int(votes.shape[1])
  spec = _spec(config, params, num_classes)
  kw = dict(threshold=params["threshold"], sigma_threshold=params["sigma_threshold"],
            sigma=params["sigma"], delta=delta, conversion=conversion)

  # One run of the mechanism, and the release of its data-dependent ε (fixed parameters).
  _, answered = aggregation.confident_gnmax(rng.noise_key("aggregation", noise_seed), votes,
                                            **params)
  answered = np.asarray(answered)
  fixed = acc.smooth_sensitivity_release(votes, order=spec.order, betas=np.array([spec.beta]),
                                         sigma_ss=spec.sigma_ss, answered=answered, **kw)
  key = rng.noise_key("epsilon_release", noise_seed)
  draws = np.asarray(jax.vmap(lambda k: acc.release_epsilon(k, fixed))(
      jax.random.split(jax.random.fold_in(key, 1), int(config.draws))))
  grid = _grid(config)
  independent, order_ind = acc.rdp_accountant(grid, conversion=conversion).compose(
      mechanisms.CONFIDENT_GNMAX.cost(votes, answered, params, grid, False)).epsilon(delta)
  results: dict[str, Any] = {
      "dataset": data["dataset"], "num_teachers": data["num_teachers"], "num_queries": n,
      "noise": params, "noise_source": rng.noise_record(noise_seed), "delta": delta,
      "conversion": conversion, "orders": config.orders, "num_answered": int(answered.sum()),
      "epsilon_released": float(acc.release_epsilon(jax.random.fold_in(key, 0), fixed)),
      "release": spec._asdict(),
      "epsilon_data_independent": float(independent),
      "epsilon_data_independent_order": float(order_ind),
  }

  # The paper's analysis (tf-privacy): expected costs, order and β chosen on the votes,
  # among the orders where conditions C5 and C6 hold (its table script checks them too).
  valid = acc.valid_release_orders(params["sigma"], num_classes, grid)
  expected_rdp = acc.rdp_accountant(valid, conversion=conversion).compose(
      acc.confident_gnmax_rdp(votes, params["threshold"], params["sigma_threshold"],
                              params["sigma"], valid))
  _, order = expected_rdp.epsilon(delta)
  expected = acc.smooth_sensitivity_release(votes, order=float(order), **kw)
  private = reporting.private_part(
      fixed=_floats(fixed), draws_mean=float(draws.mean()), draws_std=float(draws.std()),
      expected_tf_privacy={"release": _floats(expected), "epsilon_released": float(
          acc.release_epsilon(jax.random.fold_in(key, 2), expected))})
  if config.joint_orders:
    joint = acc.smooth_sensitivity_release(
        votes, order=acc.valid_release_orders(params["sigma"], num_classes,
                                              acc.DEFAULT_ORDERS), **kw)
    private["joint"] = {"release": _floats(joint), "epsilon_released": float(
        acc.release_epsilon(jax.random.fold_in(key, 3), joint))}
  results["private"] = private
  results["time_s"] = time.perf_counter() - t0
  # No budget is spent (module docstring): private as a whole, a research measurement.
  experiment.write_results(workdir, results, config=config, seed=config.seed,
                           disclosure=experiment.MEASUREMENT)
  return results


def plan(config: Any) -> dict[str, Any]:
  """``--dry_run``: the queries released, the order grid, the release's fixed parameters,
  the noise draws, and the size of the [queries × orders] cost matrix the accountant
  composes (or that the votes are missing)."""
  check_config(config)
  grid = _grid(config)
  n = int(config.num_queries)
  params = {k: float(config[k]) for k in ("threshold", "sigma_threshold", "sigma")}
  sizes, data = experiment.votes_plan(
      config.votes_dir, "config.votes_dir (run() would read <workdir>/votes.npz)")
  release = ("not fixed yet: the order must satisfy conditions C5 and C6 for the votes' "
             "number of classes" if data is None
             else _spec(config, params, int(data["votes"].shape[1]))._asdict())
  out: dict[str, Any] = {
      "num_queries": n, "orders": config.orders, "num_orders": int(np.size(grid)),
      "release": release, "noise_source": rng.noise_record(config.get("noise_seed")),
      "draws": int(config.draws), "joint_orders": bool(config.joint_orders), "noise": params,
      "rdp_cost_matrix_bytes": n * int(np.size(grid)) * 8}  # float64
  out.update(sizes)
  if data is not None:
    out["num_queries_within_pool"] = 0 < n <= data["num_pool"]
  return out


def report(r: dict[str, Any]) -> None:
  """The released ε and its settings, then the un-noised values: every line marked private
  (:func:`pate_jax.experiment.mark_private`), since the stage spends from no budget and its
  results are private as a whole, whoever calls it (the script's harness marks them too)."""
  experiment.report_private(_report, r)


def _report(r: dict[str, Any]) -> None:
  if r["noise_source"]["public"]:
    print(f"NOTE: {r['noise_source']['note']}")
  s = r["release"]
  print(f"{r['dataset']}, {r['num_queries']} queries, {r['num_teachers']} teachers, "
        f"Confident-GNMax {r['noise']}, delta {r['delta']:g} ({r['conversion']}): "
        f"{r['num_answered']} answered; released ε {r['epsilon_released']:.3f} (order "
        f"{s['order']:g}, β {s['beta']:.4g}, σ_ss {s['sigma_ss']:g}, fixed); data-independent "
        f"ε {r['epsilon_data_independent']:.3f}")
  p, mark = r["private"], experiment.PRIVATE_MARK
  f = p["fixed"]
  print(f"{mark}data-dependent ε {f['epsilon_before']:.3f}, with the release's cost "
        f"{f['epsilon']:.3f} ± {f['noise_std']:.3f} (draws: mean {p['draws_mean']:.3f}, std "
        f"{p['draws_std']:.3f})")
  e = p["expected_tf_privacy"]["release"]
  print(f"{mark}tf-privacy's analysis (order and β chosen on the votes): E[answered] "
        f"{e['answered']:.1f}, order {e['order']:g}: ε {e['epsilon_before']:.3f} -> "
        f"{e['epsilon']:.3f} ± {e['noise_std']:.3f}")
  if "joint" in p:
    j = p["joint"]["release"]
    print(f"{mark}(order, β) chosen jointly: order {j['order']:g}: ε {j['epsilon_before']:.3f}"
          f" -> {j['epsilon']:.3f} ± {j['noise_std']:.3f}")
