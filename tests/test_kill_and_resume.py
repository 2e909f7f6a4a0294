"""A run killed at a write resumes without losing work, spending twice, or leaving private
values outside their files.

Each test stops a stage at one write (its rename fails, as a full disk or an interrupt
would stop it; nothing of the stage runs after it), runs the stage again, and checks that
the budget was spent once, that no noise was drawn again for rows already paid for, and
what the killed run left behind.
"""

from __future__ import annotations

import pathlib

import numpy as np
import pytest

from pate_jax import io
from pate_jax import labels as labels_lib
from pate_jax import votes as votes_lib
from pate_jax.stages import aggregate

import test_privacy_release as _release
from test_neighbouring_votes import fixed_secret_key  # noqa: F401  (a fixture)


class _Killed(BaseException):
  """A run stopped at a write."""


def _kill_rename(monkeypatch, name: str, nth: int = 1) -> None:
  """The ``nth`` rename onto a file called ``name`` raises :class:`_Killed` (its temporary
  file written in full, the rename not done)."""
  replace, seen = pathlib.Path.replace, [0]

  def killed(self, target):
    if pathlib.Path(target).name == name:
      seen[0] += 1
      if seen[0] == nth:
        raise _Killed(str(target))
    return replace(self, target)
  monkeypatch.setattr(pathlib.Path, "replace", killed)


def _teachers(path: pathlib.Path) -> pathlib.Path:
  """Teachers' votes keyed on private data (so that the budget registry is used)."""
  votes = _release._votes(4, 40)
  path.mkdir(parents=True)
  votes_lib.save_votes(path / "votes.npz", votes, votes.argmax(1).astype(np.int32),
                       num_pool=40, dataset="synthetic", private_data="a" * 64)
  return path


def _budget(config, workdir: pathlib.Path):
  return aggregate.make_budget(config, votes_lib.load_votes(config.votes_dir),
                               config.votes_dir, workdir)


def _spent(budget) -> list[str]:
  """The ledger's journal: one line per write of the budget."""
  return budget.journal.read_text().splitlines() if budget.journal.exists() else []


@pytest.mark.parametrize("noise_seed", [None, 7], ids=["secret", "research"])
def test_an_aggregate_killed_at_its_labels_resumes_from_the_budget_and_leaves_no_copy(
    tmp_path, monkeypatch, noise_seed):
  """Killed at the rename of labels.npz, the stage leaves no temporary copy of the labels
  (research noise: private values in a file no one knows of), and the rerun writes the
  labels the budget paid for without charging or drawing again."""
  teachers = _teachers(tmp_path / "t")
  config = _release._config(teachers, noise_seed=noise_seed,
                            budget_registry=str(tmp_path / "registry"))
  workdir = tmp_path / "w"
  with monkeypatch.context() as m:
    _kill_rename(m, labels_lib.FILENAME)
    with pytest.raises(_Killed):
      aggregate.run(config, workdir)
  budget = _budget(config, workdir)
  ledger = [budget.path, budget.journal, budget.lock_path]
  assert sorted(workdir.iterdir()) == sorted([workdir / ".lock"] + (
      ledger if noise_seed is not None else []))
  spent = _spent(budget)
  assert spent and not list((tmp_path / "registry").glob("*.tmp"))
  again = aggregate.run(config, workdir)
  assert _spent(budget) == spent                    # nothing charged or drawn again
  assert again["num_asked_now"] == 0
  labels = labels_lib.load_labels(workdir)
  state = budget.state()
  labels_lib.check_against(labels, state["rows"], state["labels"], state["status"], "labels")
  mode = (workdir / labels_lib.FILENAME).stat().st_mode & 0o777
  assert mode == 0o600 if noise_seed is not None else mode & 0o044


def test_a_labels_file_killed_outright_is_removed_by_the_next_run_before_it_spends(
    tmp_path, monkeypatch):
  """A run killed outright (no handler runs) between filling the temporary labels file and
  its rename leaves it; the stage's next run removes it before it spends, even where that
  run is killed too before its own labels (a copy of research labels is private)."""
  teachers = _teachers(tmp_path / "t")
  config = _release._config(teachers, noise_seed=3, budget_registry=str(tmp_path / "r"))
  workdir = tmp_path / "w"
  aggregate.run(config, workdir)
  # The temporary file's name, and the one earlier versions wrote.
  left = [io.temporary(workdir / labels_lib.FILENAME), workdir / "labels.npz.tmp.npz"]
  for tmp in left:
    tmp.write_bytes(b"labels drawn by a killed run")
  config.num_queries = 30
  with monkeypatch.context() as m:
    _kill_rename(m, _budget(config, workdir).path.name)
    with pytest.raises(_Killed):
      aggregate.run(config, workdir)
  assert not any(tmp.exists() for tmp in left)
  assert aggregate.run(config, workdir)["num_asked_now"] == 10


@pytest.mark.parametrize("keep", [0.0, 0.5], ids=["empty", "half"])
def test_a_torn_labels_file_is_written_again_from_the_budget(tmp_path, keep, caplog):
  """A labels.npz torn by a crash (its bytes not on disk when the machine stopped: empty,
  or cut short) cannot be read, and is a copy of the budget's record: the stage's rerun
  says so and writes it again, charging nothing; a file that reads but disagrees with the
  record is still refused."""
  teachers = _teachers(tmp_path / "t")
  config = _release._config(teachers, budget_registry=str(tmp_path / "registry"))
  workdir = tmp_path / "w"
  aggregate.run(config, workdir)
  path, budget = workdir / labels_lib.FILENAME, _budget(config, workdir)
  whole, spent = path.read_bytes(), _spent(budget)
  path.write_bytes(whole[:int(len(whole) * keep)])
  with caplog.at_level("WARNING"):
    again = aggregate.run(config, workdir)
  assert "cannot be read" in caplog.text and again["num_asked_now"] == 0
  assert _spent(budget) == spent
  labels = labels_lib.load_labels(path)
  state = budget.state()
  labels_lib.check_against(labels, state["rows"], state["labels"], state["status"], "labels")
  labels["labels"][labels["answered"]] = (labels["labels"][labels["answered"]] + 1) % 10
  labels_lib.save_labels(path, **{k: labels[k] for k in (
      "labels", "status", "true_labels", "dataset_index", "query_index", "votes_digest",
      "mechanism", "epsilon", "epsilon_max", "delta", "noise")})
  with pytest.raises(ValueError, match="labels.npz"):
    aggregate.run(config, workdir)


def _syncs_and_renames(monkeypatch) -> list[str]:
  """The file syncs and renames made while ``monkeypatch`` holds, in order, as
  ``"fsync <file name>"``, ``"fsync directory"`` and ``"rename <file name>"`` (Linux:
  a descriptor's file is read from /proc)."""
  import os  # pylint: disable=g-import-not-at-top
  events, fsync, replace = [], os.fsync, pathlib.Path.replace

  def synced(fd):
    events.append("fsync " + ("directory" if os.path.isdir(f"/proc/self/fd/{fd}")
                              else pathlib.Path(os.readlink(f"/proc/self/fd/{fd}")).name))
    return fsync(fd)

  def renamed(self, target):
    events.append(f"rename {self.name}")
    return replace(self, target)
  monkeypatch.setattr(os, "fsync", synced)
  monkeypatch.setattr(pathlib.Path, "replace", renamed)
  return events


def test_a_file_written_durably_is_synced_before_its_rename_and_its_directory_after(
    tmp_path, monkeypatch):
  """io.write_file (labels.npz): the temporary file reaches the disk before it is renamed
  over the file (else a crash may leave the new name on a file without its bytes), and the
  directory after (else the rename may be lost)."""
  events = _syncs_and_renames(monkeypatch)
  labels_lib.save_labels(tmp_path, labels=[1, -1], status=[0, 2], true_labels=[1, 2],
                         dataset_index=[0, 1], query_index=[0, 1], votes_digest="d",
                         mechanism="gnmax", epsilon=0.5, epsilon_max=1.0, delta=1e-5,
                         noise="secret")
  assert events == ["fsync labels.npz.tmp", "rename labels.npz.tmp", "fsync directory"]


@pytest.mark.parametrize("private", [False, True], ids=["publishable", "private"])
def test_a_text_write_that_fails_leaves_no_temporary_file(tmp_path, private):
  """io.write_text (results.json, publishable or private): a write that fails midway leaves
  neither a half-written temporary file beside the file nor a changed file."""
  path = tmp_path / "results.json"
  io.write_text(path, "{}", private=private)
  with pytest.raises(UnicodeEncodeError):
    io.write_text(path, "{\"a\": \"\ud800\"}", private=private)  # fails as it is written
  assert sorted(p.name for p in tmp_path.iterdir()) == ["results.json"]
  assert path.read_text() == "{}"


def test_votes_are_written_durably_owner_only_and_stored(tmp_path, monkeypatch):
  """votes.npz is written as labels.npz is (io.write_private): synced before its rename,
  its directory after, owner-only, and stored uncompressed (a compressed file's size and
  writing time would follow the votes)."""
  import zipfile  # pylint: disable=g-import-not-at-top
  events = _syncs_and_renames(monkeypatch)
  path = tmp_path / "t" / "votes.npz"
  votes_lib.save_votes(path, np.array([[3, 1], [0, 4]], np.int32), np.array([0, 1]))
  assert events == ["fsync votes.npz.tmp", "rename votes.npz.tmp", "fsync directory"]
  assert path.stat().st_mode & 0o777 == 0o600
  with zipfile.ZipFile(path) as z:
    assert {i.compress_type for i in z.infolist()} == {zipfile.ZIP_STORED}


def test_a_votes_write_killed_at_its_rename_leaves_no_temporary_copy(tmp_path, monkeypatch):
  """A votes.npz write stopped before its rename (a full disk, an interrupt) removes its
  temporary file: private votes beside the file, which nothing would read or remove."""
  teachers = tmp_path / "t"
  with monkeypatch.context() as m:
    _kill_rename(m, "votes.npz")
    with pytest.raises(_Killed):
      _teachers(teachers)
  assert not list(teachers.iterdir())


def test_the_teachers_stage_removes_a_killed_runs_temporary_votes_before_it_trains(
    tmp_path, monkeypatch):
  """A run killed outright (no handler runs) between filling the temporary votes file and
  its rename leaves it; the teachers stage's next run removes it before anything else,
  even where that run stops too before its own votes."""
  from pate_jax.experiment import load_script  # pylint: disable=g-import-not-at-top
  from pate_jax.stages import teachers as teachers_stage  # pylint: disable=g-import-not-at-top
  c = load_script(_release.REPO / "configs" / "mnist_250.py").get_config("cpu")
  c.update({"dataset": "digits", "num_teachers": 2, "num_steps": 1, "checkpoint_every": 1})
  workdir = tmp_path / "teachers"
  workdir.mkdir()
  left = votes_lib.temporary_files(workdir)  # the temporary name, and earlier versions'
  assert {p.name for p in left} == {"votes.npz.tmp", "votes.npz.tmp.npz"}
  for tmp in left:
    tmp.write_bytes(b"votes of a killed run")

  def killed(*args, **kwargs):
    raise _Killed("before training")
  monkeypatch.setattr(teachers_stage, "protect_votes", killed)
  with pytest.raises(_Killed):
    teachers_stage.run(c, str(workdir))
  assert not any(tmp.exists() for tmp in left)


@pytest.mark.parametrize("nth", [1, 2, 3], ids=["claim", "after_answers", "after_release"])
def test_an_aggregate_killed_at_a_registry_write_resumes_and_spends_once(tmp_path, monkeypatch,
                                                                          nth):
  """Killed at the budget registry's entry (its registration before the first charge, its
  update after the answers' ledger write, after the release's), the stage leaves no
  temporary entry, and its rerun spends what the uninterrupted run spent, once: the same
  ledger writes, the entry caught up with the ledger's journal."""
  teachers = _teachers(tmp_path / "t")
  registry = tmp_path / "registry"
  config = _release._config(teachers, budget_registry=str(registry))
  entry = "a" * 64 + ".json"
  with monkeypatch.context() as m:
    _kill_rename(m, entry, nth)
    with pytest.raises(_Killed):
      aggregate.run(config, tmp_path / "w")
  assert sorted(p.name for p in registry.iterdir()) == (
      [entry, "a" * 64 + ".lock"] if nth > 1 else ["a" * 64 + ".lock"])
  budget = _budget(config, tmp_path / "w")
  spent = _spent(budget)
  assert len(spent) == nth - 1                  # the answers, then the release
  again = aggregate.run(config, tmp_path / "w")
  assert again["num_asked_now"] == (20 if nth == 1 else 0)
  assert _spent(budget)[:nth - 1] == spent and len(_spent(budget)) == 2
  budgets = budget.registry.budgets("a" * 64)
  assert len(budgets) == 1
  assert [str(budgets[0]["generation"]), budgets[0]["sha256"]] == _spent(budget)[-1].split()


def _kill_outright(monkeypatch, name: str, nth: int, at: str, keep) -> None:
  """The ``nth`` write of the file called ``name`` is killed outright (SIGKILL: no handler
  runs after it), at ``at``: ``"sync"``, its bytes cut to ``keep(bytes)`` as the disk holds
  them at the kill (a write cut short), or ``"rename"`` (its temporary file whole, not
  renamed). A temporary file the write's own handler removes on the way out is put back
  as the kill left it."""
  import os  # pylint: disable=g-import-not-at-top
  fsync, replace, seen, left = os.fsync, pathlib.Path.replace, [0], {}

  def synced(fd):
    path = pathlib.Path(os.readlink(f"/proc/self/fd/{fd}"))
    if at == "sync" and path.name == name:
      seen[0] += 1
      if seen[0] == nth:
        with open(path, "rb") as f:
          data = keep(f.read())
        os.ftruncate(fd, len(data))
        left[path] = data
        raise _Killed(str(path))
    return fsync(fd)

  def renamed(self, target):
    if at == "rename" and self.name == name:
      seen[0] += 1
      if seen[0] == nth:
        left[self] = self.read_bytes()
        raise _Killed(str(target))
    return replace(self, target)

  def killed(*args, **kwargs):
    try:
      return run(*args, **kwargs)
    except _Killed:
      for path, data in left.items():  # as the kill left them on disk (owner-only)
        with io.open_private(path, narrow_directory=False) as f:
          f.write(data)
      raise
  run = aggregate.run
  monkeypatch.setattr(os, "fsync", synced)
  monkeypatch.setattr(pathlib.Path, "replace", renamed)
  monkeypatch.setattr(aggregate, "run", killed)


_LEDGER_KILLS = {  # (file, where, the bytes the kill leaves)
    "ledger_half_written": ("ledger.npz.tmp", "sync", lambda b: b[:len(b) // 2]),
    "ledger_not_renamed": ("ledger.npz.tmp", "rename", None),
    "journal_line_torn": ("ledger.npz.journal", "sync", lambda b: b[:-34]),  # of 67 bytes
}


@pytest.mark.parametrize("nth", [1, 2], ids=["answers", "release"])
@pytest.mark.parametrize("kill", sorted(_LEDGER_KILLS))
def test_an_aggregate_killed_in_a_ledger_write_resumes_spending_what_it_answered(
    tmp_path, monkeypatch, fixed_secret_key, kill, nth):
  """Killed outright in the ledger's write of its answers or of its release (the ledger
  file half written, written and not renamed, or renamed and its journal line torn), the
  stage publishes nothing and leaves nothing readable by others; its rerun in the same
  directories accounts what the killed run recorded (never less), returns the answers the
  ledger holds as recorded (never drawn again), and ends where the same run uninterrupted
  ends: the same ledger, the same labels and results (the secret key fixed)."""
  from test_neighbouring_votes import TIMINGS, publishable  # pylint: disable=g-import-not-at-top
  runs = {}
  for name in ("uninterrupted", "killed"):
    teachers = _teachers(tmp_path / name / "t")
    config = _release._config(teachers, budget_registry=str(tmp_path / name / "registry"))
    runs[name] = (config, tmp_path / name / "w")
  config, workdir = runs["uninterrupted"]
  want, want_budget = aggregate.run(config, workdir), _budget(config, workdir)
  config, workdir = runs["killed"]
  file, at, keep = _LEDGER_KILLS[kill]
  with monkeypatch.context() as m:
    _kill_outright(m, file, nth, at, keep)
    with pytest.raises(_Killed):
      aggregate.run(config, workdir)
  # Nothing published; every file the kill left (the ledger's, the registry's) owner-only,
  # but the empty run lock.
  assert not {"results.json", labels_lib.FILENAME} & {p.name for p in workdir.iterdir()}
  left = [p for p in tmp_path.joinpath("killed").rglob("*") if p.is_file()]
  assert [p for p in left if p.stat().st_mode & 0o077 and p.name != ".lock"] == []
  budget = _budget(config, workdir)
  recorded = {}  # what the ledger file holds at the kill: answered, and maybe returned
  if budget.path.exists():
    with np.load(budget.path) as f:
      recorded = dict(zip(f["rows"].tolist(), f["row_labels"].tolist()))
  assert len(recorded) == (0 if nth == 1 and kill != "journal_line_torn" else 20)

  again = aggregate.run(config, workdir)
  state = budget.state()
  assert again["num_asked_now"] == 20 - len(recorded)
  assert {r: lab for r, lab in zip(state["rows"].tolist(), state["labels"].tolist())
          if r in recorded} == recorded                   # recorded answers come back
  assert len(_spent(budget)) == len(_spent(want_budget)) == 2  # the answers, the release
  assert budget.epsilon == want_budget.epsilon            # never less than was spent
  assert state["release"] == want_budget.state()["release"]
  assert publishable(again, TIMINGS | {"num_asked_now"}) == (
      publishable(want, TIMINGS | {"num_asked_now"}))
  np.testing.assert_array_equal(labels_lib.load_labels(workdir)["labels"],
                                labels_lib.load_labels(runs["uninterrupted"][1])["labels"])
  entry = budget.registry.budgets("a" * 64)[0]  # the registry follows the ledger again
  assert [str(entry["generation"]), entry["sha256"]] == _spent(budget)[-1].split()


def _kill_fits(monkeypatch, at: dict[str, int], resumed: list) -> None:
  """The KD-GAN stage's fits, while ``monkeypatch`` holds: each records ``(its checkpoint
  directory's name, the step it resumed from, what it trained on)`` in ``resumed``, and the
  fit named in ``at`` is killed after its checkpoint of step (round) ``at[name]`` (its
  checkpointer closes on the way out, as the save of a killed job is on disk)."""
  from pate_jax import kd_gan, students  # pylint: disable=g-import-not-at-top
  teacher_fit, student_fit = students.fit, kd_gan.fit

  def killing(name, line):
    def log(text):
      if name in at and line(text) == at[name]:
        raise _Killed(f"{name} at {at[name]}")
    return log

  def teacher(student, data, key, *args, checkpoint_dir=None, log=None, **kwargs):
    name = pathlib.Path(checkpoint_dir).name
    out = teacher_fit(student, data, key, *args, checkpoint_dir=checkpoint_dir, **kwargs,
                      log=killing(name, lambda t: int(t.split()[0].split("=")[1])
                                  if t.startswith("step=") else None))
    resumed.append((name, out.resumed_from, None))
    return out

  def fit(gan, keys, public_x, targets, *args, checkpoint_dir=None, log=None, **kwargs):
    name = pathlib.Path(checkpoint_dir).name
    out = student_fit(gan, keys, public_x, targets, *args, checkpoint_dir=checkpoint_dir,
                      **kwargs, log=killing(name, lambda t: int(t.split()[1].split("/")[0])))
    resumed.append((name, out.resumed_from, np.asarray(targets)))
    return out
  monkeypatch.setattr(students, "fit", teacher)
  monkeypatch.setattr(kd_gan, "fit", fit)


@pytest.mark.slow  # five small KD-GAN runs, about 40 s (46 % of before, side by side)
def test_a_kd_gan_killed_at_each_checkpoint_and_write_resumes_to_the_uninterrupted_run(
    tmp_path, data_dir, monkeypatch):
  """The KD-GAN with its sound release (secret noise, a budget in the registry), killed
  after the teacher's checkpoint of step 10, after the sound students' round 2 and at the
  rename of results.json, resumes each time from its checkpoints (no step trained twice)
  and from the release drawn once (the registry holds one budget, the file is never drawn
  again); its results (ε published and sound, every accuracy and history) are those of the
  same run trained again uninterrupted from the same release (``restart``)."""
  import hashlib  # pylint: disable=g-import-not-at-top
  from pate_jax import budget  # pylint: disable=g-import-not-at-top
  from pate_jax.stages import kd_gan as stage  # pylint: disable=g-import-not-at-top
  import test_scripts_tail as tail  # pylint: disable=g-import-not-at-top
  run_script = tail._run  # pylint: disable=protected-access
  monkeypatch.setenv("PATE_JAX_DATA_DIR", str(data_dir))
  data = hashlib.sha256(b"private rows").hexdigest()
  votes = tail._sound_votes(tmp_path, private_data=data)  # pylint: disable=protected-access
  small = dict(num_seeds=1, teacher__num_steps=20, curve__num_public=200,
               curve__max_epsilon=1.0, audit_rounds=0, sound__votes_dir=str(votes),
               budget_registry=str(tmp_path / "registry"), segment_rounds=2)
  workdir, release = tmp_path / "w", tmp_path / "w" / stage.SOUND_RELEASE
  registry = budget.BudgetRegistry(tmp_path / "registry")

  def run(kill: dict[str, int], resumed: list, **overrides):
    with monkeypatch.context() as m:
      _kill_fits(m, kill, resumed)
      if "results" in kill:
        _kill_rename(m, "results.json")
      return run_script("train_kd_gan", "kd_gan_sound", "smoke", workdir, **small,
                        **overrides)

  seen = []
  for kill in ({"teacher": 10}, {"sound": 2}, {"results": 1}):
    resumed = []
    with pytest.raises(_Killed):
      run(kill, resumed)
    seen.append(resumed)
    sha = io.file_digest(release)
    assert [b["sha256"] for b in registry.budgets(data)] == [sha]  # drawn once, spent once
  assert seen[0] == []                                      # killed inside the teacher
  assert [(n, r) for n, r, _ in seen[1]] == [("teacher", 10), ("curve", 0)]
  assert [(n, r) for n, r, _ in seen[2]] == [("teacher", 20), ("curve", 1), ("sound", 2)]
  resumed = []
  out = run({}, resumed)
  assert [(n, r) for n, r, _ in resumed] == [("teacher", 20), ("curve", 1), ("sound", 4)]
  fresh = run({}, [], restart=True)
  assert io.file_digest(release) == sha and len(registry.budgets(data)) == 1
  np.testing.assert_array_equal(seen[2][-1][2], resumed[-1][2])  # the release read back
  timeless = lambda r: {k: v for k, v in r.items() if "seconds" not in k}  # noqa: E731
  assert timeless(out) == timeless(fresh) and out["sound"] and out["curve"]


def _timeless(x):
  """``x`` without its timings (every key that names seconds), at any depth."""
  if isinstance(x, dict):
    return {k: _timeless(v) for k, v in x.items() if "seconds" not in k}
  if isinstance(x, (list, tuple)):
    return [_timeless(v) for v in x]
  return x


@pytest.mark.slow  # five smoke ablations of one variant, about 40 s
def test_the_kd_gan_ablation_killed_in_each_fit_and_at_its_write_resumes_to_a_fresh_run(
    tmp_path, data_dir, monkeypatch):
  """The KD-GAN discriminator ablation (one variant: its teacher, the shared KD-only fit
  and the joint fit), killed after the teacher's last checkpoint, after round 2 of 4 of
  each fit and at the rename of its results.json, resumes each time from the checkpoints
  the killed run left (no round trained twice) and ends with the results of the same
  ablation run again from scratch (``restart``), timings aside."""
  import _scripts  # pylint: disable=g-import-not-at-top
  monkeypatch.setenv("PATE_JAX_DATA_DIR", str(data_dir))
  script, workdir = _scripts.script("ablate_kd_gan"), tmp_path / "w"

  def run(kill: dict[str, int], resumed: list, **overrides):
    config = _scripts.config("kd_gan_ablation", "smoke", only=("paper",), **overrides)
    config.teacher.num_steps = 10
    with monkeypatch.context() as m:
      _kill_fits(m, kill, resumed)
      if "results" in kill:
        _kill_rename(m, "results.json")
      return script.run(config, str(workdir))

  seen = []
  for kill in ({"teacher": 10}, {"kd_only": 2}, {"joint_paper": 2}, {"results": 1}):
    resumed = []
    with pytest.raises(_Killed):
      run(kill, resumed)
    seen.append([(n, r) for n, r, _ in resumed])
    assert not (workdir / "results.json").exists()
  assert seen == [[], [("teacher", 10)], [("teacher", 10), ("kd_only", 2)],
                  [("teacher", 10), ("kd_only", 4), ("joint_paper", 2)]]
  resumed = []
  out = run({}, resumed)
  assert [(n, r) for n, r, _ in resumed] == [("teacher", 10), ("kd_only", 4), ("joint_paper", 4)]
  resumed = []
  fresh = run({}, resumed, restart=True)
  assert [(n, r) for n, r, _ in resumed] == [("teacher", 0), ("kd_only", 0), ("joint_paper", 0)]
  assert _timeless(out) == _timeless(fresh) and out["variants"][0]["name"] == "paper"


@pytest.mark.slow  # four tiny PATE-G runs, about 30 s
def test_a_pate_g_student_killed_at_each_write_resumes_spending_once(
    tmp_path, digits_votes_dir, monkeypatch):
  """The plain (not active) PATE-G student on secret noise, killed at the rename of its
  labels.npz, at its aggregate stage's results.json, after its checkpoint of step 3 and at
  the rename of its own results.json: each rerun
  takes its labels back from the budget (the ledger written once, by the first run; one
  budget in the registry), resumes training from the checkpoint, and its results (ε,
  accuracy, history) are those of the same student trained again uninterrupted on the same
  labels (``restart``)."""
  from pate_jax import budget, students  # pylint: disable=g-import-not-at-top
  import test_train_student as ts  # pylint: disable=g-import-not-at-top
  votes = votes_lib.load_votes(digits_votes_dir)
  teachers = tmp_path / "teachers"
  votes_lib.save_votes(teachers / "votes.npz", votes["votes"], votes["labels"],
                       index=votes["index"], num_pool=votes["num_pool"], dataset="digits",
                       private_data="b" * 64)
  config = ts._config("student_pate_g", votes_dir=str(teachers))  # pylint: disable=protected-access
  config.student.kwargs.update(ts.TINY_GAN)
  config.aggregate.noise_seed = None       # secret noise: the teachers' budget
  config.aggregate.budget_registry = str(tmp_path / "registry")
  workdir = tmp_path / "w"
  fit, resumed = students.fit, []

  def killed_after(step):
    def fit_and_kill(*args, log=print, **kwargs):
      def log_and_kill(text):
        log(text)
        if step is not None and text.startswith(f"step={step} "):
          raise _Killed(text)
      out = fit(*args, log=log_and_kill, **kwargs)
      resumed.append(out.resumed_from)
      return out
    return fit_and_kill

  def run(step=None, rename=None, nth=1):
    with monkeypatch.context() as m:
      m.setattr(students, "fit", killed_after(step))
      if rename:
        _kill_rename(m, rename, nth)
      return ts.train_student.run(config, str(workdir))

  with pytest.raises(_Killed):
    run(rename=labels_lib.FILENAME)
  assert not (workdir / "checkpoints").exists()
  spend = aggregate.make_budget(config.aggregate, votes_lib.load_votes(teachers), teachers,
                                workdir / "labels")
  spent = _spent(spend)
  assert spent                             # the answers were charged before the kill
  with pytest.raises(_Killed):
    run(rename="results.json")             # the aggregate stage's, in labels/
  assert not (workdir / "checkpoints").exists()
  with pytest.raises(_Killed):
    run(step=3)
  with pytest.raises(_Killed):
    run(rename="results.json", nth=2)      # the student's, once it trained
  out = run()
  assert (resumed, out["resumed_from_step"]) == ([3, 6], 6)
  assert [e["step"] for e in out["history"]] == [3, 6]
  with config.unlocked():
    config.restart = True
  fresh = run()
  assert fresh["resumed_from_step"] == 0 and _spent(spend) == spent
  assert len(budget.BudgetRegistry(tmp_path / "registry").budgets("b" * 64)) == 1
  assert fresh["ledger"]["epsilon"] == out["ledger"]["epsilon"] == spend.epsilon
  def timeless(r):  # the results but their seconds (the private part's too) and resumption
    return {k: timeless(v) if isinstance(v, dict) else v for k, v in r.items()
            if "seconds" not in k and k != "resumed_from_step"}
  assert timeless(out) == timeless(fresh)
