"""Neighbouring data: the GPU acceptance command publishes nothing a training record moves.

experiments/gpu_acceptance.py with ``--config.publish_dir`` copies each run's results into
``<publish_dir>/<run>_gpu/``, which is committed under ``results/runs/`` and rendered into
RESULTS.md (experiments/report.py); ``--config.archive`` hands the workdir over to the next
call. As tests/test_neighbouring_votes.py (whose helpers these tests import), the command
runs twice, on the private data and on its neighbour, with the same secret noise
(``rng.secret_key`` replaced by a constant key), and everything an attacker holding the
published copies, the report rendered from them, the archive's members readable by others
and the lines printed without "private" could read must be the same.

The command is its CPU rehearsal (configs/gpu_acceptance.py:cpu_rehearsal), cut to the runs
trained on the private data: the main job (stage 1: teachers, GNMax labels with secret noise,
the student), PATE-G on the main job's votes (stage 3's ``pate_g_shift_100``, one student,
the main job's: LNMax with a research noise seed, so private as a whole) and the non-private
baseline (stage 3's ``mnist_baseline``: one teacher on all the training images, its
accuracy private). The benchmarks publish timings on synthetic data; the KD-GAN, private as
a whole, is tested in tests/test_neighbouring_students.py; the test suite's counts are of
the public benchmarks standing in for private data (pate_jax/stages/suite.py). The main
job's attack (a measurement, private as a whole) is off: tests/test_neighbouring_votes.py
runs the main job with it.

The neighbour: MNIST's training label of image 0 moved to the next class (the teachers and the
baseline train on the first 2,000 images; image 0 is in one teacher's shard). That teacher's
votes move; the released labels do not. Exempt, as in the other neighbouring tests: timings
(seconds, clock times, throughput, and whether a wall met its target), the salted digest of
the votes in ``labels.npz`` and the released ε (noised). The private parts must see the
neighbour (the test is not vacuous).
"""

from __future__ import annotations

import json
import logging
import tarfile

import numpy as np
import pytest

from pate_jax import experiment
from pate_jax import reproduction as rp
from pate_jax import votes as votes_lib
from pate_jax.stages import gpu_acceptance as ga
from test_neighbouring_students import private_images, timeless_lines
from test_neighbouring_votes import (  # pylint: disable=unused-import
    MAIN_JOB_TIMINGS, RELEASED_EPSILON, REPO, drop, files, fixed_secret_key, modes,
    npz_members, publishable, publishable_lines, without_released)

STAGES = "pate_mnist,pate_g_shift_100,mnist_baseline"

TIMED_TARGETS = ("main_job_wall",)
"""Acceptance targets whose value is a timing (README: timing is not protected)."""


def rehearsal_config(base):
  """The rehearsal of :data:`STAGES`, publishing into ``base/published`` and archiving to
  ``base/handover.tar.gz``; the main job without its attack."""
  c = experiment.load_config(f"{REPO / 'configs' / 'gpu_acceptance.py'}:cpu_rehearsal")
  c.stages = STAGES
  c.publish_dir, c.archive = str(base / "published"), str(base / "handover.tar.gz")
  c.pate_mnist.attack.enabled = False
  c.pate_g.num_seeds = 1  # then its student is the main job's: compiled once
  return c


def run_acceptance(base, caplog, capsys):
  """The command as its script runs it, into ``base/work``: the lines printed or logged
  without "private" (paths and timings replaced)."""
  caplog.clear()
  capsys.readouterr()
  with caplog.at_level(logging.WARNING):  # the script's level (quiet_logs)
    experiment.run_and_report(ga.run, ga.report, rehearsal_config(base), str(base / "work"))
  printed = capsys.readouterr()
  logged = "\n".join(r.getMessage() for r in caplog.records)
  return timeless_lines("\n".join([printed.out, printed.err, logged]), base)


def published_record(path, base):
  """A published results.json as an attacker may read it: outside ``private`` and timings,
  without the released ε; of a file private as a whole, only its disclosure, but for the
  acceptance summary, whose targets not marked private RESULTS.md renders (and the runs'
  statuses)."""
  record = json.loads(path.read_text().replace(str(base), "<dir0>"))
  if not rp.disclosed_private(record, path.parent.name):
    record = drop(publishable(record, MAIN_JOB_TIMINGS), RELEASED_EPSILON)
    return drop(record, ("results", "aggregate") + RELEASED_EPSILON[1:])
  if path.parent.name != "acceptance_gpu":
    return record["disclosure"]
  r = record["results"]
  return {"private_targets": sorted(k for k, t in r["targets"].items() if t["private"]),
          "targets": {k: t for k, t in r["targets"].items()
                      if not t["private"] and k not in TIMED_TARGETS},
          "status": {k: s["status"] for k, s in r["status"].items()},
          "runs_done": r["runs_done"]}


def published(base):
  """Every published file (by path under ``base/published``): its mode, and what it holds
  that may be read (:func:`published_record`; a PNG's bytes)."""
  root = base / "published"
  out = {}
  for path in sorted(p for p in root.rglob("*") if p.is_file()):
    what = (published_record(path, base) if path.suffix == ".json" else path.read_bytes())
    out[str(path.relative_to(root))] = (path.stat().st_mode & 0o777, what)
  return out


def rendered(base):
  """RESULTS.md rendered from ``base/published``: its lines not marked private."""
  text = rp.render(base / "published", optional_rows=rp.GPU_ROWS)
  return publishable_lines(text, base / "published")


def archive_public(base):
  """The hand-over archive's members (name -> mode), and the contents of those readable by
  others (``labels.npz``: its members but the salted digest of the votes)."""
  names, readable = {}, {}
  with tarfile.open(base / "handover.tar.gz") as tar:
    for m in tar.getmembers():
      names[m.name] = m.mode & 0o777
      if m.isfile() and m.mode & 0o077:
        data = tar.extractfile(m).read()
        readable[m.name] = data
        if m.name.endswith("labels.npz"):
          path = base / "labels_from_archive.npz"
          path.write_bytes(data)
          readable[m.name] = {k: (v.tolist(), size) for k, (v, size)
                              in npz_members(path).items() if k != "votes_digest"}
  return names, readable


@pytest.mark.slow  # the rehearsal's main job, PATE-G and baseline, twice: 2-3 min cold
def test_the_gpu_acceptance_publishes_nothing_a_neighbouring_training_record_moves(
    tmp_path, caplog, capsys, monkeypatch, data_dir, fixed_secret_key):
  """The acceptance command (stages 1 and 3, secret noise) on MNIST and on its neighbour
  (one training label changed): the votes move, the released labels do not, and so every
  published copy, the report rendered from them, the archive's members readable by others
  and every line without "private" are the same, but timings, salted digests and the
  released ε; the private parts see the neighbour."""
  monkeypatch.setenv("PATE_JAX_DATA_DIR", str(data_dir))
  runs = {}
  for d, replaced in (("x", None), ("y", 0)):
    private_images(monkeypatch, replaced)
    lines = run_acceptance(tmp_path / d, caplog, capsys)
    runs[d] = {"lines": lines, "published": published(tmp_path / d),
               "report": rendered(tmp_path / d), "archive": archive_public(tmp_path / d)}
  x, y = runs["x"], runs["y"]
  wx, wy = (tmp_path / d / "work" for d in "xy")
  # The neighbour moved votes, on rows the labels asked too; not the released labels.
  vx, vy = (votes_lib.load_votes(w / "pate_mnist" / "teachers")["votes"] for w in (wx, wy))
  moved = (vx != vy).any(axis=1)
  lx, ly = (npz_members(w / "pate_mnist" / "aggregate" / "labels.npz") for w in (wx, wy))
  assert moved[lx["query_index"][0]].any()
  np.testing.assert_array_equal(lx["labels"][0], ly["labels"][0])
  # Everything published, with the modes of the files.
  assert x["published"].keys() == y["published"].keys()
  assert {"pate_mnist_gpu/results.json", "pate_mnist_teachers_gpu/results.json",
          "pate_mnist_student_gpu/results.json", "pate_g_shift_100_gpu/results.json",
          "mnist_baseline_gpu/results.json", "acceptance_gpu/results.json"} <= set(
              x["published"])
  for path, (mode, what) in x["published"].items():
    assert (mode, what) == y["published"][path], path
  assert x["report"] == y["report"]
  assert x["archive"] == y["archive"]
  assert without_released(x["lines"]) == without_released(y["lines"])
  assert modes(files(wx)) == modes(files(wy))
  # The neighbour is seen by what is private: the main job's teachers, the baseline.
  for run, key in (("pate_mnist", "teachers"), ("mnist_baseline", "teacher_test_accuracy")):
    px, py = (json.loads((w / run / "results.json").read_text())["results"]["private"][key]
              for w in (wx, wy))
    assert px != py, (run, key)
