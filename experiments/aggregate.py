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
                ``epsilon`` uses moments 1..``max_moment`` = 8 (the 2017 code's
                convention, comparable with the paper's ε); ``epsilon_tight`` moments
                1..``tight_max_moment``; every entry says whether its best moment/order
                is at the end of its grid (``best_at_grid_edge``, listed in
                ``epsilon_at_grid_edge``).
  privacy.png   ε vs queries answered under each accounting.

Data-dependent ε values depend on the private votes and are reported un-noised,
as in both papers (2017, Section 3.3).

Usage:
  python experiments/aggregate.py --config configs/aggregate_mnist.py:cpu \\
      --config.votes_dir=runs/pate_mnist_cpu/teachers --workdir runs/agg_q100

``--config.votes_dir`` names a teachers workdir (the main job's ``<workdir>/teachers``, or
a ``train_teachers.py`` run); without it the votes are read from ``--workdir``.
"""

from __future__ import annotations

import pathlib
import time
from typing import Any

import numpy as np

from pate_jax import _checks as v
from pate_jax import experiment
from pate_jax import labels as labels_lib
from pate_jax import ledger as ledger_lib
from pate_jax import mechanisms
from pate_jax import reporting
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


def epsilon_reports(config: Any, mechanism: Any, params: dict, votes: np.ndarray,
                    answered: np.ndarray, charged: np.ndarray, orders: Any) -> dict[str, Any]:
  """:func:`pate_jax.reporting.epsilon_reports` with the config's δ and moment grids."""
  return reporting.epsilon_reports(mechanism, params, votes, answered, charged, orders,
                                   **_grids(config))


def _grids(config: Any) -> dict[str, Any]:
  return {"delta": config.delta, "max_moment": int(config.max_moment),
          "tight_max_moment": int(config.get("tight_max_moment") or 0)}


def run(config: Any, workdir: str | pathlib.Path) -> dict[str, Any]:
  """Runs the stage: reads votes, labels the queries, writes labels.npz and results.json.

  Resumes the ledger of an earlier ``labels.npz`` in ``workdir`` (module docstring); the
  workdir is locked meanwhile (two runs at once would both spend the recorded budget).
  """
  with experiment.locked_workdir(workdir):
    return _run(config, pathlib.Path(workdir))


def _run(config: Any, workdir: pathlib.Path) -> dict[str, Any]:
  t0 = time.perf_counter()
  if not config.votes_dir and not (workdir / "votes.npz").exists():
    raise FileNotFoundError(
        f"no votes in {workdir / 'votes.npz'}: name a teachers workdir with "
        "--config.votes_dir=DIR (e.g. runs/pate_mnist_cpu/teachers after the main job), or "
        "run experiments/train_teachers.py into this --workdir first")
  data = votes_lib.load_votes(config.votes_dir or workdir)
  n = int(config.num_queries)
  if not 0 < n <= data["num_pool"]:
    raise ValueError(f"config.num_queries must be in [1, num_pool={data['num_pool']}], got {n}")
  prior = labels_lib.previous_labels(workdir, data["index"][:data["num_pool"]])
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
  votes = data["votes"][:total]
  answered = status == ledger_lib.Status.ANSWERED
  charged = answered | (status == ledger_lib.Status.NOT_CONFIDENT)
  results = {
      **reporting.label_results(data, labels, status, mechanism, params, delta=config.delta,
                                num_asked_now=max(n - done, 0)),
      **epsilon_reports(config, mechanism, params, votes, answered, charged, orders),
      "epsilon_release": reporting.publishable_epsilon(
          rng.stream(rng.root_key(config.seed), "epsilon_release"), mechanism, params,
          votes[charged], answered[charged], delta=config.delta, conversion=config.conversion),
      "ledger": reporting.ledger_summary(aggregator, resumed=prior is not None),
      "time_s": time.perf_counter() - t0,
  }
  if config.get("privacy_plot", True) and charged.any():
    curve = reporting.privacy_curve(mechanism, params, votes, answered, charged, orders,
                                    **_grids(config))
    results["privacy_curve"] = curve
    reporting.plot_privacy(curve, f"{mechanism.name} {params}, {data['num_teachers']} teachers",
                           workdir / "privacy.png")
  experiment.write_results(workdir, results, config=reporting.config_record(config, mechanism),
                           seed=config.seed)
  return results


def plan(config: Any) -> dict[str, Any]:
  """``--dry_run``: the mechanism, its noise, the queries asked and the votes they come
  from (or that the votes are missing), and the temporary memory of the compiled answer
  of one ledger chunk."""
  mechanism = mechanisms.get(config.mechanism, "config.mechanism")
  params = {name: config[name] for name in mechanism.param_names}
  n, chunk = int(config.num_queries), int(config.chunk_size)
  out: dict[str, Any] = {"mechanism": mechanism.name, "noise": params,
                         "accountant": mechanism.accountant, "num_queries": n,
                         "delta": config.delta, "epsilon_max": config.epsilon_max,
                         "ledger_chunk_size": chunk, "ledger_chunks": -(-n // chunk)}
  sizes, data = experiment.votes_plan(
      config.votes_dir, "config.votes_dir (run() would read <workdir>/votes.npz)")
  out.update(sizes)
  if data is None:
    return out
  out["num_queries_within_pool"] = 0 < n <= data["num_pool"]
  import jax  # pylint: disable=g-import-not-at-top
  key = rng.stream(rng.root_key(config.seed), "aggregation")
  votes = jax.ShapeDtypeStruct((chunk, data["votes"].shape[1]), data["votes"].dtype)
  out["answer_temp_bytes_per_chunk"] = experiment.compiled_temp_bytes(
      lambda k, x, q: mechanism.answer(k, x, q, params), key, votes,
      jax.ShapeDtypeStruct((chunk,), np.int32))
  return out


def report(r: dict[str, Any]) -> None:
  print("\n".join(reporting.aggregate_headline(r)))


if __name__ == "__main__":
  experiment.run_main(run, report=report, plan=plan)
