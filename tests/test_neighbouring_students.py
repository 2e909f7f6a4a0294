"""Neighbouring data: the active learner and the KD-GAN publish nothing a neighbour moves.

As tests/test_neighbouring_votes.py (whose helpers these tests import), each test runs a
stage twice, on data and on its neighbour, with the same noise (``rng.secret_key`` replaced
by a constant key), and compares everything an attacker holding the run's files and screen
could read outside the parts marked private.

The active learner (configs/student_active.py) chooses its queries from the public pool and
the labels released before, so a neighbour that moves one teacher's vote on a row it never
asks, or on a row it asks whose released label the vote cannot change (a gap of 150 votes),
leaves everything it publishes the same: ``results.json`` outside ``private`` (its rounds,
queries, ε), every line without "private", the files with their modes, and the student's
checkpoint of every round. The data-dependent ε, private, sees the asked row's neighbour.

The KD-GAN (configs/kd_gan_sound.py) is a research measurement, private as a whole (README,
*What you may publish*), its sound release included: its ``results.json`` says so, every
line it prints is marked but the closing lines naming its files, and its work directory is
its owner's (the sizes of the files in it too). What it publishes is those lines and the
names and modes of its files. Its neighbour is one training record replaced: the record is
among the private images its teacher trains on (one label changed), and in one PATE
teacher's shard, whose vote and soft counts move on every row (by at most
``SOFT_COUNT_SCALE`` each: the sound release's sensitivity). What it publishes is the same;
the private parts (the sound release, the teacher) see the neighbour.

The KD-GAN's discriminator ablation (configs/kd_gan_ablation.py) is a measurement too,
private as a whole, with the same teacher and students of its own (a KD-only and a joint
fit per variant). On the same neighbour (the teacher's training record replaced; it
releases nothing from votes) it publishes the same lines and files' names and modes, in an
owner-only work directory whose checkpoints, the teacher's and every student's, are
owner-only to their last file; the teacher and both students see the neighbour.
"""

from __future__ import annotations

import json
import logging
import re

import numpy as np
import pytest

from pate_jax import experiment
from pate_jax import students as students_lib
from pate_jax import votes as votes_lib
from test_neighbouring_votes import (  # pylint: disable=unused-import
    REPO, STUDENT_TIMINGS, checkpoint_arrays, digits_votes, files, fixed_secret_key, modes,
    neighbour, private_part, publishable, publishable_lines)

ROUND_SIZES = (8, 8)

_PRINTED_SECONDS = re.compile(r"('\w*seconds': )[0-9.e+-]+")
"""A timing in a printed record ("'train_seconds': 0.58", an active round's line)."""


def timeless_lines(text, base):
  """``publishable_lines`` of ``text``, each timing in a printed record as "<seconds>"."""
  return publishable_lines(_PRINTED_SECONDS.sub(r"\1<seconds>", text), base)


# --- The active learner --------------------------------------------------------------------


def run_stage(stage, config, base, caplog, capsys):
  """Runs ``stage`` (its ``run`` and ``report``, as its script does) in ``base / "work"``;
  returns its results.json, every line printed or logged that does not say "private"
  (timings replaced) and the files under ``base``."""
  caplog.clear()
  capsys.readouterr()
  # The scripts' level (quiet_logs: orbax logs every save at INFO).
  with caplog.at_level(logging.WARNING):
    experiment.run_and_report(stage.run, stage.report, config, str(base / "work"))
  printed = capsys.readouterr()
  logged = "\n".join(r.getMessage() for r in caplog.records)
  return {"results": json.loads((base / "work" / "results.json").read_text()),
          "lines": timeless_lines("\n".join([printed.out, printed.err, logged]), base),
          "files": files(base)}


def active_config(teachers, base):
  """configs/student_active.py's CPU variant, a few steps per round, GNMax at σ 40 with
  secret noise from the teachers' budget."""
  c = experiment.load_script(REPO / "configs" / "student_active.py").get_config("cpu")
  c.votes_dir = str(teachers)
  c.num_steps, c.segment_steps, c.batch_size = 6, 3, 8
  c.active.round_sizes = ROUND_SIZES
  a = c.aggregate
  a.mechanism, a.sigma, a.epsilon_max = "gnmax", 40.0, 6.0
  a.budget_registry = str(base / "registry")
  return c


def run_active(base, arrays, caplog, capsys, monkeypatch):
  """The active learner as its script runs it (experiments/train_student.py) on votes
  ``arrays`` (``digits_votes``'s), teachers in ``base/teachers``, work directory
  ``base/work``: its results.json, its printed and logged lines that do not say "private",
  its files, and the pool rows it charged, in query order (private: read to choose the
  neighbour)."""
  from pate_jax.stages import student  # pylint: disable=g-import-not-at-top
  votes, y, index, num_pool = arrays
  teachers = base / "teachers"
  teachers.mkdir(parents=True)
  votes_lib.save_votes(teachers / "votes.npz", votes, y, index=index, num_pool=num_pool,
                       dataset="digits", private_data="ef" * 32)
  charged, learn = [], students_lib.active_learning

  def spy(*args, **kwargs):
    out = learn(*args, **kwargs)
    charged.append(np.asarray(out.charged_index))
    return out

  monkeypatch.setattr(students_lib, "active_learning", spy)
  return {**run_stage(student, active_config(teachers, base), base, caplog, capsys),
          "charged": charged[0]}


def round_checkpoints(work):
  """The arrays of each round's student checkpoint, by round."""
  rounds = sorted((work / "checkpoints").glob("round_*"))
  assert len(rounds) == len(ROUND_SIZES), rounds
  return {d.name: checkpoint_arrays(d) for d in rounds}


@pytest.mark.slow  # two active learners of two rounds each: 42 s cold on the 2-core CPU
@pytest.mark.parametrize("case", ["unasked", "asked"])
def test_the_active_learner_publishes_nothing_a_neighbour_moves(tmp_path, caplog, capsys,
                                                                monkeypatch,
                                                                fixed_secret_key, case):
  """The active learner on votes and on a neighbour (one teacher's vote moved on a pool row
  it never asks, or on one its second round asks, whose label the vote cannot change): the
  same queries, and everything it publishes the same."""
  arrays = digits_votes()
  votes, y, index, num_pool = arrays
  x = run_active(tmp_path / "x", arrays, caplog, capsys, monkeypatch)
  asked = x["charged"]
  assert asked.size == sum(ROUND_SIZES)
  if case == "unasked":
    row = int(np.setdiff1d(np.arange(num_pool), asked)[0])
  else:  # a row the second round chose (least confident), 150 votes at least ahead
    row = int(asked[ROUND_SIZES[0]])
  y_ = run_active(tmp_path / "y", (neighbour(votes, row), y, index, num_pool), caplog,
                  capsys, monkeypatch)
  np.testing.assert_array_equal(x["charged"], y_["charged"])  # the same queries
  rx, ry = (publishable(r["results"], STUDENT_TIMINGS) for r in (x, y_))
  assert rx["results"]["active_rounds"] and rx == ry
  assert x["lines"] == y_["lines"]
  assert x["files"].keys() == y_["files"].keys()
  assert modes(x["files"]) == modes(y_["files"])
  assert x["files"]["teachers/votes.npz"] == y_["files"]["teachers/votes.npz"]
  cx, cy = (round_checkpoints(tmp_path / d / "work") for d in "xy")
  assert cx.keys() == cy.keys()
  for r, arrays_x in cx.items():
    assert arrays_x.keys() == cy[r].keys() and arrays_x
    for name, value in arrays_x.items():
      np.testing.assert_array_equal(value, cy[r][name], err_msg=f"{r} {name}")
  # The neighbour is seen by the private part where the row was asked (not vacuous).
  if case == "asked":
    assert private_part(x) != private_part(y_)
  else:
    assert private_part(x) == private_part(y_)


# --- The KD-GAN and its sound release --------------------------------------------------------

TEACHER_STEPS, TEACHER_BATCH = 20, 128
PRIVATE_IMAGES = TEACHER_STEPS * TEACHER_BATCH
"""The KD-GAN teacher's private training images here: MNIST's first 2,560, one epoch of its
steps, so that it trains on the record the neighbour replaces."""


def sound_votes(num_teachers=250, seed=0):
  """votes.npz's arrays of ``num_teachers`` simulated teachers on MNIST's 9,000-row student
  pool: hard votes, labels and soft counts at temperature 1 (the sound release's input),
  each row's probability at least 0.5 on its label."""
  gen = np.random.default_rng(seed)
  y = gen.integers(0, 10, 9_000)
  probs = 0.5 * np.eye(10)[y] + 0.5 * gen.dirichlet(np.ones(10), 9_000)
  votes = np.stack([gen.multinomial(num_teachers, p) for p in probs]).astype(np.int32)
  counts = np.floor(probs * votes_lib.SOFT_COUNT_SCALE * num_teachers).astype(np.int32)
  return votes, y, counts[None]


def neighbouring_teacher(votes, counts):
  """The votes and soft counts with one teacher's output moved on every row (one record of
  its shard replaced): its vote from each row's plurality to the next class, and half its
  probability (``SOFT_COUNT_SCALE / 2`` of the integer counts) from each row's largest
  class to the next."""
  rows = np.arange(votes.shape[0])
  moved, a = votes.copy(), votes.argmax(1)
  moved[rows, a] -= 1
  moved[rows, (a + 1) % votes.shape[1]] += 1
  soft, b = counts.copy(), counts[0].argmax(1)
  half = votes_lib.SOFT_COUNT_SCALE // 2
  assert (soft[0, rows, b] >= half).all()  # (a teacher's share fits in each row's sum)
  soft[0, rows, b] -= half
  soft[0, rows, (b + 1) % votes.shape[1]] += half
  return moved, soft


def private_images(monkeypatch, replaced=None):
  """MNIST as the KD-GAN loads it, its training split cut to its first
  :data:`PRIVATE_IMAGES` (the private data here), with the label of training row
  ``replaced`` (None: none) moved to the next class: a neighbouring private dataset."""
  from pate_jax.data import _images  # pylint: disable=g-import-not-at-top
  load = _images._load_local  # pylint: disable=protected-access

  def loader(name, directory):
    splits = load(name, directory)
    if name != "mnist" or splits is None:
      return splits
    images, labels = splits["train"]
    labels = labels[:PRIVATE_IMAGES].copy()
    if replaced is not None:
      labels[replaced] = (labels[replaced] + 1) % 10
    return {**splits, "train": (images[:PRIVATE_IMAGES], labels)}

  monkeypatch.setattr(_images, "_load_local", loader)


def kd_gan_config(teachers, base):
  """configs/kd_gan_sound.py's smoke variant, a few steps: one seed, 200 public inputs,
  the sound release of ``teachers``' soft counts with secret noise."""
  c = experiment.load_config(f"{REPO / 'configs' / 'kd_gan_sound.py'}:smoke")
  c.num_seeds, c.audit_rounds = 1, 0
  c.teacher.num_steps, c.teacher.batch_size = TEACHER_STEPS, TEACHER_BATCH
  c.curve.num_public, c.curve.max_epsilon = 200, 1.0
  c.sound.votes_dir, c.budget_registry = str(teachers), str(base / "registry")
  return c


def assert_owner_only(work):
  """The work directory ``work`` is owner-only (its files' sizes are its owner's), and so is
  every file and directory of its checkpoints (the teacher's, the students'), which a copy
  taken out of it keeps."""
  assert work.stat().st_mode & 0o077 == 0
  wide = [str(f) for c in ("teacher", "checkpoints")
          for f in (work / c).rglob("*") if f.stat().st_mode & 0o077]
  assert not wide and (work / "teacher").is_dir() and (work / "checkpoints").is_dir(), wide


def assert_published_alike(x: dict, y: dict, base) -> None:
  """Two runs private as a whole (``run_stage``'s records, in ``base/x`` and ``base/y``):
  the same unmarked lines, only those naming files; the same files' names and modes; every
  work directory its owner's, checkpoints included."""
  assert x["lines"] == y["lines"]
  assert all(l.startswith(("results: ", "figures: ")) for l in x["lines"] if l), x["lines"]
  assert x["files"].keys() == y["files"].keys()
  assert modes(x["files"]) == modes(y["files"])
  for d in "xy":
    assert_owner_only(base / d / "work")


def run_kd_gan(base, arrays, caplog, capsys):
  """The KD-GAN as experiments/train_kd_gan.py runs it on the sound votes ``arrays``
  (:func:`sound_votes`'s), teachers in ``base/teachers``, work directory ``base/work``: its
  results.json, its printed and logged lines that do not say "private", and its files."""
  from pate_jax import data as data_lib  # pylint: disable=g-import-not-at-top
  from pate_jax.stages import kd_gan  # pylint: disable=g-import-not-at-top
  votes, y, counts = arrays
  teachers = base / "teachers"
  teachers.mkdir(parents=True)
  votes_lib.save_votes(teachers / "votes.npz", votes, y, dataset="mnist",
                       index=data_lib.student_split("mnist", 10_000).pool_index,
                       soft_counts=counts, temperatures=(1.0,), private_data="ab" * 32)
  return run_stage(kd_gan, kd_gan_config(teachers, base), base, caplog, capsys)


@pytest.mark.slow  # two small KD-GAN runs with their sound releases: about 30 s (45 % of before)
def test_the_kd_gan_publishes_nothing_a_neighbouring_training_record_moves(
    tmp_path, caplog, capsys, monkeypatch, data_dir, fixed_secret_key):
  """The KD-GAN's sound variant (secret noise) on private data and on its neighbour: the
  KD-GAN teacher's training record 0 replaced, and the PATE teacher whose shard held it
  moved on every row. Its results.json and lines are private as a whole; the lines left
  unmarked (the files it wrote) and the files' names and modes are the same, in a work
  directory that is its owner's; the sound release and the teacher see the neighbour."""
  from pate_jax.stages import kd_gan  # pylint: disable=g-import-not-at-top
  monkeypatch.setenv("PATE_JAX_DATA_DIR", str(data_dir))
  votes, y, counts = sound_votes()
  private_images(monkeypatch)
  x = run_kd_gan(tmp_path / "x", (votes, y, counts), caplog, capsys)
  private_images(monkeypatch, replaced=0)
  y_ = run_kd_gan(tmp_path / "y", (votes, y) + neighbouring_teacher(votes, counts)[1:],
                  caplog, capsys)
  for r in (x, y_):
    assert r["results"]["disclosure"].startswith("private")  # private as a whole
    assert r["results"]["results"]["sound"]                  # (the release was trained on)
  assert_published_alike(x, y_, tmp_path)
  # The neighbour is seen by what is private: the released soft labels and the teacher.
  rx, ry = (np.load(tmp_path / d / "work" / kd_gan.SOUND_RELEASE) for d in "xy")
  assert not np.array_equal(rx["targets"], ry["targets"])
  tx, ty = (checkpoint_arrays(tmp_path / d / "work" / "teacher") for d in "xy")
  assert any(not np.array_equal(v, ty[k]) for k, v in tx.items())


# --- The KD-GAN's discriminator ablation ----------------------------------------------------


def ablation_config():
  """configs/kd_gan_ablation.py's smoke variant, smaller: one seed, one variant (its
  KD-only and joint fits), the teacher trained on the record the neighbour replaces."""
  c = experiment.load_config(f"{REPO / 'configs' / 'kd_gan_ablation.py'}:smoke")
  c.num_seeds, c.num_segments, c.variants = 1, 1, (("paper", {}),)
  c.teacher.num_steps, c.teacher.batch_size = TEACHER_STEPS, TEACHER_BATCH
  return c


@pytest.mark.slow  # two small ablations (a teacher, two one-epoch students each): 13-30 s
def test_the_kd_gan_ablation_publishes_nothing_a_neighbouring_training_record_moves(
    tmp_path, caplog, capsys, monkeypatch, data_dir):
  """The KD-GAN's discriminator ablation (experiments/ablate_kd_gan.py) on private data
  and on its neighbour (the teacher's training record 0 replaced): its results.json and
  lines are private as a whole; the lines left unmarked (the files it wrote) and the
  files' names and modes are the same, in a work directory that is its owner's, with
  owner-only checkpoints; the teacher and the students see the neighbour."""
  from pate_jax.stages import kd_gan_ablation  # pylint: disable=g-import-not-at-top
  monkeypatch.setenv("PATE_JAX_DATA_DIR", str(data_dir))
  runs = {}
  for d, replaced in (("x", None), ("y", 0)):
    private_images(monkeypatch, replaced)
    runs[d] = run_stage(kd_gan_ablation, ablation_config(), tmp_path / d, caplog, capsys)
  x, y_ = runs["x"], runs["y"]
  for r in (x, y_):
    assert r["results"]["disclosure"].startswith("private")  # private as a whole
    assert r["results"]["results"]["fits"]["total"] == 2
  assert_published_alike(x, y_, tmp_path)
  # The neighbour is seen by what is private: the teacher and both students.
  for c in ("teacher", "checkpoints/kd_only", "checkpoints/joint_paper"):
    cx, cy = (checkpoint_arrays(tmp_path / d / "work" / c) for d in "xy")
    assert cx.keys() == cy.keys() and cx
    assert any(not np.array_equal(v, cy[k]) for k, v in cx.items()), c
