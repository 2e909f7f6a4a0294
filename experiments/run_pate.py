"""The main job: teachers → noisy labels and their privacy cost → the PATE-G student.

  python experiments/run_pate.py --config configs/pate_mnist.py:cpu --workdir runs/pate_mnist_cpu

Runs each stage's ``run(config, workdir)`` in its own sub-directory of
``--workdir``: ``teachers/`` (votes.npz, gap.png), ``aggregate/`` (labels.npz, privacy.png)
and ``student/``, and writes a summary ``results.json`` with the headline numbers of every
stage; it ends by printing them (teachers' accuracy, labels' accuracy, ε with moments
1..8 as in the 2017 code and the tight ε, the student's accuracy) and the files' paths.
A rerun resumes: a killed teachers stage from its checkpoint (deleted once votes.npz is
written, unless ``--config.teachers.keep_checkpoints=True``; a finished one reuses
votes.npz), the privacy ledger saved with ``aggregate/labels.npz`` (labels already paid
for are reused, never bought again), and the student from its last checkpoint (the one
kept: the trained model, ~30 MB). About 32 MB remain on disk after the CPU run.

Overrides name the stage: ``--config.teachers.num_teachers=100``,
``--config.aggregate.num_queries=1000``, ``--config.student.num_steps=450``. The stages'
``seed`` and ``student.aggregate`` / ``student.votes_dir`` are set from ``--config.seed``,
``--config.aggregate`` and the workdir.
"""

from __future__ import annotations

import pathlib
import time


import train_student  # experiments/train_student.py
import train_teachers  # experiments/train_teachers.py
from pate_jax import experiment, mechanisms, reporting


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
  # The student stage labels its queries in aggregate/ (or reuses the labels paid for).
  student = train_student.run(config.student, str(root / "student"))
  labels = experiment.read_results(root / "aggregate")
  summary = {
      "data": {k: teachers[k] for k in ("dataset", "data_source", "fallback_data")},
      "teachers": {k: teachers[k] for k in (
          "dataset", "num_teachers", "examples_per_teacher", "teacher_test_accuracy",
          "plurality_accuracy_eval", "plurality_accuracy_test", "mean_normalized_gap",
          "wall_seconds")},
      "aggregate": labels,
      "student": {k: student[k] for k in (
          "student", "eval_accuracy", "num_eval", "num_labels", "label_accuracy", "epochs",
          "train_seconds", "wall_seconds")},
      "epsilon": labels["epsilon"],
      "epsilon_tight": labels.get("epsilon_tight"),
      "epsilon_at_grid_edge": labels["epsilon_at_grid_edge"],
      "delta": labels["delta"],
      "wall_seconds": time.time() - t0,
  }
  record = experiment.to_jsonable(config)  # without the other mechanisms' noise fields
  mechanism = mechanisms.get(config.aggregate.mechanism, "config.aggregate.mechanism")
  record["aggregate"] = record["student"]["aggregate"] = reporting.config_record(
      config.aggregate, mechanism)
  experiment.write_results(root, summary, config=record, seed=config.seed)
  return summary


def report(s: dict) -> None:
  """The headline: teachers, labels and their ε (paper convention and tight), student."""
  if s["data"]["fallback_data"]:
    print("\n!!! FALLBACK DATA (sklearn 8x8 digits): NOT an MNIST result !!!")
  st = s["student"]
  print("\n" + "\n".join([
      reporting.teachers_headline(s["teachers"]),
      *reporting.aggregate_headline(s["aggregate"]),
      f"{st['student']} student: held-out accuracy {st['eval_accuracy']:.2%} on "
      f"{st['num_eval']} images from {st['num_labels']} noisy labels "
      f"({st['epochs']:.0f} epochs, {st['train_seconds']:.0f} s training)",
      f"main job wall {s['wall_seconds']:.0f} s"]))


if __name__ == "__main__":
  experiment.run_main(run, report=report, quiet_logs=True)
