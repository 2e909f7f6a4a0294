"""Figure 3 of Papernot et al. (2017): normalized top-two vote gap vs number of teachers.

  for n in 10 100 250; do
    python experiments/train_teachers.py --config configs/mnist_250.py:cpu \\
        --config.num_teachers=$n --workdir runs/mnist_n$n
  done
  python experiments/plot_gap.py --config configs/plot_gap.py --workdir runs/figure3 \\
      --config.runs=runs/mnist_n10,runs/mnist_n100,runs/mnist_n250

Reads each run's votes.npz, averages (top count − second count) / n over the
test queries, and writes ``figure3.png`` and ``results.json`` into ``--workdir``.
"""

from __future__ import annotations

import pathlib

import matplotlib
import numpy as np

from pate_jax import experiment, votes as votes_lib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # pylint: disable=g-import-not-at-top,wrong-import-position


def gaps(workdirs: list[str]) -> list[dict]:
  rows = []
  for workdir in workdirs:
    v = votes_lib.load_votes(workdir)
    g = np.asarray(votes_lib.normalized_gap(v["votes"]))
    rows.append({"workdir": workdir, "dataset": v["dataset"], "num_teachers": v["num_teachers"],
                 "mean_normalized_gap": float(g.mean()), "num_queries": len(g)})
  return sorted(rows, key=lambda r: r["num_teachers"])


def plot(rows: list[dict], path: str | pathlib.Path) -> None:
  fig, ax = plt.subplots(figsize=(4.5, 3.5))
  labels = [str(r["num_teachers"]) for r in rows]
  values = [100 * r["mean_normalized_gap"] for r in rows]
  ax.bar(labels, values, color="tab:blue")
  for i, v in enumerate(values):
    ax.text(i, v + 1, f"{v:.1f}", ha="center")
  ax.set_xlabel("number of teachers")
  ax.set_ylabel("gap / number of teachers (%)")
  ax.set_ylim(0, 100)
  ax.set_title(f"{rows[0]['dataset']}: top-two vote gap")
  fig.tight_layout()
  fig.savefig(path, dpi=120)
  plt.close(fig)


def run(config, workdir: str) -> dict:
  runs = [r for r in str(config.runs).split(",") if r]
  if not runs:
    raise ValueError("config.runs: give a comma-separated list of teacher workdirs")
  rows = gaps(runs)
  out = pathlib.Path(workdir)
  out.mkdir(parents=True, exist_ok=True)
  plot(rows, out / "figure3.png")
  results = {"figure3": rows}
  experiment.write_results(out, results, config=config, seed=None,
                           disclosure=experiment.MEASUREMENT)
  return results


def plan(config) -> dict:
  """``--dry_run``: each run's votes (sizes) or that they are missing."""
  runs = [r for r in str(config.runs).split(",") if r]
  out = {"runs": len(runs) or "MISSING: config.runs is empty"}
  for i, r in enumerate(runs):
    out[f"run{i}"] = experiment.votes_plan(r, f"config.runs[{i}]")[0]
  return out


def report(results: dict) -> None:
  for r in results["figure3"]:
    print(f"n={r['num_teachers']:4d}  mean normalized gap {r['mean_normalized_gap']:.3f}")


if __name__ == "__main__":
  experiment.run_main(run, report=report, plan=plan)
