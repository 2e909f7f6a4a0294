"""Label the student's queries with a noisy aggregator and account for the privacy cost.

Reads ``votes.npz`` (from the teachers stage), answers the first
``config.num_queries`` rows of the public pool with the configured mechanism
through a :class:`pate_jax.ledger.PrivateAggregator` (which refuses queries
beyond ``config.epsilon_max``), and writes to ``--workdir``:

  labels.npz    the noisy labels and the ledger that paid for them
                (:func:`pate_jax.labels.save_labels`; read with ``load_labels``).
  results.json  ε of the charged queries under each accounting of the mechanism
                (:func:`pate_jax.mechanisms.epsilon_report`: data-dependent and
                data-independent, each RDP conversion, LNMax's strong-composition
                baseline), δ, label accuracy on the answered queries and overall.

Data-dependent ε values depend on the private votes and are reported un-noised,
as in both papers (2017, Section 3.3).

Usage:
  python -m experiments.aggregate --config configs/aggregate_mnist.py:cpu --workdir runs/mnist
"""

from __future__ import annotations

import pathlib
import time
from typing import Any

from absl import logging
import numpy as np

from pate_jax import aggregation
from pate_jax import experiment
from pate_jax import labels as labels_lib
from pate_jax import ledger as ledger_lib
from pate_jax import mechanisms
from pate_jax import rng
from pate_jax import votes as votes_lib


def make_aggregator(config: Any) -> tuple[ledger_lib.PrivateAggregator, Any, dict, Any]:
  """The configured ledger, its mechanism, the mechanism's parameters and RDP orders.

  The noise key is the run's ``aggregation`` stream (pate_jax.rng).
  """
  key = rng.stream(rng.root_key(config.seed), "aggregation")
  mechanism = mechanisms.get(config.mechanism, "config.mechanism")
  params = {name: config[name] for name in mechanism.param_names}
  # Moments-accountant mechanisms (LNMax) use moments 1..max_moment, not config.orders.
  rdp_orders = config.orders is not None and mechanism.accountant == "rdp"
  orders = np.asarray(config.orders, np.float64) if rdp_orders else None
  aggregator = ledger_lib.PrivateAggregator(
      key, mechanism.name, epsilon_max=config.epsilon_max, delta=config.delta, orders=orders,
      max_moment=int(config.max_moment), data_dependent=config.data_dependent,
      consistent=config.consistent, conversion=config.conversion,
      chunk_size=int(config.chunk_size), capacity=int(config.capacity), **params)
  return aggregator, mechanism, params, orders


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

  aggregator, mechanism, params, orders = make_aggregator(config)
  kwargs = {"query_ids": np.asarray(data["index"][:n], np.uint32)} if config.consistent else {}
  out = aggregator.answer(votes, **kwargs)
  status, labels = out.status, out.labels
  answered = status == ledger_lib.Status.ANSWERED
  charged = answered | (status == ledger_lib.Status.NOT_CONFIDENT)
  labels_lib.save_labels(workdir, labels=labels, status=status, true_labels=true_labels,
                         dataset_index=data["index"][:n], **aggregator.ledger_record())

  num_answered = int(answered.sum())
  results = {
      "dataset": data["dataset"],
      "num_teachers": data["num_teachers"],
      "mechanism": mechanism.name,
      "noise": params,
      "num_queries": n,
      "num_answered": num_answered,
      "num_refused_budget": int((status == ledger_lib.Status.REFUSED_BUDGET).sum()),
      "num_not_confident": int((status == ledger_lib.Status.NOT_CONFIDENT).sum()),
      "delta": float(config.delta),
      "label_accuracy_answered": (float(np.mean(labels[answered] == true_labels[answered]))
                                  if num_answered else None),
      "label_accuracy_overall": float(np.mean(labels == true_labels)),
      "plurality_accuracy": float(np.mean(np.asarray(aggregation.plurality(votes))
                                          == true_labels)),
      "epsilon": mechanisms.epsilon_report(
          mechanism, params, votes, answered, charged, delta=config.delta, orders=orders,
          max_moment=int(config.max_moment)),
      "ledger": {"epsilon": aggregator.epsilon, "best_order": aggregator.best_order,
                 "epsilon_max": aggregator.epsilon_max, "accounting": aggregator.accounting,
                 "num_charged": aggregator.num_charged,
                 "num_answered": aggregator.num_answered},
      "time_s": time.perf_counter() - t0,
  }
  experiment.write_results(workdir, results, config=config, seed=config.seed)
  logging.info("aggregate: %s", results)
  return results


if __name__ == "__main__":
  experiment.run_main(run)
