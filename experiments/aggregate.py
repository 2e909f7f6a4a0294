"""Label the student's queries with a noisy aggregator and account for the privacy cost.

Reads ``votes.npz`` (from the teachers stage), answers the first
``config.num_queries`` rows of the public pool with the configured mechanism
through a :class:`pate_jax.ledger.PrivateAggregator` (which refuses queries
beyond ``config.epsilon_max``), and writes to ``--workdir``:

  labels.npz    the noisy labels and the ledger that paid for them
                (:func:`pate_jax.labels.save_labels`; read with ``load_labels``).
                A rerun into the same workdir resumes that ledger: the rows already
                in the file keep their labels (they were paid for; whatever the seed)
                and only new rows (a larger ``num_queries``) are asked, within what
                is left of the same budget. A rerun whose mechanism, parameters, δ,
                ε_max, orders, conversion or modes differ from the recorded ledger is
                refused (a new budget needs a new workdir).
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

from pate_jax import _checks as v
from pate_jax import accounting as acc
from pate_jax import aggregation
from pate_jax import experiment
from pate_jax import labels as labels_lib
from pate_jax import ledger as ledger_lib
from pate_jax import mechanisms
from pate_jax import rng
from pate_jax import votes as votes_lib


def make_aggregator(config: Any, ledger: Any = None
                    ) -> tuple[ledger_lib.PrivateAggregator, Any, dict, Any]:
  """The configured ledger, its mechanism, the mechanism's parameters and RDP orders.

  The noise key is the run's ``aggregation`` stream (pate_jax.rng). ``ledger``: a
  persisted ledger (e.g. :func:`pate_jax.labels.load_labels`) to resume; it must have
  been spent under this config's settings.
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
      chunk_size=int(config.chunk_size), capacity=int(config.capacity), ledger=ledger,
      **params)
  return aggregator, mechanism, params, orders


def _previous(workdir: pathlib.Path, index: np.ndarray) -> dict[str, Any] | None:
  """The labels.npz of an earlier run in ``workdir`` (None if none), checked against the
  current votes.npz rows."""
  if not (workdir / labels_lib.FILENAME).exists():
    return None
  prior = labels_lib.load_labels(workdir)
  m = prior["labels"].shape[0]
  if (m > index.shape[0] or not np.array_equal(prior["query_index"], np.arange(m))
      or not np.array_equal(prior["dataset_index"], index[:m])):
    raise ValueError(f"{workdir / labels_lib.FILENAME} was paid for on other votes.npz rows "
                     "than the current ones; keep its votes.npz, or start a new budget in a "
                     "new workdir")
  return prior


def _release(config: Any, mechanism: Any, params: dict, votes: np.ndarray,
             answered: np.ndarray) -> dict[str, Any] | str:
  """The publishable ε: the data-dependent ε released with smooth sensitivity (Papernot
  et al. 2018; :func:`pate_jax.accounting.release_record`), for GNMax and Confident-GNMax.
  LNMax has no such analysis: its publishable ε is the data-independent one."""
  if mechanism.name not in ("gnmax", "confident_gnmax"):
    return (f"{mechanism.name}: no smooth-sensitivity analysis; publish the "
            "data-independent ε")
  if not votes.shape[0]:
    return "nothing was charged"
  return acc.release_record(rng.stream(rng.root_key(config.seed), "epsilon_release"), votes,
                            mechanism=mechanism.name, params=params, delta=config.delta,
                            answered=answered, conversion=config.conversion)


def run(config: Any, workdir: str | pathlib.Path) -> dict[str, Any]:
  """Runs the stage: reads votes, labels the queries, writes labels.npz and results.json.

  Resumes the ledger of an earlier ``labels.npz`` in ``workdir`` (module docstring); the
  workdir is locked meanwhile (two runs at once would both spend the recorded budget).
  """
  with experiment.locked_workdir(workdir):
    return _run(config, pathlib.Path(workdir))


def _run(config: Any, workdir: pathlib.Path) -> dict[str, Any]:
  t0 = time.perf_counter()
  data = votes_lib.load_votes(config.votes_dir or workdir)
  n = int(config.num_queries)
  if not 0 < n <= data["num_pool"]:
    raise ValueError(f"config.num_queries must be in [1, num_pool={data['num_pool']}], got {n}")
  prior = _previous(workdir, data["index"][:data["num_pool"]])
  aggregator, mechanism, params, orders = make_aggregator(config, ledger=prior)
  done = 0 if prior is None else prior["labels"].shape[0]
  total = max(n, done)
  labels = np.full(total, mechanisms.NOT_ANSWERED, np.int32)
  status = np.full(total, int(ledger_lib.Status.REFUSED_BUDGET), np.int32)
  if prior is not None:
    labels[:done], status[:done] = prior["labels"], prior["status"]
  if n > done:  # Only rows never asked; the recorded ones were paid for.
    kwargs = {}
    if config.consistent:
      kwargs["query_ids"] = v.query_ids(data["index"][done:n], n - done,
                                        name="votes.npz index (consistent query ids)")
    out = aggregator.answer(data["votes"][done:n], **kwargs)
    labels[done:], status[done:] = out.labels, out.status
    labels_lib.save_labels(workdir, labels=labels, status=status,
                           true_labels=data["labels"][:total],
                           dataset_index=data["index"][:total], **aggregator.ledger_record())
  votes, true_labels = data["votes"][:total], data["labels"][:total]
  answered = status == ledger_lib.Status.ANSWERED
  charged = answered | (status == ledger_lib.Status.NOT_CONFIDENT)

  num_answered = int(answered.sum())
  results = {
      "dataset": data["dataset"],
      "num_teachers": data["num_teachers"],
      "mechanism": mechanism.name,
      "noise": params,
      "num_queries": total,
      "num_asked_now": max(n - done, 0),
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
      "epsilon_release": _release(config, mechanism, params, votes[charged],
                                  answered[charged]),
      "ledger": {"epsilon": aggregator.epsilon, "best_order": aggregator.best_order,
                 "epsilon_max": aggregator.epsilon_max, "accounting": aggregator.accounting,
                 "num_charged": aggregator.num_charged,
                 "num_answered": aggregator.num_answered, "resumed": prior is not None},
      "time_s": time.perf_counter() - t0,
  }
  experiment.write_results(workdir, results, config=config, seed=config.seed)
  logging.info("aggregate: %s", results)
  return results


if __name__ == "__main__":
  experiment.run_main(run)
