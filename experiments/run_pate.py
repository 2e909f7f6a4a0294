"""The main job: teachers → noisy labels → privacy cost (→ student, when it lands).

  python experiments/run_pate.py --config configs/pate_mnist.py:cpu --workdir runs/pate_mnist_cpu

Runs each stage's ``run(config, workdir)`` in its own sub-directory of
``--workdir`` (a rerun resumes the teachers from their checkpoint) and writes
a summary ``results.json`` with the headline numbers of every stage.
"""

from __future__ import annotations

import pathlib
import time


import aggregate  # experiments/aggregate.py (sibling script)
import train_teachers  # experiments/train_teachers.py
from pate_jax import experiment


def run(config, workdir: str) -> dict:
  t0 = time.time()
  root = pathlib.Path(workdir)
  teachers = train_teachers.run(config.teachers, str(root / "teachers"))
  with config.aggregate.unlocked():
    config.aggregate.votes_dir = str(root / "teachers")
  labels = aggregate.run(config.aggregate, str(root / "aggregate"))
  summary = {
      "data": {k: teachers[k] for k in ("dataset", "data_source", "fallback_data")},
      "teachers": {k: teachers[k] for k in (
          "num_teachers", "examples_per_teacher", "teacher_test_accuracy",
          "plurality_accuracy_eval", "plurality_accuracy_test", "mean_normalized_gap",
          "wall_seconds")},
      "aggregate": labels,
      "student": "not yet implemented (students issue)",
      "wall_seconds": time.time() - t0,
  }
  experiment.write_results(root, summary, config=config, seed=config.seed)
  return summary


def report(s: dict) -> None:
  if s["data"]["fallback_data"]:
    print("\n!!! FALLBACK DATA (sklearn 8x8 digits): NOT an MNIST result !!!")
  t = s["teachers"]
  print(f"\n{t['num_teachers']} teachers: mean accuracy "
        f"{t['teacher_test_accuracy']['mean']:.2%}, plurality {t['plurality_accuracy_test']:.2%}"
        f" (test), {t['plurality_accuracy_eval']:.2%} (eval); results in "
        "the workdir's results.json")


if __name__ == "__main__":
  experiment.run_main(run, report=report, quiet_logs=True)
