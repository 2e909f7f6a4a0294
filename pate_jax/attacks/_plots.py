"""Figures of the attack paper's evaluation (PNG files; used by experiments/attack.py).

Every function draws one figure from plain arrays, writes it to ``path`` and
returns ``str(path)``. Figures are ``matplotlib.figure.Figure`` objects, not
pyplot's: no global backend or figure state is touched.
"""

from __future__ import annotations

import os
import pathlib
from typing import Any, Mapping, Sequence

import numpy as np

from pate_jax import io

GROUP_COLORS = {"low": "tab:red", "medium": "tab:orange", "high": "tab:green"}
# What the tick labels L1..H5 mean (the attack paper's Table 1 names).
LMH_NOTE = ("histograms of the attack paper's Table 1: L = low, M = medium, H = high teacher "
            "consensus (top vote count), 5 each")


def _subplots(nrows: int = 1, ncols: int = 1, **kwargs: Any):
  from matplotlib.figure import Figure  # pylint: disable=g-import-not-at-top
  fig = Figure(figsize=kwargs.pop("figsize", None))
  return fig, fig.subplots(nrows, ncols, **kwargs)


def _save(fig, path: str | os.PathLike) -> str:
  io.save_figure(fig, path, dpi=120, bbox_inches="tight")
  return str(path)


def plot_fixed_queries(workdir, results: Mapping[str, Any], num_seeds: int) -> list[str]:
  """Figures 5-7 of :func:`pate_jax.attacks.fixed_queries`'s ``results`` (headline variant).

  Figures 6-7 (``fig6_mnist_fixed_queries.png``, ``fig7_svhn_...``): error bars
  (mean ± std over runs) per histogram and σ, ε as red dots; Figure 5
  (``fig5_error_vs_cost.png``): mean error against ε, colour per consensus group.
  """
  rows, sig, m = results["histograms"], np.asarray(results["sigmas"]), results["num_queries"]
  main = results["headline_variant"]
  mean = np.stack([r["error_mean"][main] for r in rows], 1)                      # [S, B]
  std = np.stack([r["error_std"][main] for r in rows], 1)
  eps = np.stack([r["epsilon_confident_gnmax"] for r in rows], 1)
  datasets = np.array([r["dataset"] for r in rows])
  groups = np.array([r["group"] for r in rows])
  paths = []
  for i, ds in enumerate(("mnist", "svhn")):
    sel = np.flatnonzero(datasets == ds)
    fig, ax = _subplots(figsize=(12, 4))
    ax2 = ax.twinx()
    width = 0.8 / sig.size
    x = np.arange(sel.size)
    for k, s in enumerate(sig):
      xs = x + (k - (sig.size - 1) / 2) * width
      ax.bar(xs, mean[k, sel], width, yerr=std[k, sel], label=f"σ={s:g}", alpha=0.85)
      ax2.plot(xs, eps[k, sel], "o", color="red", markersize=3)
    ax.set_xticks(x, [rows[b]["name"].split("/")[1] for b in sel])
    ax.set_xlabel(LMH_NOTE)
    ax.set_ylabel("error rate (normalized L1)")
    ax2.set_ylabel("privacy cost ε (Confident-GNMax)", color="red")
    ax.set_title(f"{ds.upper()}: {m} queries, error per histogram (mean ± std over "
                 f"{num_seeds} runs)")
    ax.legend(ncol=sig.size, fontsize=8, loc="lower center", bbox_to_anchor=(0.5, 1.08),
              frameon=False)  # above the axes: never over the bars
    paths.append(_save(fig, pathlib.Path(workdir) / f"fig{6 + i}_{ds}_fixed_queries.png"))
  fig, ax = _subplots(figsize=(6, 4.5))
  for ds, marker in (("mnist", "o"), ("svhn", "s")):
    for g in ("low", "medium", "high"):
      sel = (datasets == ds) & (groups == g)
      ax.scatter(mean[:, sel].ravel(), eps[:, sel].ravel(), marker=marker,
                 color=GROUP_COLORS[g], label=f"{ds} {g} consensus", alpha=0.8, s=18)
  r = results["correlation"]["confident_gnmax"]["per_histogram_and_sigma"]["r"]
  ax.set_title(f"error vs privacy cost, Pearson r = {r:.2f} (paper: -0.20)")
  ax.set_xlabel("error rate")
  ax.set_ylabel("privacy cost ε")
  ax.legend(fontsize=7)
  paths.append(_save(fig, pathlib.Path(workdir) / "fig5_error_vs_cost.png"))
  return paths


def plot_budget(path, results: Mapping[str, Any], budgets: Mapping[str, float]) -> str:
  """Figure 4 from budget results: error per histogram (rows: variants, columns: datasets).

  Args:
    results: ``{"histograms": rows, "datasets": {ds: {"mean_error": ...}}, "variants",
      "samplers"}`` (rows from :func:`pate_jax.attacks.budget_limited`).
    budgets: ``{dataset: ε_max}`` (titles).
  """
  variants, samplers, rows = results["variants"], results["samplers"], results["histograms"]
  fig, axes = _subplots(len(variants), 2, figsize=(14, 3.6 * len(variants)), squeeze=False)
  for row, v in enumerate(variants):
    for ax, ds in zip(axes[row], ("mnist", "svhn")):
      rs = [r for r in rows if r["dataset"] == ds]
      x = np.arange(len(rs))
      for i, smp in enumerate(samplers):
        k = f"{smp}/{v}"
        ax.bar(x + (i - 0.5) * 0.4, [r["error_mean"][k] for r in rs], 0.4,
               yerr=[r["error_std"][k] for r in rs], label=smp,
               color=[GROUP_COLORS[r["group"]] for r in rs], alpha=0.45 + 0.45 * i,
               edgecolor="black")
      ax.set_xticks(x, [r["name"].split("/")[1] for r in rs])
      ax.set_xlabel(LMH_NOTE, fontsize=8)
      means = ", ".join(f"{smp} {results['datasets'][ds]['mean_error'][f'{smp}/{v}']:.3f}"
                        for smp in samplers)
      ax.set_title(f"{ds.upper()} ε≤{budgets[ds]} [{v}]: mean {means}", fontsize=9)
      ax.set_ylabel("error rate")
      twin = ax.twinx()
      twin.plot(x, [r["queries_allowed"] for r in rs], "k.")
      twin.set_yscale("log")
      twin.set_ylabel("queries allowed (dots)", fontsize=8)
  from matplotlib.patches import Patch  # pylint: disable=g-import-not-at-top
  handles = [Patch(facecolor="lightgray", edgecolor="black", alpha=0.45 + 0.45 * i,
                   label=f"{smp} (bar {'left right'.split()[i] if len(samplers) == 2 else i + 1})")
             for i, smp in enumerate(samplers)]
  handles += [Patch(facecolor=c, label=f"{g[0].upper()}: {g} consensus")
              for g, c in GROUP_COLORS.items()]
  fig.tight_layout(rect=(0, 0, 1, 1 - 0.35 / (3.6 * len(variants))))
  # One legend for the figure, above the panels: never over the bars.
  fig.legend(handles=handles, loc="upper center", ncol=len(handles), fontsize=8,
             frameon=False, bbox_to_anchor=(0.5, 1.0))
  return _save(fig, path)


def plot_edge(path, results: Mapping[str, Any], title: str) -> str:
  """Figure 9 from :func:`pate_jax.attacks.edge_sigmas`: error against σ, two baselines."""
  fig, ax = _subplots(figsize=(7, 4))
  for v, mean in results["error_mean"].items():
    ax.errorbar(results["sigmas"], mean, yerr=results["error_std"][v], marker="o", capsize=3,
                label=f"attack ({v})")
  ax.axhline(results["baseline_uniform_error"], color="gray", linestyle=":",
             label="uniform guess N/C")
  ax.axhline(results["baseline_unanimous_top_class_error"], color="k", linestyle="--",
             label="top class only: N votes on it")
  ax.set_xscale("log")
  ax.set_xlabel("σ")
  ax.set_ylabel("error rate")
  ax.set_title(title)
  ax.legend(fontsize=8)
  return _save(fig, path)


def plot_defense(path, results: Mapping[str, Any], title_prefix: str = "") -> str:
  """Section 5 from :func:`pate_jax.attacks.consistent_answers`: fresh noise vs consistent
  answers per histogram (mean over σ), one panel per variant. ``title_prefix`` starts every
  panel's title (e.g. ``"PRIVATE (data owner only): "`` for a run's own vote histograms)."""
  rows, variants = results["histograms"], results["variants"]
  fig, axes = _subplots(len(variants), 1, figsize=(13, 3.8 * len(variants)), squeeze=False)
  x = np.arange(len(rows))
  col = lambda k: [np.mean(r[k]) for r in rows]
  for ax, v in zip(axes[:, 0], variants):
    ax.bar(x - 0.2, col(f"error_fresh_noise/{v}"), 0.4, label="fresh noise per query")
    ax.bar(x + 0.2, col(f"error_consistent/{v}"), 0.4, label="consistent answers (defense)")
    ax.plot(x, col(f"error_top_class_only/{v}"), "k_", markersize=12,
            label="top class only (same solver)")
    ax.plot(x, col("error_guess_all_votes_on_top_class"), "r.",
            label="guess: all votes on the top class")
    ax.set_xticks(x, [r["name"].replace("mnist/", "M:").replace("svhn/", "S:") for r in rows],
                  rotation=90, fontsize=7)
    ax.set_ylabel(f"error (mean over σ ∈ {[float(s) for s in results['sigmas']]})", fontsize=8)
    ax.set_title(f"{title_prefix}{results['num_queries']} repeated queries, reconstruction "
                 f"'{v}': fresh noise vs consistent answers", fontsize=9)
    ax.legend(fontsize=7)
  return _save(fig, path)


def _group_bars(ax, rates: Mapping[str, Any], title: str) -> None:
  """An empty group's shares (``None``, :func:`group_rates`) are drawn as no bar."""
  x = np.arange(2)
  share = lambda *keys: np.asarray([rates[k] for k in keys], np.float64)  # None -> NaN
  ax.bar(x - 0.2, share("minority_low", "minority_high"), 0.4, label="Minority (PhD)")
  ax.bar(x + 0.2, share("majority_low", "majority_high"), 0.4, label="Majority")
  ax.set_xticks(x, ["Low consensus", "High consensus"])
  ax.set_ylabel("share of the group")
  ax.set_title(title, fontsize=9)
  ax.legend(fontsize=8)


def plot_consensus_groups(path, true_rates: Mapping[str, Any], attack_rates: Mapping[str, Any],
                          consensus: np.ndarray, minority: np.ndarray, threshold: float,
                          titles: Sequence[str]) -> str:
  """Figures 1 and 8: group shares with low / high consensus (true, attacked) and the
  consensus distribution of each group (threshold dashed)."""
  fig, axes = _subplots(1, 3, figsize=(14, 3.8))
  _group_bars(axes[0], true_rates, titles[0])
  _group_bars(axes[1], attack_rates, titles[1])
  bins = np.linspace(0.5, 1.0, 26)
  for group, label in ((minority, "Minority (PhD)"), (~minority, "Majority")):
    if group.any():  # an empty group has no density
      axes[2].hist(consensus[group], bins, alpha=0.6, density=True, label=label)
  axes[2].axvline(threshold, color="k", linestyle="--")
  axes[2].set_xlabel("consensus (top votes / teachers)")
  axes[2].legend(fontsize=8)
  return _save(fig, path)


def plot_error_vs_queries(path, sweep: Mapping[str, Any], title: str) -> str:
  """Error against the number of queries (log-log), one panel per group, from
  :func:`pate_jax.attacks.query_sweep`: each variant's mean error and the Cramér–Rao
  bound (dashed: all histograms; dotted: those not near the boundary; dash-dot:
  the bound for an attacker who knows the zero-vote classes)."""
  groups = list(sweep["cramer_rao_error_by_group"])
  m = np.asarray(sweep["num_queries"])
  fig, axes = _subplots(1, len(groups), figsize=(4.6 * len(groups), 4), squeeze=False)
  for ax, g in zip(axes[0], groups):
    for v in sweep["variants"]:
      ax.plot(m, sweep["error_mean_by_group"][v][g], marker="o", label=f"{v} estimator")
    ax.plot(m, sweep["cramer_rao_error_by_group"][g], "k--", label="Cramér–Rao (Gaussian)")
    interior = np.asarray(sweep["cramer_rao_error_interior_by_group"][g], np.float64)
    if np.any(np.isfinite(interior)):
      ax.plot(m, interior, "k:", label="Cramér–Rao, interior histograms only")
    ax.plot(m, sweep["cramer_rao_error_known_zeros_by_group"][g], color="gray",
            linestyle="-.", label="Cramér–Rao, zero classes known")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("number of queries M")
    ax.set_ylabel("mean normalised L1 error")
    ax.set_title(f"{g} (σ = {sweep['sigma']:g})", fontsize=9)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7)
  fig.suptitle(title, fontsize=10)
  fig.tight_layout()
  return _save(fig, path)
