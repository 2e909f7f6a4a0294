"""Checkpoints whose contents are private are owner-only file by file, not only through
their directory: a copy taken out of it (``cp -r`` keeps modes) stays its owner's alone.

Private: the teachers' (trained on the private shards), the KD-GAN's teacher (trained
without noise on the private images) and every student of labels that are no release (noise
from a research seed, or none). A student of labels released with secret noise is a release:
its checkpoint keeps orbax's modes.
"""

from __future__ import annotations

import os
import pathlib
import shutil
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from pate_jax import checkpoint, experiment
from pate_jax import kd_gan as K

REPO = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "experiments"))  # the tests import the scripts by name

import train_student  # pylint: disable=g-import-not-at-top,wrong-import-position
import train_teachers  # pylint: disable=g-import-not-at-top,wrong-import-position

TINY_TEACHERS = {"dataset": "digits", "num_teachers": 2, "num_steps": 4,
                 "checkpoint_every": 2, "gap_plot": False, "distill_temperatures": (),
                 "keep_checkpoints": True, "max_to_keep": 2}


@pytest.fixture(autouse=True)
def _umask_022():
  """The usual umask, under which orbax's files are readable by everyone (0644)."""
  old = os.umask(0o022)
  yield
  os.umask(old)


def _wider(directory: pathlib.Path) -> list[str]:
  """What under ``directory`` (itself included) its group or others may read or enter."""
  paths = [directory, *directory.rglob("*")]
  return sorted(f"{p.relative_to(directory)} {p.stat().st_mode & 0o777:o}" for p in paths
                if not p.is_symlink() and p.stat().st_mode & 0o077)


def _saved_files(directory: pathlib.Path) -> list[pathlib.Path]:
  """The files orbax wrote under ``directory``'s step directories."""
  return [p for p in directory.rglob("*") if p.is_file()
          and p.relative_to(directory).parts[0].isdigit()]


def _state(value: float) -> dict:
  return {"w": jnp.full((3, 2), value, jnp.float32), "b": jnp.arange(4, dtype=jnp.int32)}


def test_a_private_checkpointers_saves_are_owner_only_once_complete(tmp_path):
  with checkpoint.Checkpointer(tmp_path / "private", max_to_keep=2, private=True) as ckpt:
    ckpt.save(1, _state(1.0))
    ckpt.save(2, _state(2.0))  # waits for step 1 first: step 1 is complete
    assert [p for p in (tmp_path / "private" / "1").rglob("*") if p.is_file()]
    assert _wider(tmp_path / "private" / "1") == []
    ckpt.wait()
    assert _wider(tmp_path / "private") == []
    assert len(_saved_files(tmp_path / "private")) > 1
  with checkpoint.Checkpointer(tmp_path / "private", private=True) as ckpt:  # restores
    state, step = ckpt.restore_or(_state(0.0))
  assert step == 2 and float(state["w"][0, 0]) == 2.0
  # Not private (a released student's): orbax's own modes, inside an owner-only directory.
  with checkpoint.Checkpointer(tmp_path / "release") as ckpt:
    ckpt.save(1, _state(1.0))
  assert oct((tmp_path / "release").stat().st_mode & 0o777) == "0o700"
  assert _wider(tmp_path / "release" / "1")


def test_a_private_step_is_owner_only_as_it_appears_before_any_wait(tmp_path):
  """Narrowed by orbax's background thread before the step is renamed into place, so a run
  killed after a save but before its next save, wait or close leaves no wider step behind.
  Only orbax's commit marker, written after the narrowing, is wider; it holds a fixed
  sentence and the step's path, nothing saved."""
  with checkpoint.Checkpointer(tmp_path, private=True) as ckpt:
    ckpt.save(1, _state(1.0))
    deadline = time.monotonic() + 60
    while not (tmp_path / "1").is_dir() and time.monotonic() < deadline:
      time.sleep(0.001)  # the save goes on in orbax's thread; this one only looks
    wider = _wider(tmp_path / "1")
    marker = (tmp_path / "1" / "commit_success.txt").read_text()
  assert _saved_files(tmp_path)
  assert [w for w in wider if not w.startswith("commit_success.txt ")] == []
  assert marker.startswith("Checkpoint commit was successful to ")
  assert _wider(tmp_path) == []  # close narrowed the marker too


def test_a_private_checkpointer_narrows_an_earlier_runs_steps_when_opened(tmp_path):
  """Steps saved wider (by an older version, or a run killed before its save was narrowed)
  are made owner-only as soon as their directory is opened, and still restore."""
  with checkpoint.Checkpointer(tmp_path, max_to_keep=2) as ckpt:
    ckpt.save(1, _state(1.0))
    ckpt.save(2, _state(2.0))
  assert _wider(tmp_path / "2")
  with checkpoint.Checkpointer(tmp_path, max_to_keep=2, private=True) as ckpt:
    assert _wider(tmp_path) == []
    state, step = ckpt.restore_or(_state(0.0))
  assert step == 2 and float(state["w"][0, 0]) == 2.0


def test_private_must_be_a_boolean(tmp_path):
  with pytest.raises(ValueError, match="private must be a boolean"):
    checkpoint.Checkpointer(tmp_path, private="yes")


@pytest.mark.slow  # one training, 5 s
def test_the_kd_gan_teachers_checkpoints_are_owner_only(tmp_path):
  """The KD-GAN's teacher, trained without noise on all the private images."""
  rng = np.random.default_rng(0)
  x, y = rng.random((64, 4, 4, 1), np.float32), np.arange(64) % 3
  K.train_teacher(jax.random.key(0), x, y, x, y, model="mlp", model_kwargs={"hidden": (8,)},
                  num_steps=4, batch_size=16, checkpoint_dir=str(tmp_path / "teacher"),
                  log=None)
  assert _saved_files(tmp_path / "teacher")
  assert _wider(tmp_path / "teacher") == []


@pytest.mark.slow
def test_a_teachers_run_leaves_only_owner_only_checkpoints(tmp_path):
  config = experiment.load_script(REPO / "configs" / "mnist_250.py").get_config("cpu")
  config.update(TINY_TEACHERS)
  config.model.kwargs.hidden = (16,)
  train_teachers.run(config, str(tmp_path))
  assert len(_saved_files(tmp_path / "checkpoints")) > 1  # steps 2 and 4, kept
  assert _wider(tmp_path / "checkpoints") == []


def _student_config(votes_dir: pathlib.Path, **overrides):
  c = experiment.load_script(REPO / "configs" / "student_supervised.py").get_config("cpu")
  c.num_steps, c.segment_steps, c.batch_size = 6, 3, 8
  c.aggregate.num_queries, c.aggregate.chunk_size = 30, 32
  c.votes_dir = str(votes_dir)
  c.student.kwargs.model_kwargs = (("hidden", (16,)),)
  c.update(overrides)
  return c


@pytest.mark.slow
@pytest.mark.parametrize("labels, noise_seed, private", [
    ("noisy", 0, True),           # a research seed: the run is private as a whole
    ("plurality", None, True),    # the teachers' un-noised labels
    ("noisy", None, False),       # secret noise: the student is a release
])
def test_a_students_checkpoints_are_owner_only_unless_it_is_a_release(
    tmp_path, digits_votes_dir, labels, noise_seed, private):
  votes_dir = shutil.copytree(digits_votes_dir, tmp_path / "teachers")  # the ledger goes here
  c = _student_config(votes_dir, labels=labels)
  c.aggregate.noise_seed = noise_seed
  workdir = tmp_path / "student"
  r = train_student.run(c, str(workdir))
  assert bool(r.get("noise_source", {}).get("public")) == (noise_seed is not None)
  assert _saved_files(workdir / "checkpoints")
  wider = _wider(workdir / "checkpoints")
  assert (wider == []) == private, wider
  assert oct((workdir / "checkpoints").stat().st_mode & 0o777) == "0o700"
  again = train_student.run(c, str(workdir))  # the checkpoint restores
  assert again["resumed_from_step"] == 6
