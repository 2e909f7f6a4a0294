"""The tabular experiment's figure: student accuracy vs number of queries and vs noise."""

from __future__ import annotations

import os
from typing import Any, Mapping

import numpy as np

from pate_jax import io
from pate_jax import mechanisms


def plot_sweeps(path: str | os.PathLike, sweeps: Mapping[str, Any], non_private: float, *,
                lnmax_gamma: float, gnmax_sigma: float, delta: float, num_seeds: int,
                num_pool: int) -> None:
  """Writes a 3-panel PNG of the sweeps of :func:`sweep_mechanism` (Papernot et al. 2017, Fig. 2).

  Panel 1: student accuracy (mean ± std) and data-dependent ε against the number
  of labelled queries, for LNMax (``lnmax_gamma``), GNMax (``gnmax_sigma``) and
  noiseless plurality labels. Panels 2-3: student and label accuracy (over
  ``num_seeds`` draws) and ε against the Laplace scale ``1/γ`` and the Gaussian
  ``σ`` (log axis), all on ``num_pool`` queries. ``non_private`` (a fraction)
  is drawn as a horizontal line.

  Args:
    path: the PNG to write.
    sweeps: ``{"queries": {"num_queries", "lnmax", "gnmax", "plurality_student_accuracy"},
      "noise": {"lnmax", "gnmax"}}`` as built by the tabular experiment.
    non_private: accuracy of the non-private model.
    lnmax_gamma, gnmax_sigma, delta, num_seeds, num_pool: labels of the axes.
  """
  # The object API, not pyplot: no global backend or figure state is touched.
  from matplotlib.figure import Figure  # pylint: disable=g-import-not-at-top

  fig = Figure(figsize=(16, 4.6))
  axes = fig.subplots(1, 3)
  ax = axes[0]
  twin = ax.twinx()
  queries = sweeps["queries"]
  n = np.asarray(queries["num_queries"])
  configured = {mechanisms.LNMAX: lnmax_gamma, mechanisms.GNMAX: gnmax_sigma}
  for (m, value), style, color in zip(configured.items(), ("o-", "s-"), ("C0", "C1")):
    acc = np.asarray(queries[m.name]["student_accuracy_mean"])
    err = np.asarray(queries[m.name]["student_accuracy_std"])
    scale = mechanisms.describe(m, {m.noise_param: value})
    ax.errorbar(n, 100 * acc, 100 * err, fmt=style, color=color, capsize=3,
                label=f"student, {m.name.upper()} labels ({scale})")
    twin.plot(n, queries[m.name]["epsilon"], ":", marker=style[0], color=color,
              alpha=0.6, label=f"ε, {m.name.upper()} (data-dep.)")
  ax.plot(n, 100 * np.asarray(queries["plurality_student_accuracy"]), "k:",
          label="student, plurality labels (no noise)")
  ax.axhline(100 * non_private, color="gray", ls="--", label="non-private forest")
  ax.set_xlabel("number of labelled queries (student training set)")
  ax.set_ylabel("student accuracy on held-out inputs (%)")
  twin.set_ylabel(f"ε at δ={delta:g}")
  ax.set_title("Student accuracy vs number of queries")
  h1, l1 = ax.get_legend_handles_labels()
  h2, l2 = twin.get_legend_handles_labels()
  ax.legend(h1 + h2, l1 + l2, fontsize=7, loc="lower right")

  for ax, m in zip(axes[1:], configured):
    s = sweeps["noise"][m.name]
    # The sweep records the noise parameter (γ, σ); the axis is the noise scale in votes.
    x = np.asarray(mechanisms.noise_scale(m, {m.noise_param: np.asarray(s["noise_scale"],
                                                                          np.float64)}))
    symbol = m.noise.symbol or m.noise_param
    xlabel = f"noise scale ({'1/' if m.inverse_scale else ''}{symbol})"
    order = np.argsort(x)
    ax.errorbar(x[order], 100 * np.asarray(s["student_accuracy_mean"])[order],
                100 * np.asarray(s["student_accuracy_std"])[order], fmt="o-", capsize=3,
                label="student accuracy")
    ax.plot(x[order], 100 * np.asarray(s["label_accuracy_mean"])[order], "^--",
            label=f"label accuracy ({num_seeds} draws)")
    ax.axhline(100 * non_private, color="gray", ls="--", label="non-private")
    ax.set_xscale("log")
    ax.set_xlabel(xlabel)
    ax.set_ylabel("accuracy (%)")
    ax.set_title(f"{m.name.upper()}: {num_pool} queries")
    twin = ax.twinx()
    twin.plot(x[order], np.asarray(s["epsilon"])[order], "r.:", label="ε (data-dep.)")
    twin.set_ylabel(f"ε at δ={delta:g}", color="r")
    lines = ax.get_legend_handles_labels()
    lines2 = twin.get_legend_handles_labels()
    ax.legend(lines[0] + lines2[0], lines[1] + lines2[1], fontsize=7, loc="lower left")
  # The data-dependent ε and the plurality student are functions of the teachers' votes.
  fig.suptitle("PRIVATE (data owner only): data-dependent ε, plurality labels", fontsize=9)
  fig.tight_layout()
  io.save_figure(fig, path, dpi=120)
