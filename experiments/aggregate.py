"""Label the student's queries with a noisy aggregator and account for the privacy cost.

Reads ``votes.npz`` (from the teachers stage), answers the first
``config.num_queries`` rows of the public pool with the configured mechanism
through a :class:`pate_jax.ledger.PrivateAggregator` (which refuses queries
beyond ``config.epsilon_max``), and writes to ``--workdir``:

  labels.npz    query_index [N] (row of votes.npz), dataset_index [N], labels [N]
                (noisy label, -1 where not answered), answered [N] bool,
                status [N] (pate_jax.ledger.Status), true_labels [N], and the
                ledger: ledger_cost [K], ledger_orders [K], ledger_epsilon,
                ledger_delta, mechanism.
  results.json  ε under each applicable accountant with its best order / moment,
                δ, label accuracy on the answered queries and overall.

Accountants reported (all on the queries actually answered / charged):
  lnmax            2017 moments accountant, data-dependent and data-independent
                   (Papernot et al. 2017, Thms 1-3, Lemma 4, moments 1..max_moment),
                   and the strong-composition baseline 4Tγ² + 2γ√(2T ln 1/δ).
  gnmax            RDP, data-independent (λ/σ²) and data-dependent (2018, Thm 6),
                   each with the classic and the improved (Balle et al. 2020)
                   conversion.
  confident_gnmax  as gnmax, with the threshold check charged for every query and
                   GNMax for the answered ones.
Data-dependent ε values depend on the private votes and are reported un-noised,
as in both papers (2017, Section 3.3).

Usage:
  python -m experiments.aggregate --config configs/aggregate_mnist.py:cpu --workdir runs/mnist
"""

from __future__ import annotations

import math
import pathlib
import time
from typing import Any

from absl import logging
import jax
import numpy as np

from pate_jax import accounting
from pate_jax import aggregation
from pate_jax import experiment
from pate_jax import ledger as ledger_lib
from pate_jax import rng
from pate_jax import votes as votes_lib


def _rdp_entries(prefix: str, rdp: np.ndarray, orders: np.ndarray, delta: float) -> dict:
  out = {}
  for conversion in ("classic", "improved"):
    eps, order = accounting.rdp_to_epsilon(rdp, orders, delta, conversion=conversion)
    out[f"{prefix}_{conversion}"] = {"epsilon": float(eps), "best_order": float(order),
                                     "delta": delta}
  return out


def accountants(config: Any, votes: np.ndarray, answered: np.ndarray,
                charged: np.ndarray) -> dict[str, dict]:
  """ε of the answered (and, for Confident-GNMax, the charged) queries under each accountant.

  Args:
    config: the experiment config (mechanism and its parameters, δ, orders).
    votes: int ``[N, C]`` votes of the queries asked.
    answered: bool ``[N]`` queries that got a label.
    charged: bool ``[N]`` queries that were processed (paid the threshold check).

  Returns:
    ``{name: {"epsilon", "best_order" or "best_moment", "delta"}}``.
  """
  delta = float(config.delta)
  out: dict[str, dict] = {}
  if config.mechanism == "lnmax":
    num = int(answered.sum())
    if num == 0:
      return out
    v = votes[answered]
    for dd, name in ((True, "moments_data_dependent"), (False, "moments_data_independent")):
      eps, moment = accounting.lnmax_moments_epsilon(v, config.gamma, delta, data_dependent=dd,
                                                     max_moment=int(config.max_moment))
      out[name] = {"epsilon": float(eps), "best_moment": int(moment), "delta": delta}
    out["strong_composition"] = {
        "epsilon": float(accounting.strong_composition_epsilon(num, config.gamma, delta)),
        "delta": delta}
    return out
  orders = _orders(config)
  if config.mechanism == "gnmax":
    if not answered.any():
      return out
    v = votes[answered]
    for dd, prefix in ((False, "rdp_data_independent"), (True, "rdp_data_dependent")):
      # Sum in numpy: jnp outside x64 would truncate the float64 costs to float32.
      rdp = np.asarray(accounting.gnmax_rdp(v, config.sigma, orders, data_dependent=dd)).sum(0)
      out.update(_rdp_entries(prefix, rdp, orders, delta))
    return out
  if not charged.any():
    return out
  v = votes[charged]
  ans = answered[charged]
  for dd, prefix in ((False, "rdp_data_independent"), (True, "rdp_data_dependent")):
    if dd:
      thr = accounting.confident_threshold_rdp(v, config.threshold, config.sigma_threshold,
                                               orders)
    else:  # Sensitivity-1 Gaussian check: λ/(2σ_T²) = GNMax cost at noise √2 σ_T.
      thr = accounting.gnmax_rdp(v, math.sqrt(2.0) * config.sigma_threshold, orders,
                                 data_dependent=False)
    gn = np.asarray(accounting.gnmax_rdp(v, config.sigma, orders, data_dependent=dd))
    rdp = np.asarray(thr).sum(0) + gn[ans].sum(0)
    out.update(_rdp_entries(prefix, rdp, orders, delta))
  return out


def _orders(config: Any) -> np.ndarray:
  if config.orders is None:
    return np.asarray(ledger_lib.DEFAULT_ORDERS, np.float64)
  return np.asarray(config.orders, np.float64)


def run(config: Any, workdir: str | pathlib.Path) -> dict[str, Any]:
  """Runs the stage: reads votes, labels the queries, writes labels.npz and results.json."""
  t0 = time.perf_counter()
  workdir = pathlib.Path(workdir)
  data = votes_lib.load_votes(config.votes_dir or workdir)
  n = int(config.num_queries)
  if not 0 < n <= data["num_pool"]:
    raise ValueError(f"config.num_queries must be in [1, num_pool={data['num_pool']}], got {n}")
  votes = np.asarray(data["votes"][:n])
  true_labels = np.asarray(data["labels"][:n])

  key = rng.stream(rng.root_key(config.seed), "aggregation")  # the run's root seed
  params = {"lnmax": {"gamma": config.gamma}, "gnmax": {"sigma": config.sigma},
            "confident_gnmax": {"threshold": config.threshold,
                                "sigma_threshold": config.sigma_threshold,
                                "sigma": config.sigma}}
  if config.mechanism not in params:
    raise ValueError(f"config.mechanism must be one of {sorted(params)}, got "
                     f"{config.mechanism!r}")
  aggregator = ledger_lib.PrivateAggregator(
      key, config.mechanism, epsilon_max=config.epsilon_max, delta=config.delta,
      orders=None if config.mechanism == "lnmax" else _orders(config),
      max_moment=int(config.max_moment), data_dependent=config.data_dependent,
      consistent=config.consistent, conversion=config.conversion,
      chunk_size=int(config.chunk_size), capacity=int(config.capacity),
      **params[config.mechanism])
  kwargs = {"query_ids": np.asarray(data["index"][:n], np.uint32)} if config.consistent else {}
  out = aggregator.answer(votes, **kwargs)
  status = out.status
  answered = status == ledger_lib.Status.ANSWERED
  charged = answered | (status == ledger_lib.Status.NOT_CONFIDENT)
  labels = out.labels

  workdir.mkdir(parents=True, exist_ok=True)
  tmp = workdir / "labels.tmp.npz"
  np.savez_compressed(
      tmp, query_index=np.arange(n, dtype=np.int64),
      dataset_index=np.asarray(data["index"][:n], np.int64), labels=labels.astype(np.int32),
      answered=answered, status=status.astype(np.int32), true_labels=true_labels.astype(np.int32),
      ledger_cost=np.asarray(aggregator.state.cost), ledger_orders=aggregator.orders,
      ledger_epsilon=np.float64(aggregator.epsilon), ledger_delta=np.float64(aggregator.delta),
      mechanism=np.str_(config.mechanism))
  tmp.replace(workdir / "labels.npz")

  plur = np.asarray(aggregation.plurality(votes))
  num_answered = int(answered.sum())
  results = {
      "dataset": data["dataset"],
      "num_teachers": data["num_teachers"],
      "mechanism": config.mechanism,
      "noise": params[config.mechanism],
      "num_queries": n,
      "num_answered": num_answered,
      "num_refused_budget": int((status == ledger_lib.Status.REFUSED_BUDGET).sum()),
      "num_not_confident": int((status == ledger_lib.Status.NOT_CONFIDENT).sum()),
      "delta": float(config.delta),
      "label_accuracy_answered": (float(np.mean(labels[answered] == true_labels[answered]))
                                  if num_answered else None),
      "label_accuracy_overall": float(np.mean(labels == true_labels)),
      "plurality_accuracy": float(np.mean(plur == true_labels)),
      "epsilon": accountants(config, votes, answered, charged),
      "ledger": {"epsilon": aggregator.epsilon, "best_order": aggregator.best_order,
                 "epsilon_max": aggregator.epsilon_max,
                 "accounting": ("2017 moments" if config.mechanism == "lnmax" else
                                f"RDP ({config.conversion} conversion)")
                               + (", data-dependent" if config.data_dependent
                                  else ", data-independent"),
                 "num_charged": aggregator.num_charged,
                 "num_answered": aggregator.num_answered},
      "time_s": time.perf_counter() - t0,
  }
  experiment.write_results(workdir, results, config=config, seed=config.seed)
  logging.info("aggregate: %s", results)
  return results


if __name__ == "__main__":
  experiment.run_main(run)
