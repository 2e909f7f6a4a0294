"""Figure 3 of Papernot et al. (2017): normalized top-two vote gap vs number of teachers.

  for n in 10 100 250; do
    python experiments/train_teachers.py --config configs/mnist_250.py:cpu \\
        --config.num_teachers=$n --workdir runs/mnist_n$n
  done
  python experiments/plot_gap.py --workdirs runs/mnist_n10,runs/mnist_n100,runs/mnist_n250 \\
      --out runs/figure3

Reads each workdir's votes.npz, averages (top count − second count) / n over the
test queries, and writes ``figure3.png`` and ``results.json`` into ``--out``.
"""

from __future__ import annotations

import pathlib

from absl import app, flags
import matplotlib
import numpy as np

from pate_jax import experiment, votes as votes_lib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # pylint: disable=g-import-not-at-top,wrong-import-position

_WORKDIRS = flags.DEFINE_list("workdirs", None, "Teacher workdirs, one per ensemble size.")
_OUT = flags.DEFINE_string("out", None, "Where to write figure3.png and results.json.")


def gaps(workdirs: list[str]) -> list[dict]:
  rows = []
  for workdir in workdirs:
    v = votes_lib.load_votes(workdir)
    g = np.asarray(votes_lib.normalized_gap(v["votes"]))
    rows.append({"workdir": workdir, "dataset": v["dataset"], "num_teachers": v["num_teachers"],
                 "mean_normalized_gap": float(g.mean()), "num_queries": len(g)})
  return sorted(rows, key=lambda r: r["num_teachers"])


def plot(rows: list[dict], path: str) -> None:
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


def main(argv):
  if len(argv) > 1:
    raise app.UsageError(f"unexpected arguments: {argv[1:]}")
  rows = gaps(_WORKDIRS.value)
  pathlib.Path(_OUT.value).mkdir(parents=True, exist_ok=True)
  plot(rows, f"{_OUT.value}/figure3.png")
  experiment.write_results(_OUT.value, {"figure3": rows}, config={"workdirs": _WORKDIRS.value},
                           seed=None)
  for r in rows:
    print(f"n={r['num_teachers']:4d}  mean normalized gap {r['mean_normalized_gap']:.3f}")


if __name__ == "__main__":
  flags.mark_flags_as_required(["workdirs", "out"])
  app.run(main)
