"""Resume integrity: a resume continues the same run or is refused;
a corrupted checkpoint falls back to an intact one; nothing hangs; one run per workdir.

The unit tests use a tiny pytree; the script tests share one finished two-teacher run
(``finished``), copied per test, so that each adds one short run at most. Anything that
hung before the fix runs in a subprocess bounded by ``TIMEOUT_S``.
"""

from __future__ import annotations

import functools
import json
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile
import textwrap

import chex
import jax
import jax.numpy as jnp
import numpy as np
import orbax.checkpoint as ocp
import pytest

from pate_jax import checkpoint, experiment
from pate_jax import votes as votes_lib

import _scripts  # tests/_scripts.py  # pylint: disable=g-bad-import-order

REPO = pathlib.Path(__file__).resolve().parent.parent
TEACHERS = REPO / "experiments" / "train_teachers.py"
RUN_PATE = REPO / "experiments" / "run_pate.py"
TIMEOUT_S = 90  # a failure is expected within seconds; the old code hung forever
TINY = {"dataset": "digits", "num_teachers": 2, "num_steps": 4, "checkpoint_every": 2,
        "gap_plot": False, "distill_temperatures": (),
        "keep_checkpoints": True, "max_to_keep": 2}  # the fallback tests need two kept steps
TINY_FLAGS = [f"--config.{k}={v}" for k, v in TINY.items() if k != "distill_temperatures"]


def _state(value: float) -> dict:
  return {"w": jnp.full((3, 2), value, jnp.float32), "b": jnp.arange(4, dtype=jnp.int32)}


def _saved(directory, steps=(1, 2, 3), **kwargs) -> None:
  ckpt = checkpoint.Checkpointer(directory, max_to_keep=len(steps), **kwargs)
  for s in steps:
    ckpt.save(s, _state(float(s)))
  ckpt.close()


def _config(**overrides):
  config = experiment.load_script(REPO / "configs" / "mnist_250.py").get_config("cpu")
  config.update({**TINY, **overrides})
  config.model.kwargs.hidden = (16,)
  return config


@pytest.fixture(scope="module")
def script():
  return experiment.load_script(TEACHERS)


@pytest.fixture(scope="module")
def finished(script, tmp_path_factory):
  """A finished tiny run: checkpoints at steps 2 and 4, votes.npz."""
  workdir = tmp_path_factory.mktemp("finished")
  script.run(_config(), str(workdir))
  return workdir


def _copy(src: pathlib.Path, dst: pathlib.Path) -> pathlib.Path:
  shutil.copytree(src, dst)
  (dst / "checkpoints" / checkpoint.LOCK_FILE).unlink(missing_ok=True)
  return dst


def _cli(script_path, workdir, *flags, config="configs/mnist_250.py:cpu"):
  return subprocess.run(
      [sys.executable, str(script_path), f"--config={REPO / config}", f"--workdir={workdir}",
       *flags], cwd=REPO, capture_output=True, text=True, timeout=TIMEOUT_S,
      env=dict(os.environ, PATE_JAX_NO_PROGRESS="1"), check=False)


# ----------------------------------------------------------------------- 9: fingerprints


def test_mismatched_fingerprint_is_refused_naming_fields(tmp_path):
  _saved(tmp_path, fingerprint={"seed": 0, "learning_rate": 1e-3, "max_shift": 2})
  with pytest.raises(checkpoint.ResumeMismatchError) as err:
    checkpoint.Checkpointer(tmp_path, fingerprint={"seed": 1, "learning_rate": 1e-3,
                                                   "max_shift": 3})
  message = str(err.value)
  assert "seed" in message and "max_shift" in message and "learning_rate" not in message
  assert "restart" in message  # says how to start over
  # The same fingerprint resumes.
  with checkpoint.Checkpointer(tmp_path, fingerprint={"seed": 0, "learning_rate": 1e-3,
                                                      "max_shift": 2}) as ckpt:
    state, step = ckpt.restore_or(_state(0.0))
  assert step == 3
  chex.assert_trees_all_equal(state, _state(3.0))


def test_restart_discards_mismatched_checkpoints(tmp_path):
  _saved(tmp_path, fingerprint={"seed": 0})
  with checkpoint.Checkpointer(tmp_path, fingerprint={"seed": 1}, restart=True) as ckpt:
    state, step = ckpt.restore_or(_state(0.0))
    assert step == 0 and ckpt.latest_step() is None
  with checkpoint.Checkpointer(tmp_path, fingerprint={"seed": 1}) as ckpt:
    assert ckpt.restore_or(_state(0.0))[1] == 0  # the new fingerprint is the one stored


def test_a_restart_keeps_the_directory_locked(tmp_path):
  """restart=True discards what the directory holds but not its lock file: a second run
  started meanwhile is refused, not handed a new lock file of its own."""
  (tmp_path / "3").mkdir()  # A step of an earlier run.
  with checkpoint.Checkpointer(tmp_path, restart=True):
    assert not (tmp_path / "3").exists() and (tmp_path / checkpoint.LOCK_FILE).is_file()
    with pytest.raises(checkpoint.LockedError, match="this process"):
      checkpoint.Checkpointer(tmp_path)


def test_checkpoints_without_fingerprint_are_refused(tmp_path):
  _saved(tmp_path)  # written with no fingerprint (e.g. by an older version)
  with pytest.raises(checkpoint.ResumeMismatchError, match="no fingerprint"):
    checkpoint.Checkpointer(tmp_path, fingerprint={"seed": 0})


@pytest.mark.slow
def test_train_teachers_refuses_a_changed_config(script, finished, tmp_path):
  workdir = _copy(finished, tmp_path / "run")
  before = (workdir / "results.json").read_bytes()
  changed = _config(seed=1, learning_rate=3e-3, train_subset=1000, max_shift=1)
  with pytest.raises(ValueError) as err:
    script.run(changed, str(workdir))
  for field in ("seed", "learning_rate", "train_subset", "max_shift"):
    assert field in str(err.value)
  assert (workdir / "results.json").read_bytes() == before  # nothing recorded
  with changed.unlocked():
    changed.restart = True
  with pytest.raises(checkpoint.ResumeMismatchError, match="labels answered from these"):
    script.run(changed, str(workdir))  # the finished votes are never discarded
  assert (workdir / "results.json").read_bytes() == before
  (workdir / "votes.npz").unlink()  # no votes (none paid from): a restart discards checkpoints
  results = script.run(changed, str(workdir))
  assert results["resumed_from_step"] == 0


# ------------------------------------------------------------------ 10: corrupted latest


def _truncate(step_dir: pathlib.Path) -> None:
  for f in sorted(p for p in step_dir.rglob("*") if p.is_file() and p.stat().st_size > 8):
    f.write_bytes(f.read_bytes()[:len(f.read_bytes()) // 2])


def _garbage(step_dir: pathlib.Path) -> None:
  for f in (p for p in step_dir.rglob("*") if p.is_file()):
    f.write_bytes(b"\x00garbage" * 7)


def _no_metadata(step_dir: pathlib.Path) -> None:
  for f in list(step_dir.rglob("*")):
    if f.is_file() and (f.name.endswith("METADATA") or f.name == "manifest.ocdbt"):
      f.unlink()


def _no_step_metadata(step_dir: pathlib.Path) -> None:
  (step_dir / "_CHECKPOINT_METADATA").unlink()  # the arrays are intact: this restores


def test_checkpoint_without_step_metadata_still_restores(tmp_path):
  _saved(tmp_path, fingerprint={"seed": 0})
  _no_step_metadata(tmp_path / "3")
  with checkpoint.Checkpointer(tmp_path, fingerprint={"seed": 0}) as ckpt:
    state, step = ckpt.restore_or(_state(0.0))
    assert ckpt.bad_steps == ()
  assert step == 3
  chex.assert_trees_all_equal(state, _state(3.0))


@pytest.mark.parametrize("corrupt", [_truncate, _garbage, _no_metadata])
def test_corrupted_latest_falls_back_to_previous(tmp_path, corrupt, capfd, caplog):
  _saved(tmp_path / "ckpt", fingerprint={"seed": 0})
  corrupt(tmp_path / "ckpt" / "3")
  capfd.readouterr()
  with checkpoint.Checkpointer(tmp_path / "ckpt", fingerprint={"seed": 0}) as ckpt:
    state, step = ckpt.restore_or(_state(0.0))
    assert ckpt.bad_steps == (3,)
    ckpt.save(3, _state(3.0))  # the bad step is out of the way: it can be written again
  assert step == 2
  chex.assert_trees_all_equal(state, _state(2.0))
  out = capfd.readouterr()
  logged = caplog.text + out.out + out.err
  assert "step 3" in logged and str(tmp_path / "ckpt" / "3") in logged
  assert len(logged.splitlines()) < 20  # a warning, not pages of tracebacks


def test_a_step_left_half_deleted_below_the_restored_one_is_removed(tmp_path):
  """Killed while orbax deleted an old step, a run leaves it half-deleted; a resume with
  nothing left to train saves no more, so the restore removes what max_to_keep would not
  keep (and the next save still works)."""
  _saved(tmp_path, fingerprint={"seed": 0})   # steps 1, 2, 3 (max_to_keep 3)
  for f in (tmp_path / "1").rglob("*METADATA"):
    f.unlink()                                # half-deleted
  with checkpoint.Checkpointer(tmp_path, max_to_keep=2, fingerprint={"seed": 0}) as ckpt:
    state, step = ckpt.restore_or(_state(0.0))
    assert step == 3 and sorted(int(p.name) for p in tmp_path.iterdir()
                                if p.name.isdigit()) == [2, 3]
    ckpt.save(4, _state(4.0))
  chex.assert_trees_all_equal(state, _state(3.0))
  assert sorted(int(p.name) for p in tmp_path.iterdir() if p.name.isdigit()) == [3, 4]


def test_empty_step_directory_does_not_block_resume(tmp_path):
  _saved(tmp_path, fingerprint={"seed": 0})
  (tmp_path / "99").mkdir()
  with checkpoint.Checkpointer(tmp_path, fingerprint={"seed": 0}) as ckpt:
    state, step = ckpt.restore_or(_state(0.0))
    assert ckpt.bad_steps == (99,)
  assert step == 3
  chex.assert_trees_all_equal(state, _state(3.0))


def test_nothing_restores_starts_over(tmp_path):
  _saved(tmp_path, steps=(1,), fingerprint={"seed": 0})
  _garbage(tmp_path / "1")
  with checkpoint.Checkpointer(tmp_path, fingerprint={"seed": 0}) as ckpt:
    state, step = ckpt.restore_or(_state(0.0))
  assert step == 0
  chex.assert_trees_all_equal(state, _state(0.0))


@pytest.mark.slow
def test_train_teachers_falls_back_and_ends_bit_identical(script, finished, tmp_path):
  workdir = _copy(finished, tmp_path / "run")
  _garbage(workdir / "checkpoints" / "4")
  (workdir / "votes.npz").unlink()  # else the finished run's votes are reused, untrained
  results = script.run(_config(), str(workdir))
  assert results["resumed_from_step"] == 2
  np.testing.assert_array_equal(votes_lib.load_votes(workdir)["votes"],
                                votes_lib.load_votes(finished)["votes"])


def test_the_last_segment_saves_only_the_final_keys_and_they_restore_there(tmp_path):
  """run_segments(final_keys=...) saves the whole state after every segment but the last,
  and only those entries after it; restore_or takes the rest from the fresh state at the
  final step, and refuses to go on training from a light save, naming the restart flag."""
  def segment(state, start, n):
    return {"w": state["w"] + n, "b": state["b"] + 1}, None

  with checkpoint.Checkpointer(tmp_path, fingerprint={"seed": 0}, max_to_keep=3) as ckpt:
    out = checkpoint.run_segments(segment, _state(0.0), start=0, total=5, segment_steps=2,
                                  ckpt=ckpt, final_keys=("w",))
    ckpt.wait()
    assert ckpt._saved_keys(4) == {"w", "b"} and ckpt._saved_keys(5) == {"w"}
  fresh = _state(-1.0)
  with checkpoint.Checkpointer(tmp_path, fingerprint={"seed": 0}) as ckpt:
    state, step = ckpt.restore_or(fresh, final_step=5, final_keys=("w",))
  assert step == 5
  chex.assert_trees_all_equal(state, {"w": out.state["w"], "b": fresh["b"]})
  with checkpoint.Checkpointer(tmp_path, fingerprint={"seed": 0}) as ckpt:
    with pytest.raises(checkpoint.ResumeMismatchError, match=r"holds only \['w'\].*restart"):
      ckpt.restore_or(fresh, final_step=8, final_keys=("w",))
    assert not (tmp_path / checkpoint.CORRUPT_DIR).exists()  # refused, not set aside


def test_a_segments_record_is_written_before_its_checkpoint_starts(tmp_path):
  """A checkpoint is written asynchronously: started before its segment's record, it could
  be on disk without it, and a run killed between the two resumed without that record for
  good (its final accuracy, its curve and its game check read from the records). Each
  record is now written before its checkpoint starts; a checkpoint that never landed
  leaves a record ahead, which a restore drops."""
  calls = []

  class _Recording(checkpoint.Checkpointer):
    def save(self, step, state):
      calls.append(("save", step, [e["step"] for e in self.restore_history(10**9)]))
      return super().save(step, state)

  def segment(state, start, n):
    return {"w": state["w"] + n, "b": state["b"] + 1}, None

  with _Recording(tmp_path, fingerprint={"seed": 0}, max_to_keep=3) as ckpt:
    checkpoint.run_segments(segment, _state(0.0), start=0, total=5, segment_steps=2,
                            ckpt=ckpt, record=lambda state, step, m: {"w": float(state["w"][0, 0])})
    ckpt.wait()
  # Each save saw its own step's record on disk already.
  assert calls == [("save", 2, [2]), ("save", 4, [2, 4]), ("save", 5, [2, 4, 5])]
  with checkpoint.Checkpointer(tmp_path, fingerprint={"seed": 0}) as ckpt:
    assert [e["step"] for e in ckpt.restore_history(4)] == [2, 4]  # a record ahead: dropped


@pytest.mark.slow
def test_teachers_killed_after_their_light_last_save_resume_to_the_same_votes(
    script, finished, tmp_path, monkeypatch):
  """Without kept checkpoints the teachers' last save holds their parameters only; a run
  killed after it (while voting) votes from them without training again."""
  workdir = tmp_path / "killed"
  config = lambda **o: _config(keep_checkpoints=False, **o)  # noqa: E731
  with monkeypatch.context() as m:
    _scripts.kill_teachers_after(m, 4)
    with pytest.raises(_scripts.Killed):
      script.run(config(), str(workdir))
  saved = lambda step: set(ocp.StandardCheckpointHandler().metadata(  # noqa: E731
      workdir / "checkpoints" / str(step) / "default").keys())
  assert saved(4) == {"params"} and saved(2) == {"params", "opt_state"}  # 2: the whole state
  results = script.run(config(), str(workdir))
  assert results["resumed_from_step"] == 4
  np.testing.assert_array_equal(votes_lib.load_votes(workdir)["votes"],
                                votes_lib.load_votes(finished)["votes"])


@pytest.mark.parametrize("name", ["run[1]", "run*", "run?"])
def test_checkpoints_under_a_path_with_glob_characters_restore(tmp_path, name, monkeypatch):
  """orbax globs inside the directory unescaped: under ``run[1]`` no step restored (each
  was moved to corrupt/ and the run started from 0). ``*`` and ``?`` happened to match
  themselves; they take the same path now."""
  monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))  # where the alias goes
  (tmp_path / "tmp").mkdir()
  _saved(tmp_path / name / "ckpt", fingerprint={"seed": 0})
  with checkpoint.Checkpointer(tmp_path / name / "ckpt", fingerprint={"seed": 0}) as ckpt:
    state, step = ckpt.restore_or(_state(0.0))
    assert ckpt.bad_steps == ()
  assert step == 3 and not (tmp_path / name / "ckpt" / checkpoint.CORRUPT_DIR).exists()
  chex.assert_trees_all_equal(state, _state(3.0))
  assert not list((tmp_path / "tmp").iterdir())  # the alias is gone with the checkpointer


# ----------------------------------------------------------------------- 11: no hangs


@pytest.mark.slow
def test_checkpoints_path_is_a_file_fails_fast(tmp_path):
  (tmp_path / "checkpoints").write_text("not a directory")
  proc = _cli(TEACHERS, tmp_path, *TINY_FLAGS)
  assert proc.returncode != 0
  assert "not a directory" in proc.stderr and str(tmp_path / "checkpoints") in proc.stderr


@pytest.mark.slow
def test_run_pate_checkpoints_path_is_a_file_fails_fast(tmp_path):
  (tmp_path / "teachers").mkdir()
  (tmp_path / "teachers" / "checkpoints").write_text("not a directory")
  proc = _cli(RUN_PATE, tmp_path, *[f.replace("--config.", "--config.teachers.")
                                    for f in TINY_FLAGS], config="configs/pate_mnist.py:cpu")
  assert proc.returncode != 0
  assert "not a directory" in proc.stderr


def test_zero_checkpoint_every_is_rejected(tmp_path):
  proc = _cli(TEACHERS, tmp_path, *TINY_FLAGS, "--config.checkpoint_every=0")
  assert proc.returncode != 0 and "checkpoint_every" in proc.stderr


def test_checkpointer_rejects_a_file_and_bad_max_to_keep(tmp_path):
  (tmp_path / "file").write_text("")
  with pytest.raises(NotADirectoryError, match="not a directory"):
    checkpoint.Checkpointer(tmp_path / "file")
  with pytest.raises(ValueError, match="max_to_keep"):
    checkpoint.Checkpointer(tmp_path / "d", max_to_keep=0)
  with pytest.raises(ValueError, match="restart must be a boolean"):
    checkpoint.Checkpointer(tmp_path / "d", restart="False")


_HOLD = textwrap.dedent("""
    import sys, time
    from pate_jax import checkpoint
    lock = checkpoint.DirectoryLock(sys.argv[1])
    lock.acquire()
    print("locked", flush=True)
    time.sleep(120)
""")


def test_second_run_on_a_locked_workdir_fails_fast(script, tmp_path):
  holder = subprocess.Popen([sys.executable, "-c", _HOLD, str(tmp_path)],
                            stdout=subprocess.PIPE, text=True,
                            env=dict(os.environ, PYTHONPATH=_scripts.python_path()))
  try:
    assert holder.stdout.readline().strip() == "locked"
    with pytest.raises(checkpoint.LockedError, match=str(holder.pid)):
      script.run(_config(), str(tmp_path))
    with pytest.raises(checkpoint.LockedError, match=str(holder.pid)):
      checkpoint.DirectoryLock(tmp_path).acquire()
  finally:
    holder.kill()
    holder.wait()
  with checkpoint.DirectoryLock(tmp_path):  # the holder died: its lock is taken over
    assert str(os.getpid()) in (tmp_path / checkpoint.LOCK_FILE).read_text()


def test_tabular_run_on_a_locked_workdir_fails_fast(tmp_path):
  tabular = experiment.load_script(REPO / "experiments" / "tabular.py")
  config = experiment.load_script(REPO / "configs" / "adult_rf.py").get_config("cpu")
  config.data_dir = str(tmp_path / "no_data")  # were the lock ignored: FileNotFoundError
  with checkpoint.DirectoryLock(tmp_path / "work"):
    with pytest.raises(checkpoint.LockedError, match=str(os.getpid())):
      tabular.run(config, tmp_path / "work")


def test_stale_lock_of_a_dead_pid_is_taken_over(tmp_path, caplog):
  dead = subprocess.Popen([sys.executable, "-c", "pass"])
  dead.wait()
  (tmp_path / checkpoint.LOCK_FILE).write_text(f"{dead.pid}\n")
  with checkpoint.DirectoryLock(tmp_path):
    assert (tmp_path / checkpoint.LOCK_FILE).read_text().split()[0] == str(os.getpid())
  assert str(dead.pid) in caplog.text


def test_two_checkpointers_on_one_directory_conflict(tmp_path):
  with checkpoint.Checkpointer(tmp_path):
    with pytest.raises(checkpoint.LockedError, match="this process"):
      checkpoint.Checkpointer(tmp_path)
  with checkpoint.Checkpointer(tmp_path):  # released on exit
    pass


# ----------------------------------------------------------------- 12: config values


@pytest.mark.parametrize("field,value", [
    ("num_steps", 0), ("num_steps", -3), ("learning_rate", float("nan")),
    ("train_subset", -1), ("max_shift", 8), ("batch_size", -2), ("query_chunk", -1),
    ("weight_decay", float("inf")), ("checkpoint_every", -5),
])
def test_bad_config_values_fail_early_naming_the_field(script, tmp_path, field, value):
  with pytest.raises(ValueError, match=field):
    script.run(_config(**{field: value}), str(tmp_path))
  assert not (tmp_path / "checkpoints").exists()  # failed before anything was written


@pytest.mark.slow
def test_checkpoint_past_num_steps_is_refused(script, finished, tmp_path):
  workdir = _copy(finished, tmp_path / "run")
  with pytest.raises(ValueError, match="num_steps"):
    script.run(_config(num_steps=3), str(workdir))


def test_fingerprint_is_flat_and_json_stable():
  fp = checkpoint.fingerprint({"seed": 0, "model": {"name": "mlp", "kwargs": {"hidden": (16,)}},
                               "lr": np.float32(0.5)})
  assert fp == {"seed": 0, "model.name": "mlp", "model.kwargs.hidden": [16], "lr": 0.5}
  assert json.loads(json.dumps(fp)) == fp
  assert checkpoint.fingerprint_diff(fp, {**fp, "seed": 2}) == ["seed: 0 (checkpoint) -> 2 (now)"]


@pytest.mark.parametrize("start,total,every", [(0, 5, 2), (0, 6, 3), (3, 10, 4), (0, 2, 9),
                                               (5, 5, 2)])
def test_segment_lengths_are_the_lengths_run_segments_runs(start, total, every):
  """What a caller compiles ahead (``segment_lengths``) is every length the loop asks of
  its segment, and nothing else."""
  ran = set()

  def segment(state, step, n):
    ran.add(n)
    return state, None

  checkpoint.run_segments(segment, {"w": 0}, start=start, total=total, segment_steps=every)
  assert checkpoint.segment_lengths(total, every, start) == ran


@pytest.mark.parametrize("total,every", [(5, 2), (6, 3), (10, 4), (2, 9), (7, 7), (1, 1)])
def test_a_resumed_loop_runs_only_lengths_compiled_ahead_from_step_0(total, every):
  """A checkpoint is saved where a segment ends: the loop resumed from any of them runs
  only lengths that a caller compiling ahead from step 0 (``segment_lengths(total,
  every)``) compiled."""
  ahead = checkpoint.segment_lengths(total, every)
  for start in [*range(every, total, every), total]:
    assert checkpoint.segment_lengths(total, every, start) <= ahead, start


def test_segment_lengths_names_a_bad_argument():
  with pytest.raises(ValueError, match="segment_steps"):
    checkpoint.segment_lengths(5, 0)
  with pytest.raises(ValueError, match="start: the state is at step 7, past the last step 5"):
    checkpoint.segment_lengths(5, 2, start=7)  # as run_segments: not an empty set


def test_a_record_of_its_own_step_entry_does_not_move_the_segments_step():
  """A record whose metrics hold an entry named as the step (a student's ``step`` metric)
  keeps the segment's step: the history is of steps 2 and 4, step first."""
  out = checkpoint.run_segments(lambda s, t, n: (s, {"step": 0, "loss": 1.0}), {"w": 0},
                                start=0, total=4, segment_steps=2,
                                record=lambda s, t, m: dict(m))
  assert out.history == [{"step": 2, "loss": 1.0}, {"step": 4, "loss": 1.0}]
  assert [list(e) for e in out.history] == [["step", "loss"]] * 2


def test_fingerprint_diff_reports_a_field_only_the_current_run_has():
  old = {"seed": 0, "data.sha256": "ab"}
  new = {"seed": 0, "data.sha256": "cd", "lr": 0.1}
  assert checkpoint.fingerprint_diff(old, new) == [
      "data.sha256: <a digest> (checkpoint) -> <a digest> (now)",
      "lr: <absent> (checkpoint) -> 0.1 (now)"]
  assert checkpoint.fingerprint_diff(new, old, "votes.npz") == [
      "data.sha256: <a digest> (votes.npz) -> <a digest> (now)",
      "lr: 0.1 (votes.npz) -> <absent> (now)"]


def test_a_resumed_loop_reports_every_segment_once_with_its_own_step(tmp_path):
  """Resumed at step 4, the loop restores the records up to 4 from beside the checkpoints,
  drops one ahead of them (step 6: a run killed before its checkpoint landed) and writes its
  own for 6; each record is taken at the step its segment ended at."""
  def segment(state, start, n):
    return {"w": state["w"] + n, "b": state["b"] + 1}, None

  record = lambda state, step, m: {"w": float(state["w"][0, 0]), "seen": step}  # noqa: E731
  with checkpoint.Checkpointer(tmp_path, fingerprint={"seed": 0}, max_to_keep=3) as ckpt:
    first = checkpoint.run_segments(segment, _state(0.0), start=0, total=4, segment_steps=2,
                                    ckpt=ckpt, record=record)
    ckpt.wait()
    assert first.resumed_from == 0
    assert first.history == [{"step": 2, "w": 2.0, "seen": 2}, {"step": 4, "w": 4.0, "seen": 4}]
    ckpt.save_history(first.history + [{"step": 6, "w": -1.0, "seen": 6}])  # ahead: no ckpt
  with checkpoint.Checkpointer(tmp_path, fingerprint={"seed": 0}, max_to_keep=3) as ckpt:
    out = checkpoint.run_segments(segment, _state(100.0), start=4, total=6, segment_steps=2,
                                  ckpt=ckpt, record=record)
    ckpt.wait()
    assert [e["step"] for e in ckpt.restore_history(6)] == [2, 4, 6]
  assert out.resumed_from == 4
  assert out.history == [{"step": 2, "w": 2.0, "seen": 2}, {"step": 4, "w": 4.0, "seen": 4},
                         {"step": 6, "w": 102.0, "seen": 6}]


@jax.jit
def _init_toy(value):
  return {"w": jnp.full((3, 2), value, jnp.float32), "b": jnp.arange(4, dtype=jnp.int32)}


@functools.partial(jax.jit, static_argnums=2, donate_argnums=0)
def _toy_segment(state, start, n):
  return {"w": state["w"] * 0.5 + start + n, "b": state["b"] + n}, jnp.sum(state["w"])


@jax.jit
def _toy_score(state):
  return jnp.mean(state["w"]) + jnp.sum(state["b"])


def _compiles(caplog, fn):
  """``fn()`` and the names of the programs compiled while it ran."""
  caplog.clear()
  with jax.log_compiles(True), caplog.at_level("DEBUG"):
    out = fn()
  return out, [m.getMessage().split(" with ")[0] for m in caplog.records
               if m.getMessage().startswith("Compiling")]


class _Stop(Exception):
  """A loop stopped after a segment."""


def test_a_loop_resumed_in_the_same_process_compiles_no_program_again(tmp_path, caplog):
  """A state restored by orbax is committed to its device, a fresh one (an initialisation's
  output) is not, and jit keys its programs by that too: the loop commits the state it
  starts from, so that a run stopped after a segment and resumed calls the programs the
  uninterrupted run compiled (its segment and what its record evaluates), and ends equal."""
  def segment(state, start, n):
    return _toy_segment(state, jnp.asarray(start, jnp.float32), n)

  def record(state, step, metrics):
    return {"score": float(_toy_score(state)), "sum": float(metrics)}

  def run(directory, start_from_checkpoint, after=None):
    with checkpoint.Checkpointer(directory, fingerprint={"seed": 0}) as ckpt:
      state, step = ckpt.restore_or(_init_toy(1.0))
      assert step == (2 if start_from_checkpoint else 0)
      return checkpoint.run_segments(segment, state, start=step, total=6, segment_steps=2,
                                     ckpt=ckpt, record=record, after_segment=after)

  whole, compiled = _compiles(caplog, lambda: run(tmp_path / "whole", False))
  assert compiled  # the first run compiles the initialisation, the segment and the record

  def stop_at_2(step, n, metrics, entry):
    if step == 2:
      raise _Stop(step)

  with pytest.raises(_Stop):
    run(tmp_path / "cut", False, stop_at_2)
  resumed, compiled = _compiles(caplog, lambda: run(tmp_path / "cut", True))
  assert compiled == []
  assert resumed.resumed_from == 2 and resumed.history == whole.history
  chex.assert_trees_all_equal(resumed.state, whole.state)


def test_an_older_versions_world_readable_records_are_narrowed_even_when_refused(tmp_path):
  """Records an older version wrote 0644 (the fingerprint holds the training rows' digest)
  are made owner-only as soon as their directory is opened: before the fingerprint check,
  so a resume refused for another configuration narrows them too."""
  d = tmp_path / "ckpt"
  with checkpoint.Checkpointer(d, fingerprint={"seed": 0, "data_sha256": "ab"}) as ckpt:
    ckpt.save(1, {"w": jnp.ones(2)})  # a step to resume: the fingerprint is checked
  names = (checkpoint.FINGERPRINT_FILE, checkpoint.COMPLETED_FILE, "history.json")
  for name in names[1:]:  # as an older version left them
    (d / name).write_text("{}\n")
  for name in names:
    os.chmod(d / name, 0o644)
  with pytest.raises(checkpoint.ResumeMismatchError, match="Differing fields: seed"):
    checkpoint.Checkpointer(d, fingerprint={"seed": 1, "data_sha256": "ab"})
  assert {name: oct(os.stat(d / name).st_mode & 0o777) for name in names} == {
      name: "0o600" for name in names}
