"""The figure stages: Figures 2 and 3 of Papernot et al. (2017) from teachers' work
directories (their ``votes.npz``).

* Figure 2 (``experiments/plot_aggregation.py``: :func:`run_aggregation`,
  :func:`plan_aggregation`, :func:`report_aggregation`; :func:`make_figure` from explicit
  arguments): noisy-aggregation accuracy vs per-query ε. For each work directory (one
  teacher ensemble each, e.g. n ∈ {10, 100, 250} MNIST teachers) the LNMax labels of the
  votes.npz rows are compared with the true labels over a log grid of per-query
  ε ∈ [eps_min, eps_max]; the whole grid and all seeds come from one vmapped call
  (:func:`pate_jax.aggregation.label_accuracy_grid`). Writes ``figure2.png`` and
  ``figure2.json`` (the plotted numbers, with provenance).

  Per-query ε. An LNMax answer with Laplace scale 1/γ is (2γ, 0)-DP, so by default
  γ = ε/2 (``epsilon_convention="dp"``). The 2017 paper labels its x-axis with the inverse
  Laplace scale itself ("Laplacian noise of inversed scale ε"; scale 20 is called
  ε = 0.05), i.e. γ = ε: ``epsilon_convention="paper"``.

* Figure 3 (``experiments/plot_gap.py``: :func:`run_gap`, :func:`plan_gap`,
  :func:`report_gap`): the normalized top-two vote gap vs number of teachers; averages
  (top count − second count) / n over each run's test queries and writes ``figure3.png``
  and ``results.json``.

Both read their runs from the comma-separated ``config.runs``; both results are
measurements (``experiment.MEASUREMENT``).
"""

from __future__ import annotations

import pathlib
from typing import Any, Sequence

import numpy as np

from pate_jax import aggregation
from pate_jax import experiment
from pate_jax import io
from pate_jax import rng
from pate_jax import votes as votes_lib

__all__ = ["ROWS", "make_figure", "run_aggregation", "plan_aggregation", "report_aggregation",
           "gaps", "plot_gaps", "run_gap", "plan_gap", "report_gap"]

ROWS = ("all", "pool", "eval")  # votes.npz rows: all, the public pool, the evaluation set


def _runs(config: Any) -> list[str]:
  return [r for r in str(config.runs).split(",") if r]


# --- Figure 2: noisy-aggregation accuracy vs per-query ε ----------------------------------


def make_figure(workdirs: Sequence[str | pathlib.Path], out: str | pathlib.Path, *,
                num_points: int = 25, eps_min: float = 0.01, eps_max: float = 1.0,
                num_seeds: int = 5, rows: str = "all", epsilon_convention: str = "dp",
                seed: int = 0) -> dict:
  """Computes, plots and writes Figure 2; returns the numbers written to figure2.json."""
  if not workdirs:
    raise ValueError("workdirs must name at least one directory, got none")
  if not 0 < eps_min < eps_max:
    raise ValueError(f"need 0 < eps_min < eps_max, got eps_min={eps_min}, eps_max={eps_max}")
  if num_points < 2:
    raise ValueError(f"num_points must be >= 2, got {num_points}")
  if rows not in ROWS:
    raise ValueError(f"rows must be one of {ROWS}, got {rows!r}")
  if epsilon_convention not in ("dp", "paper"):
    raise ValueError(f"epsilon_convention must be 'dp' or 'paper', got {epsilon_convention!r}")
  eps = np.logspace(np.log10(eps_min), np.log10(eps_max), num_points)
  gammas = eps / 2.0 if epsilon_convention == "dp" else eps
  key = rng.stream(rng.root_key(seed), "aggregation")
  curves = []
  for workdir in workdirs:
    data = votes_lib.load_votes(workdir)
    sl = {"all": slice(None), "pool": slice(None, data["num_pool"]),
          "eval": slice(data["num_pool"], None)}[rows]
    votes, labels = data["votes"][sl], data["labels"][sl]
    if votes.shape[0] == 0:
      raise ValueError(f"rows={rows!r} selects no votes in {workdir}")
    acc = np.asarray(aggregation.label_accuracy_grid(key, votes, labels, "lnmax", gammas,
                                                     num_seeds), np.float64)
    curves.append({
        "workdir": str(workdir), "dataset": data["dataset"],
        "num_teachers": data["num_teachers"], "num_queries": int(votes.shape[0]),
        "plurality_accuracy": float(np.mean(np.asarray(aggregation.plurality(votes)) == labels)),
        "accuracy_mean": acc.mean(axis=1), "accuracy_std": acc.std(axis=1),
    })

  out = pathlib.Path(out)
  out.mkdir(parents=True, exist_ok=True)
  from matplotlib.figure import Figure  # pylint: disable=g-import-not-at-top
  fig = Figure(figsize=(5.5, 4))
  ax = fig.subplots()
  for c in curves:
    line, = ax.plot(eps, 100 * c["accuracy_mean"], marker="o", ms=3,
                    label=f"{c['dataset'] or 'votes'} n={c['num_teachers']}")
    ax.fill_between(eps, 100 * (c["accuracy_mean"] - c["accuracy_std"]),
                    100 * (c["accuracy_mean"] + c["accuracy_std"]), color=line.get_color(),
                    alpha=0.2)
    # Noise-free plurality accuracy: the limit as ε grows.
    ax.axhline(100 * c["plurality_accuracy"], color=line.get_color(), ls=":", lw=1)
  ax.set_xscale("log")
  ax.set_xlabel("per-query ε" + (" (= 2γ)" if epsilon_convention == "dp" else " (= γ, as 2017)"))
  ax.set_ylabel("noisy aggregation accuracy (%)")
  ax.set_title(experiment.PRIVATE_TITLE + "LNMax label accuracy (Papernot et al. 2017, "
               "Fig. 2)", fontsize=9)
  ax.grid(True, which="both", alpha=0.3)
  ax.legend()
  fig.tight_layout()
  io.save_figure(fig, out / "figure2.png", dpi=150)

  results = {"epsilon": eps, "gamma": gammas, "epsilon_convention": epsilon_convention,
             "rows": rows, "num_seeds": num_seeds, "curves": curves}
  settings = {"workdirs": [str(w) for w in workdirs], "num_points": num_points,
              "eps_min": eps_min, "eps_max": eps_max, "num_seeds": num_seeds, "rows": rows,
              "epsilon_convention": epsilon_convention}
  experiment.write_results(out, results, config=settings, seed=seed, name="figure2.json",
                           disclosure=experiment.MEASUREMENT)
  return results


def run_aggregation(config: Any, workdir: str) -> dict:
  """Figure 2 of the comma-separated ``config.runs`` into ``workdir``."""
  runs = _runs(config)
  if not runs:
    raise ValueError("config.runs: give a comma-separated list of workdirs with votes.npz")
  return make_figure(runs, workdir, num_points=int(config.num_points),
                     eps_min=float(config.eps_min), eps_max=float(config.eps_max),
                     num_seeds=int(config.num_seeds), rows=config.rows,
                     epsilon_convention=config.epsilon_convention, seed=int(config.seed))


def plan_aggregation(config: Any) -> dict:
  """``--dry_run``: the grid (points × seeds), the rows, and each run's votes (or that
  they are missing) with the size of its [points × seeds × queries] accuracy draws."""
  runs = _runs(config)
  points, seeds = int(config.num_points), int(config.num_seeds)
  out = {"runs": len(runs) or "MISSING: config.runs is empty", "num_points": points,
         "num_seeds": seeds, "rows": config.rows, "eps_range": (config.eps_min, config.eps_max)}
  for i, r in enumerate(runs):
    sizes, data = experiment.votes_plan(r, f"config.runs[{i}]")
    out[f"run{i}"] = sizes
    if data is not None:
      q = {"all": len(data["votes"]), "pool": data["num_pool"],
           "eval": len(data["votes"]) - data["num_pool"]}.get(config.rows, len(data["votes"]))
      out[f"run{i}"].update({"queries": q, "noisy_votes_bytes_per_point":
                             seeds * q * data["votes"].shape[1] * 4})
  return out


def report_aggregation(results: dict) -> None:
  """One line per run: the accuracy at both ends of the ε grid and the plurality's."""
  for c in results["curves"]:
    print(f"{c['dataset'] or 'votes'} n={c['num_teachers']}: accuracy "
          f"{100 * c['accuracy_mean'][0]:.1f}% at ε={results['epsilon'][0]:.3g} .. "
          f"{100 * c['accuracy_mean'][-1]:.1f}% at ε={results['epsilon'][-1]:.3g} "
          f"(plurality {100 * c['plurality_accuracy']:.1f}%)")


# --- Figure 3: normalized top-two vote gap vs number of teachers --------------------------


def gaps(workdirs: list[str], name: str = "workdirs") -> list[dict]:
  """Each run's mean normalized top-two gap, sorted by number of teachers. A run whose votes
  cannot be read is refused as ``<name>[i]``, with the reason."""
  rows = []
  for i, workdir in enumerate(workdirs):
    try:
      v = votes_lib.load_votes(workdir)
    except (OSError, ValueError) as e:
      raise type(e)(f"{name}[{i}]: {e}") from e
    g = np.asarray(votes_lib.normalized_gap(v["votes"]))
    rows.append({"workdir": workdir, "dataset": v["dataset"], "num_teachers": v["num_teachers"],
                 "mean_normalized_gap": float(g.mean()), "num_queries": len(g)})
  return sorted(rows, key=lambda r: r["num_teachers"])


def plot_gaps(rows: list[dict], path: str | pathlib.Path) -> None:
  """Figure 3: one bar per run, the mean gap in percent of the number of teachers."""
  from matplotlib.figure import Figure  # pylint: disable=g-import-not-at-top
  fig = Figure(figsize=(4.5, 3.5))
  ax = fig.subplots()
  labels = [str(r["num_teachers"]) for r in rows]
  values = [100 * r["mean_normalized_gap"] for r in rows]
  ax.bar(labels, values, color="tab:blue")
  for i, v in enumerate(values):
    ax.text(i, v + 1, f"{v:.1f}", ha="center")
  ax.set_xlabel("number of teachers")
  ax.set_ylabel("gap / number of teachers (%)")
  ax.set_ylim(0, 100)
  ax.set_title(experiment.PRIVATE_TITLE + f"{rows[0]['dataset']}: top-two vote gap")
  fig.tight_layout()
  io.save_figure(fig, path, dpi=120)


def run_gap(config: Any, workdir: str) -> dict:
  """Figure 3 of the comma-separated ``config.runs`` into ``workdir``."""
  runs = _runs(config)
  if not runs:
    raise ValueError("config.runs: give a comma-separated list of teacher workdirs")
  rows = gaps(runs, "config.runs")
  out = pathlib.Path(workdir)
  out.mkdir(parents=True, exist_ok=True)
  plot_gaps(rows, out / "figure3.png")
  results = {"figure3": rows}
  experiment.write_results(out, results, config=config, seed=None,
                           disclosure=experiment.MEASUREMENT)
  return results


def plan_gap(config: Any) -> dict:
  """``--dry_run``: each run's votes (sizes) or that they are missing."""
  runs = _runs(config)
  out = {"runs": len(runs) or "MISSING: config.runs is empty"}
  for i, r in enumerate(runs):
    out[f"run{i}"] = experiment.votes_plan(r, f"config.runs[{i}]")[0]
  return out


def report_gap(results: dict) -> None:
  """One line per run: its number of teachers and mean normalized gap."""
  for r in results["figure3"]:
    print(f"n={r['num_teachers']:4d}  mean normalized gap {r['mean_normalized_gap']:.3f}")
