"""A finished teachers stage keeps its fingerprint
with its votes, so that votes labels were paid from are never replaced by another run's;
and the messages that refuse a resume name a restart flag the script accepts.

The unit tests write the records by hand; the one end-to-end test (slow) trains a tiny
two-teacher ensemble once and reruns it with changed configs, each refused before it
trains.
"""

from __future__ import annotations

import os
import pathlib
import re

import jax.numpy as jnp
import pytest

from pate_jax import checkpoint, experiment
from pate_jax.stages import teachers  # the stage owns the workdir's votes record

REPO = pathlib.Path(__file__).resolve().parent.parent
TEACHERS = REPO / "experiments" / "train_teachers.py"
FINGERPRINT = {"seed": 0, "num_teachers": 2, "model": {"name": "mlp"}, "data_sha256": "ab"}
OUTPUTS = {"num_steps": 4, "distill_temperatures": []}


def _finished(workdir: pathlib.Path, fingerprint=FINGERPRINT, outputs=OUTPUTS):
  """A workdir as a finished teachers stage leaves it (the votes' contents do not matter)."""
  workdir.mkdir(parents=True, exist_ok=True)
  teachers.write_votes_record(workdir, fingerprint, outputs)
  (workdir / teachers.VOTES_FILE).write_bytes(b"votes")
  return workdir


def _refused(workdir, fingerprint=FINGERPRINT, outputs=OUTPUTS, **kwargs) -> str:
  with pytest.raises(checkpoint.ResumeMismatchError) as err:
    teachers.protect_votes(workdir, fingerprint, outputs, **kwargs)
  message = str(err.value)
  assert isinstance(err.value, experiment.user_errors())  # the script prints one line
  assert "\n" not in message and "another --workdir" in message
  return message


def _hint(message: str) -> str:
  """The restart flag a message offers (``--config.<path>=True``)."""
  flags = re.findall(r"--config\.[\w.]+=True", message)
  assert len(flags) == 1, message
  return flags[0]


def _accepted(flag: str, config_spec: str) -> bool:
  """Whether the script run with ``config_spec`` takes ``flag`` (no "has no field" error)."""
  config = experiment.load_config(str(REPO / config_spec))
  return flag.split("=")[0].endswith(".restart") and not experiment.unknown_overrides(
      [flag], config)


# ------------------------------------------------------------- 1: votes outlive checkpoints


def test_the_run_that_wrote_the_votes_may_go_on(tmp_path):
  teachers.protect_votes(_finished(tmp_path), FINGERPRINT, OUTPUTS)  # reused: no error
  teachers.protect_votes(tmp_path / "fresh", {**FINGERPRINT, "seed": 5}, OUTPUTS,
                         restart=True)  # no votes: anything may run


@pytest.mark.parametrize("field,value", [
    ("seed", 5), ("num_teachers", 3), ("model", {"name": "mnist_cnn"}), ("data_sha256", "cd"),
    ("num_steps", 8)])
def test_another_configuration_does_not_replace_the_votes(tmp_path, field, value):
  workdir = _finished(tmp_path)
  fingerprint, outputs = dict(FINGERPRINT), dict(OUTPUTS)
  (outputs if field in outputs else fingerprint)[field] = value
  message = _refused(workdir, fingerprint, outputs)
  assert "Differing fields: " + field in message and str(workdir / "votes.npz") in message
  assert "labels answered from these votes" in message
  assert "restart" not in message  # discarding paid-for votes is not on offer
  assert (workdir / "votes.npz").read_bytes() == b"votes"


@pytest.mark.parametrize("ledger", ["ledger.npz", "ledger.npz.journal", "research_ledger.npz"])
def test_votes_a_ledger_spent_on_are_not_trained_again_once_deleted(tmp_path, ledger):
  """The labels a ledger released refer to its votes: deleting (or moving) votes.npz does
  not let new teachers write other votes beside that ledger, with or without a restart."""
  workdir = _finished(tmp_path)
  (workdir / ledger).write_bytes(b"")
  teachers.protect_votes(workdir, FINGERPRINT, OUTPUTS)  # the same run goes on
  (workdir / teachers.VOTES_FILE).unlink()
  for kwargs in ({}, {"restart": True}):
    message = _refused(workdir, {**FINGERPRINT, "seed": 5}, OUTPUTS, **kwargs)
    assert ledger in message and "its votes.npz is gone" in message
  assert not (workdir / teachers.VOTES_FILE).exists()


def test_restart_is_refused_once_votes_exist(tmp_path):
  message = _refused(_finished(tmp_path), restart=True,
                     restart_flag="--config.teachers.restart")
  assert message.startswith("refusing --config.teachers.restart=True")
  assert "labels answered from these votes" in message


def test_votes_of_an_older_workdir_are_checked_against_its_completion_record(tmp_path):
  workdir = _finished(tmp_path)
  (workdir / teachers.VOTES_RECORD).unlink()  # written before this record existed
  with checkpoint.Checkpointer(workdir / "checkpoints", fingerprint=FINGERPRINT) as ckpt:
    ckpt.save(4, {"w": jnp.ones(2)})
    ckpt.complete(4, outputs=OUTPUTS)
  teachers.protect_votes(workdir, FINGERPRINT, OUTPUTS)
  assert "seed: 0 (votes.npz) -> 5 (now)" in _refused(workdir, {**FINGERPRINT, "seed": 5})
  (workdir / "checkpoints" / checkpoint.COMPLETED_FILE).unlink()
  assert "no record of the run that wrote it" in _refused(workdir)


@pytest.mark.slow
def test_finished_teachers_refuse_a_changed_config_and_keep_their_votes(tmp_path):
  """The case this guards against: the stage finished (checkpoints deleted), then a rerun with
  ``--config.seed=5`` retrained on another partition and overwrote votes.npz."""
  script = experiment.load_script(TEACHERS)

  def config(**overrides):
    c = experiment.load_config(str(REPO / "configs" / "mnist_250.py") + ":cpu")
    c.update({"dataset": "digits", "num_teachers": 2, "num_steps": 4, "checkpoint_every": 2,
              "gap_plot": False, "distill_temperatures": (), **overrides})
    c.model.kwargs.hidden = (16,)
    return c

  workdir = tmp_path / "teachers"
  script.run(config(), str(workdir))
  assert not [p for p in (workdir / "checkpoints").iterdir() if p.name.isdigit()]
  outputs = {p.name: p.read_bytes() for p in workdir.iterdir() if p.is_file()}
  for changed, named in ((config(seed=5), "seed: 0 (votes.npz) -> 5 (now)"),
                         (config(num_teachers=3), "num_teachers: 2"),
                         (config(num_steps=6), "num_steps: 4"),
                         (config(learning_rate=3e-3), "learning_rate: 0.001"),
                         (config(restart=True), "refusing --config.restart=True")):
    with pytest.raises(checkpoint.ResumeMismatchError) as err:
      script.run(changed, str(workdir))
    assert named in str(err.value) and "another --workdir" in str(err.value)
    assert "\n" not in str(err.value)  # one line when the script prints it
    assert {p.name: p.read_bytes() for p in workdir.iterdir() if p.is_file()} == outputs
  assert script.run(config(), str(workdir))["reused_votes"]  # the same run reuses them
  assert (workdir / "votes.npz").read_bytes() == outputs["votes.npz"]


# ------------------------------------------------------------- 10: a restart hint that works


@pytest.mark.parametrize("restart_flag,config_spec", [
    ("--config.restart", "configs/mnist_250.py:cpu"),  # experiments/train_teachers.py
    ("--config.teachers.restart", "configs/pate_mnist.py:cpu"),  # experiments/run_pate.py
    ("--config.student.restart", "configs/pate_mnist.py:cpu"),
    ("--config.restart", "configs/student_pate_g.py:cpu")])  # experiments/train_student.py
def test_checkpointer_hint_names_the_flag_of_the_calling_script(tmp_path, restart_flag,
                                                                config_spec):
  with checkpoint.Checkpointer(tmp_path, fingerprint={"seed": 0}) as ckpt:
    ckpt.save(1, {"w": jnp.ones(2)})
  with pytest.raises(checkpoint.ResumeMismatchError) as err:
    checkpoint.Checkpointer(tmp_path, fingerprint={"seed": 1},
                            restart_hint=f"{restart_flag}=True")
  flag = _hint(str(err.value))
  assert flag == f"{restart_flag}=True"
  assert _accepted(flag, config_spec)


def test_the_core_names_no_command_line_of_its_own(tmp_path):
  """Without the caller's hint the checkpointer says restart=True, not a script's flag."""
  with checkpoint.Checkpointer(tmp_path, fingerprint={"seed": 0}) as ckpt:
    ckpt.save(1, {"w": jnp.ones(2)})
  with pytest.raises(checkpoint.ResumeMismatchError, match="start over with restart=True, "
                     "which deletes these checkpoints, or use another directory") as err:
    checkpoint.Checkpointer(tmp_path, fingerprint={"seed": 1})
  assert "--" not in str(err.value)


def test_hint_check_rejects_the_old_hint_in_the_main_job():
  assert not _accepted("--config.restart=True", "configs/pate_mnist.py:cpu")


@pytest.mark.parametrize("bad", ["", "  ", 3])
def test_bad_restart_hint_is_rejected(tmp_path, bad):
  with pytest.raises(ValueError, match="restart_hint"):
    checkpoint.Checkpointer(tmp_path, restart_hint=bad)


@pytest.mark.parametrize("bad", ["restart", "--restart", "--config.", 3, None])
def test_bad_restart_flag_is_rejected(bad):
  with pytest.raises(ValueError, match="restart_flag"):
    experiment.check_restart_flag(bad)


@pytest.mark.parametrize("kwargs,config_spec", [
    ({}, "configs/mnist_250.py:cpu"),  # experiments/train_teachers.py
    ({"restart_flag": "--config.teachers.restart"}, "configs/pate_mnist.py:cpu")])
def test_train_teachers_hint_is_accepted_by_the_script_that_runs_it(tmp_path, kwargs,
                                                                    config_spec):
  """Checkpoints of another configuration (no votes yet): refused before training, with
  the restart flag of the script (run_pate passes ``--config.teachers.restart``)."""
  workdir = tmp_path / "teachers"
  with checkpoint.Checkpointer(workdir / "checkpoints", fingerprint={"seed": 99}) as ckpt:
    ckpt.save(2, {"w": jnp.ones(2)})
  config = experiment.load_config(str(REPO / "configs" / "mnist_250.py") + ":cpu")
  config.update({"dataset": "digits", "num_teachers": 2, "num_steps": 4, "checkpoint_every": 2})
  script = experiment.load_script(TEACHERS)
  with pytest.raises(checkpoint.ResumeMismatchError) as err:
    script.run(config, str(workdir), **kwargs)
  assert _accepted(_hint(str(err.value)), config_spec)
  assert not (workdir / "votes.npz").exists() and not (workdir / "results.json").exists()
  with pytest.raises(ValueError, match="restart_flag"):
    script.run(config, str(workdir), restart_flag="teachers.restart")


# ------------------------------------------------------------------ the data's digest


def test_records_that_hold_the_datas_digest_are_owner_only(tmp_path):
  """A plain SHA-256 of the private rows tests any guess at one of them: the checkpoints'
  fingerprint, completion record and history and the votes' record are 0600 whatever the
  umask, an older version's 0644 ones are narrowed, the checkpoints' directory is 0700,
  and a refusal names no digest."""
  old = os.umask(0o022)
  try:
    ckpt_dir = tmp_path / "checkpoints"
    ckpt_dir.mkdir()
    for name in (checkpoint.COMPLETED_FILE, "history.json"):  # as an older version left them
      (ckpt_dir / name).write_text("{}\n")
    fp = {**FINGERPRINT, "data_sha256": "d" * 64}
    with checkpoint.Checkpointer(ckpt_dir, fingerprint=fp) as ckpt:
      ckpt.save_history([{"step": 1, "accuracy": 0.5}])
      ckpt.save(1, {"w": jnp.zeros(2)})
      ckpt.complete(1)
    teachers.write_votes_record(tmp_path, fp, OUTPUTS)
    for path in (ckpt_dir / checkpoint.FINGERPRINT_FILE, ckpt_dir / checkpoint.COMPLETED_FILE,
                 ckpt_dir / "history.json", tmp_path / teachers.VOTES_RECORD):
      assert path.stat().st_mode & 0o777 == 0o600, path
      assert "d" * 64 in path.read_text() or path.name == "history.json"
    # orbax writes the checkpoints themselves with its own modes: no one else may enter,
    # even where the checkpointer writes no owner-only file of its own (no fingerprint).
    assert ckpt_dir.stat().st_mode & 0o777 == 0o700  # made 0755 above, narrowed
    with checkpoint.Checkpointer(tmp_path / "new" / "checkpoints") as ckpt:
      ckpt.save(1, {"w": jnp.zeros(2)})
    assert (tmp_path / "new" / "checkpoints").stat().st_mode & 0o777 == 0o700
  finally:
    os.umask(old)
  diff = checkpoint.fingerprint_diff(fp, {**fp, "data_sha256": "e" * 64, "seed": 1})
  assert diff == ["data_sha256: <a digest> (checkpoint) -> <a digest> (now)",
                  "seed: 0 (checkpoint) -> 1 (now)"]
  assert checkpoint.fingerprint_diff(fp, {k: v for k, v in fp.items() if k != "data_sha256"}
                                     ) == ["data_sha256: <a digest> (checkpoint) -> <absent> (now)"]


def test_a_completion_record_counts_only_for_the_same_outputs(tmp_path):
  """completed(outputs): a run finished with other outputs (another number of steps) is not
  this one's, even under the same fingerprint."""
  with checkpoint.Checkpointer(tmp_path, fingerprint=FINGERPRINT) as ckpt:
    assert ckpt.completed(OUTPUTS) is None
    ckpt.complete(4, outputs=OUTPUTS)
    assert ckpt.completed(OUTPUTS) == 4
    assert ckpt.completed({**OUTPUTS, "num_steps": 8}) is None
    assert ckpt.completed() is None
