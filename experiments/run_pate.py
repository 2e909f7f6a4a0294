"""The main job: teachers → noisy labels and their privacy cost → the PATE-G student.

  python experiments/run_pate.py --config configs/pate_mnist.py:cpu --workdir runs/pate_mnist_cpu

Runs each stage's ``run(config, workdir)`` in its own sub-directory of
``--workdir`` (a rerun resumes the teachers from their checkpoint, and the privacy
ledger saved with ``aggregate/labels.npz``: labels already paid for are reused, never
bought again) and writes a summary ``results.json`` with the headline numbers of every
stage.
"""

from __future__ import annotations

import pathlib
import time


import train_student  # experiments/train_student.py
import train_teachers  # experiments/train_teachers.py
from pate_jax import experiment


def run(config, workdir: str) -> dict:
  t0 = time.time()
  root = pathlib.Path(workdir)
  with config.unlocked():  # one root seed for every stage (pate_jax.rng streams)
    for stage in (config.teachers, config.aggregate, config.student):
      stage.seed = config.seed
    config.student.votes_dir = str(root / "teachers")
    config.student.labels_dir = str(root / "aggregate")
    config.student.aggregate = config.aggregate
  teachers = train_teachers.run(config.teachers, str(root / "teachers"))
  _, labels = train_student.noisy_labels(config.student, root / "aggregate")  # or reused
  student = train_student.run(config.student, str(root / "student"))
  summary = {
      "data": {k: teachers[k] for k in ("dataset", "data_source", "fallback_data")},
      "teachers": {k: teachers[k] for k in (
          "num_teachers", "examples_per_teacher", "teacher_test_accuracy",
          "plurality_accuracy_eval", "plurality_accuracy_test", "mean_normalized_gap",
          "wall_seconds")},
      "aggregate": labels,
      "student": {k: student[k] for k in (
          "student", "eval_accuracy", "num_eval", "num_labels", "label_accuracy", "epochs",
          "train_seconds", "wall_seconds")},
      "epsilon": labels["epsilon"],
      "delta": labels["delta"],
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
  st = s["student"]
  eps = s["epsilon"]
  main = eps.get("moments_data_dependent") or next(iter(eps.values()), {"epsilon": float("nan")})
  print(f"{st['student']} student: held-out accuracy {st['eval_accuracy']:.2%} on "
        f"{st['num_eval']} images from {st['num_labels']} noisy labels; "
        f"ε = {main['epsilon']:.2f} at δ = {s['delta']:g} (data-dependent); "
        f"wall {s['wall_seconds']:.0f} s")


if __name__ == "__main__":
  experiment.run_main(run, report=report, quiet_logs=True)
