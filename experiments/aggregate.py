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


def flag_grid_edges(report: dict[str, dict], mechanism: Any, orders: Any,
                    max_moment: int) -> list[str]:
  """Adds ``grid`` ([first, last] moment or order searched) and ``best_at_grid_edge`` to
  every entry of an :func:`pate_jax.mechanisms.epsilon_report` that names its best order;
  returns the names whose best sits at the end of its grid (ε would be smaller on a wider
  grid; the 2017 moments start at 1, so only their last moment counts as an edge)."""
  grid = np.asarray(mechanisms.make_accountant(mechanism, orders, "improved",
                                               max_moment).orders, np.float64)
  lo, hi = float(grid.min()), float(grid.max())
  edges = []
  for name, entry in report.items():
    best = entry.get("best_moment", entry.get("best_order"))
    if best is None:
      continue
    at_edge = bool(best == hi or ("best_order" in entry and best == lo))
    entry["grid"] = [lo, hi]
    entry["best_at_grid_edge"] = at_edge
    if at_edge:
      edges.append(name)
  return edges


def epsilon_reports(config: Any, mechanism: Any, params: dict, votes: np.ndarray,
                    answered: np.ndarray, charged: np.ndarray, orders: Any) -> dict[str, Any]:
  """``epsilon`` (moments 1..``max_moment``: the 2017 code's convention, comparable with
  the paper), ``epsilon_tight`` (moments 1..``tight_max_moment``; moments accountant on
  its default grid only) and ``epsilon_at_grid_edge`` (names whose best moment/order is
  at the end of its grid, in either report)."""
  kwargs = {"delta": config.delta, "orders": orders}
  out: dict[str, Any] = {"epsilon": mechanisms.epsilon_report(
      mechanism, params, votes, answered, charged, max_moment=int(config.max_moment),
      **kwargs)}
  edges = flag_grid_edges(out["epsilon"], mechanism, orders, int(config.max_moment))
  tight = int(config.get("tight_max_moment") or 0)
  if mechanism.accountant == "moments" and orders is None and tight > int(config.max_moment):
    out["epsilon_tight"] = mechanisms.epsilon_report(
        mechanism, params, votes, answered, charged, max_moment=tight, **kwargs)
    edges += [f"epsilon_tight.{n}" for n in
              flag_grid_edges(out["epsilon_tight"], mechanism, orders, tight)]
    out["epsilon_convention"] = (
        f"epsilon: moments 1..{int(config.max_moment)} (the 2017 code's convention, for "
        f"comparison with the paper); epsilon_tight: moments 1..{tight}")
  out["epsilon_at_grid_edge"] = edges
  return out


def privacy_curve(config: Any, mechanism: Any, params: dict, votes: np.ndarray,
                  answered: np.ndarray, charged: np.ndarray, orders: Any,
                  points: int = 50) -> dict[str, Any]:
  """ε after the first k charged queries (at most ``points`` values of k) under each
  accounting of :func:`epsilon_reports` (data-dependent on both moment grids,
  data-independent, the mechanism's baselines), against the queries answered so far."""
  charged = np.asarray(charged, bool)
  votes, answered = np.asarray(votes)[charged], np.asarray(answered, bool)[charged]
  n = int(votes.shape[0])
  if not n:
    return {}
  ks = np.unique(np.linspace(1, n, min(points, n)).round().astype(int))
  curve: dict[str, Any] = {"queries_charged": ks.tolist(),
                           "queries_answered": np.cumsum(answered)[ks - 1].tolist(),
                           "epsilon": {}}
  grids = [("", int(config.max_moment))]
  tight = int(config.get("tight_max_moment") or 0)
  if mechanism.accountant == "moments" and orders is None and tight > int(config.max_moment):
    grids.append((f", moments to {tight}", tight))
  for dd in (True, False):
    for suffix, max_moment in grids if dd else grids[:1]:
      empty = mechanisms.make_accountant(mechanism, orders, "improved", max_moment)
      cum = np.cumsum(np.asarray(mechanism.cost(votes, answered, params, empty.orders, dd),
                                 np.float64), axis=0)
      name = ("data-dependent" if dd else "data-independent") + (
          f", moments to {max_moment}" if mechanism.accountant == "moments" else "") + (
          "" if suffix or mechanism.accountant != "moments" else " (2017 code)")
      curve["epsilon"][name] = [float(acc.make_accountant(
          empty.kind, empty.orders, empty.conversion, cost=cum[k - 1]).epsilon(
              config.delta)[0]) for k in ks]
  if mechanism.baselines is not None:
    for k, a in zip(ks, curve["queries_answered"]):
      for name, eps in mechanism.baselines(int(a), params, config.delta).items():
        curve["epsilon"].setdefault(name.replace("_", " "), []).append(float(eps))
  return curve


def plot_privacy(curve: dict[str, Any], title: str, path: pathlib.Path) -> pathlib.Path:
  """ε vs queries answered, one line per accounting (a small PNG)."""
  import matplotlib  # pylint: disable=g-import-not-at-top
  matplotlib.use("Agg")
  import matplotlib.pyplot as plt  # pylint: disable=g-import-not-at-top
  fig, ax = plt.subplots(figsize=(5, 3.4))
  for name, eps in curve["epsilon"].items():
    ax.plot(curve["queries_answered"], eps, label=name, lw=1.5)
  ax.set_xlabel("queries answered")
  ax.set_ylabel(f"ε at δ = {curve['delta']:g}")
  ax.set_title(title, fontsize=9)
  ax.grid(alpha=0.3)
  ax.legend(fontsize=7, frameon=False)
  fig.tight_layout()
  fig.savefig(path, dpi=100)
  plt.close(fig)
  return path


def config_record(config: Any, mechanism: Any) -> dict[str, Any]:
  """The config as results.json records it: other mechanisms' noise parameters (GNMax's
  ``sigma``/``threshold`` for an LNMax run) are left out."""
  record = experiment.to_jsonable(config)
  others = {p for m in mechanisms.REGISTRY.values() for p in m.param_names}
  for name in others - set(mechanism.param_names):
    record.pop(name, None)
  return record


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
      **epsilon_reports(config, mechanism, params, votes, answered, charged, orders),
      "epsilon_release": _release(config, mechanism, params, votes[charged],
                                  answered[charged]),
      "ledger": {"epsilon": aggregator.epsilon, "best_order": aggregator.best_order,
                 "epsilon_max": aggregator.epsilon_max, "accounting": aggregator.accounting,
                 "num_charged": aggregator.num_charged,
                 "num_answered": aggregator.num_answered, "resumed": prior is not None},
      "time_s": time.perf_counter() - t0,
  }
  if config.get("privacy_plot", True) and charged.any():
    curve = privacy_curve(config, mechanism, params, votes, answered, charged, orders)
    curve["delta"] = float(config.delta)
    results["privacy_curve"] = curve
    plot_privacy(curve, f"{mechanism.name} {params}, {data['num_teachers']} teachers",
                 workdir / "privacy.png")
  experiment.write_results(workdir, results, config=config_record(config, mechanism),
                           seed=config.seed)
  return results


def headline(r: dict[str, Any]) -> list[str]:
  """Readable lines of an aggregate results dict (also the main job's)."""
  acc_answered = r["label_accuracy_answered"]
  lines = [f"{r['mechanism']} {r['noise']}: {r['num_answered']} of {r['num_queries']} queries "
           f"answered, label accuracy "
           + (f"{acc_answered:.1%}" if acc_answered is not None else "n/a")
           + f" (plurality {r['plurality_accuracy']:.1%})"]
  for name, e in r["epsilon"].items():
    best = e.get("best_moment", e.get("best_order"))
    tight = (r.get("epsilon_tight") or {}).get(name)
    where = "" if best is None else f" (best {'moment' if 'best_moment' in e else 'order'} {best:g}"
    if best is not None:
      where += ", AT THE GRID'S END)" if e.get("best_at_grid_edge") else ")"
    if tight is not None and tight["epsilon"] != e["epsilon"]:
      where += (f"; tight {tight['epsilon']:.3g} (moments to {tight['grid'][1]:g}, best "
                f"{tight['best_moment']:g})")
    lines.append(f"  ε {name} = {e['epsilon']:.3g}{where} at δ = {e['delta']:g}")
  if r.get("epsilon_tight"):
    lines.append(f"  ({r['epsilon_convention']})")
  if isinstance(r.get("epsilon_release"), str):
    lines.append(f"  publishable: {r['epsilon_release']}")
  return lines


def report(r: dict[str, Any]) -> None:
  print("\n".join(headline(r)))


if __name__ == "__main__":
  experiment.run_main(run, report=report)
