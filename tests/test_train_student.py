"""experiments/train_student.py and the main job (run_pate.py) end to end on tiny configs."""

from __future__ import annotations

import copy
import json
import os
import pathlib
import shutil
import sys
import time

import jax
import ml_collections
import numpy as np
import pytest

from pate_jax import experiment
from pate_jax.experiment import load_script
from pate_jax.stages import main_job
from pate_jax.students import plots

import _scripts  # tests/_scripts.py  # pylint: disable=g-bad-import-order

REPO = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "experiments"))  # the tests import the scripts by name

import run_pate  # pylint: disable=g-import-not-at-top,wrong-import-position
import train_student  # pylint: disable=g-import-not-at-top,wrong-import-position

TINY_GAN = {"generator_hidden": (16,), "discriminator_hidden": (16, 8), "noise_dim": 4}
# The classifier students' network, one hidden layer: as (name, value) pairs, not a dict, so
# that the student's arguments are hashable and runs of one config share its programs
# (students.build_student).
TINY_CLASSIFIER = {"student.kwargs.model_kwargs": (("hidden", (16,)),)}


def _config(name: str, **overrides):
  c = load_script(REPO / "configs" / f"{name}.py").get_config("cpu")
  c.num_steps, c.segment_steps, c.batch_size = 6, 3, 8
  c.aggregate.num_queries = 30
  c.aggregate.chunk_size = 32
  # A research noise seed: exact reproduction, and the ledger is the workdir's (the
  # teachers' votes are shared by the tests of this module).
  c.aggregate.noise_seed = 0
  for k, v in overrides.items():
    target, field = c, k
    while "." in field:
      head, field = field.split(".", 1)
      target = target[head]
    target[field] = v
  return c


@pytest.fixture(scope="module")
def teachers_dir(digits_votes_dir):
  """The simulated teachers' votes of conftest.digits_votes_dir (read only)."""
  return digits_votes_dir


@pytest.mark.slow
def test_pate_g_results_and_rerun_reuses_labels(tmp_path, teachers_dir, capsys):
  c = _config("student_pate_g", votes_dir=str(teachers_dir))
  c.student.kwargs.update(TINY_GAN)
  r = experiment.run_and_report(train_student.run, train_student.report, c, str(tmp_path))
  lines = capsys.readouterr().out.strip().splitlines()
  tail = lines[-4:]  # the headline, then the paths
  # A research noise seed: every line but the paths says private (the training log too).
  said = [l for l in lines if l.strip() and not l.startswith(("results: ", "figures: "))]
  assert any("eval_accuracy=" in l for l in said)
  assert all(experiment.PRIVATE_MARK in l for l in said), [l for l in said
                                                           if experiment.PRIVATE_MARK not in l]
  # The research noise seed makes the run private as a whole: every line says so.
  assert tail[0].startswith(experiment.PRIVATE_MARK + "pate_g student: held-out accuracy")
  assert "ε: " in tail[0]
  assert tail[1].startswith("private (data owner only): data-dependent ε: ")
  assert tail[2] == f"results: {(tmp_path / 'results.json').resolve()}"
  assert tail[3] == f"figures: {(tmp_path / 'labels' / 'privacy.png').resolve()}"
  # The private privacy.png is drawn last: the student's and the labels' files precede it.
  drawn = (tmp_path / "labels" / "privacy.png").stat().st_mtime
  for path in (tmp_path / "results.json", tmp_path / "labels" / "results.json",
               tmp_path / "labels" / "labels.npz"):
    assert path.stat().st_mtime < drawn, path
  assert r["num_queries"] == 30 and r["num_labels"] == 30
  assert 0.0 <= r["eval_accuracy"] <= 1.0
  assert r["private"]["epsilon"]["moments_data_dependent"]["epsilon"] > 0
  assert set(r["epsilon"]) == {"moments_data_independent", "strong_composition"}
  assert r["noise_source"]["public"]  # a research noise seed, and the results say so
  assert r["delta"] == 1e-5 and len(r["history"]) == 2
  labels_before = (tmp_path / "labels" / "labels.npz").read_bytes()
  again = train_student.run(c, str(tmp_path))  # resumes; pays for no new labels
  assert again["resumed_from_step"] == 6
  assert (tmp_path / "labels" / "labels.npz").read_bytes() == labels_before
  assert again["epsilon"] == r["epsilon"]


@pytest.mark.parametrize("name, overrides, expect", [
    ("student_supervised", {"labels": "plurality", **TINY_CLASSIFIER}, "not private"),
    ("student_distillation", {"student.kwargs.temperature": 5.0, **TINY_CLASSIFIER},
     "not private"),
    ("student_vat", {"student.kwargs.model_kwargs": {"hidden": (16, 8)}}, dict),
])
@pytest.mark.slow
def test_other_students_run(tmp_path, teachers_dir, name, overrides, expect):
  c = _config(name, votes_dir=str(teachers_dir), **overrides)
  r = train_student.run(c, str(tmp_path))
  assert r["num_labels"] == 30
  if expect is dict:
    assert isinstance(r["epsilon"], dict)
  else:
    assert expect in r["epsilon"]
  # A student on the teachers' un-noised labels is private as a whole, and so is one on
  # noisy labels whose noise came from a research seed (here: VAT's).
  record = json.loads((tmp_path / "results.json").read_text())
  assert record["disclosure"] == experiment.MEASUREMENT
  assert (expect is dict) == bool(record["results"].get("noise_source", {}).get("public"))


@pytest.mark.slow
def test_true_labels_are_the_pools_own_on_the_selected_rows(tmp_path, teachers_dir):
  from pate_jax import votes as votes_lib  # pylint: disable=g-import-not-at-top
  from pate_jax.stages import student as stage  # pylint: disable=g-import-not-at-top
  votes = votes_lib.load_votes(teachers_dir)
  truth = np.asarray(votes["labels"])
  c = _config("student_supervised", votes_dir=str(teachers_dir), labels="true",
              **TINY_CLASSIFIER)
  rows, labels = stage._clean_labels(c, votes)  # pylint: disable=protected-access
  np.testing.assert_array_equal(labels, truth[rows])
  assert np.bincount(labels, minlength=10).tolist() == [3] * 10  # class-balanced (default)
  c.labels = "plurality"  # the same rows, the teachers' plurality
  rows_p, plurality = stage._clean_labels(c, votes)  # pylint: disable=protected-access
  np.testing.assert_array_equal(rows_p, rows)
  np.testing.assert_array_equal(plurality, np.asarray(votes["votes"])[rows].argmax(1))
  c.labels, c.aggregate.query_selection = "true", "first"
  clean = stage._clean_labels(c, votes)[0]  # pylint: disable=protected-access
  np.testing.assert_array_equal(clean, np.arange(30))
  c.labels = "true"
  c.aggregate.query_selection = "balanced"
  r = train_student.run(c, str(tmp_path))
  assert r["label_accuracy"] == 1.0 and r["num_labels"] == 30
  assert "not private" in r["epsilon"] and "own labels" in r["epsilon"]
  with pytest.raises(ValueError, match="config.labels must be one of"):
    train_student.run(_config("student_supervised", votes_dir=str(teachers_dir),
                              labels="truth"), str(tmp_path / "bad"))


@pytest.mark.slow
def test_true_answered_labels_are_the_pools_own_on_the_answered_rows(tmp_path, teachers_dir):
  c = _config("student_supervised", votes_dir=str(teachers_dir), **TINY_CLASSIFIER)
  c.aggregate.mechanism, c.aggregate.noise_seed, c.num_steps = "confident_gnmax", 0, 2
  noisy = train_student.run(c, str(tmp_path / "noisy"))
  answered = np.load(tmp_path / "noisy" / "labels" / "labels.npz")
  rows = answered["query_index"][answered["answered"].astype(bool)]
  assert 0 < rows.size < 30 and noisy["label_accuracy"] < 1.0  # some asked, some wrong
  c.labels = "true_answered"
  r = train_student.run(c, str(tmp_path / "clean"))
  again = np.load(tmp_path / "clean" / "labels" / "labels.npz")  # the same answers
  np.testing.assert_array_equal(again["answered"], answered["answered"])
  assert r["num_labels"] == rows.size == noisy["num_labels"] and r["label_accuracy"] == 1.0
  # Which rows were answered is the aggregator's release: the run reports its ε.
  assert r["num_answered"] == rows.size and "own labels" in r["label_source"]
  for k in ("epsilon", "epsilon_release", "ledger", "mechanism"):
    assert r[k] == noisy[k], k
  assert r["private"]["epsilon"] == noisy["private"]["epsilon"]
  # Which rows were answered came from research noise: private as a whole, as the run's own.
  assert r["noise_source"]["public"]
  assert json.loads((tmp_path / "clean" / "results.json").read_text())["disclosure"] == (
      experiment.MEASUREMENT)


def test_distillation_needs_a_saved_temperature(tmp_path, teachers_dir):
  c = _config("student_distillation", votes_dir=str(teachers_dir))
  c.student.kwargs.temperature = 3.0
  with pytest.raises(ValueError, match="temperature: 3.0 is not among"):
    train_student.run(c, str(tmp_path))


@pytest.mark.parametrize("labels", ["plurality", "true"])
def test_an_active_student_on_other_labels_is_refused_before_any_spend(tmp_path, teachers_dir,
                                                                      labels):
  """The active learner asks the budget for noisy labels only: with config.labels naming
  others its results would describe labels it did not train on (and plurality would spend
  the budget for a private student). Refused, naming the field, before a row is asked."""
  c = _config("student_active", votes_dir=str(teachers_dir))
  c.active.round_sizes, c.labels = (5,), labels
  with pytest.raises(ValueError, match="config.labels="):
    train_student.run(c, str(tmp_path / "w"))
  assert not list(tmp_path.rglob("*ledger*"))


@pytest.mark.slow
def test_active_learning_run_respects_its_budget(tmp_path, teachers_dir):
  c = _config("student_active", votes_dir=str(teachers_dir), **TINY_CLASSIFIER)
  c.active.round_sizes = (10, 10, 10)
  c.aggregate.epsilon_max = 2.2  # LNMax γ 0.05: 10 answers cost 1.89, 30 cost 2.79
  r = train_student.run(c, str(tmp_path))
  assert r["ledger_epsilon"] <= 2.2
  assert len(r["active_rounds"]) >= 1 and r["stopped_by_budget"]
  assert 0 < r["num_labels"] < 30
  assert not any("data_dependent" in k for k in r["epsilon"])
  assert "moments_data_dependent" in r["private"]["epsilon"]
  # A rerun spends from the same budget (the research ledger of the workdir): the repeated
  # rounds are answered from its record (same labels, no new cost).
  assert (tmp_path / "research_ledger.npz").exists()
  again = train_student.run(c, str(tmp_path))
  assert again["ledger_epsilon"] == r["ledger_epsilon"]
  assert again["active_rounds"][-1]["budget_epsilon"] == r["active_rounds"][-1][
      "budget_epsilon"]
  assert again["num_labels"] == r["num_labels"]
  # Another seed without the checkpoints: new students may ask other rows, and pay for
  # them from what the first run left (never a fresh budget).
  shutil.rmtree(tmp_path / "checkpoints")
  c.seed = 1
  third = train_student.run(c, str(tmp_path))
  assert r["ledger_epsilon"] <= third["ledger_epsilon"] <= 2.2


def _teachers_of(path, private_data, seed):
  """votes.npz of 20 simulated teachers on the digits' student split (as the module's), the
  simulation's ``seed``, trained on ``private_data``."""
  from pate_jax import data, votes as votes_lib  # pylint: disable=g-import-not-at-top
  ds = data.load_image_dataset("digits")
  split = data.student_split("digits", len(ds.test_labels))
  index = np.concatenate([split.pool_index, split.eval_index])
  y = ds.test_labels[index]
  rs = np.random.RandomState(seed)
  preds = np.where(rs.rand(20, len(y)) < 0.8, y, rs.randint(0, 10, (20, len(y))))
  votes = np.stack([np.bincount(p, minlength=10) for p in preds.T])
  votes_lib.save_votes(path / "votes.npz", votes, y, index=index,
                       num_pool=len(split.pool_index), dataset="digits",
                       private_data=private_data)
  return path


@pytest.mark.slow
def test_an_active_student_on_a_second_budget_reports_the_count(tmp_path, capsys):
  """Secret noise, two sets of teachers of one private dataset: the active learner spending
  the second budget (another_budget) reports both budgets, in results.json and on screen."""
  import hashlib  # pylint: disable=g-import-not-at-top
  from pate_jax import budget as budget_lib  # pylint: disable=g-import-not-at-top
  from pate_jax.stages import aggregate  # pylint: disable=g-import-not-at-top
  private_data = hashlib.sha256(b"the digits' private rows").hexdigest()
  a = _teachers_of(tmp_path / "a", private_data, 1)
  b = _teachers_of(tmp_path / "b", private_data, 2)
  registry = str(tmp_path / "registry")
  first = _config("student_active", votes_dir=str(a)).aggregate
  first.votes_dir, first.noise_seed, first.budget_registry = str(a), None, registry
  first.num_queries, first.privacy_plot = 10, False
  aggregate.run(first, tmp_path / "labels_a")
  c = _config("student_active", votes_dir=str(b), **TINY_CLASSIFIER)
  c.active.round_sizes = (5,)  # one round: what is checked is the report of the budgets
  c.aggregate.noise_seed, c.aggregate.budget_registry = None, registry
  with pytest.raises(budget_lib.BudgetError, match="another_budget=True"):
    train_student.run(c, str(tmp_path / "refused"))
  c.aggregate.another_budget = True
  capsys.readouterr()
  r = experiment.run_and_report(train_student.run, train_student.report, c,
                                str(tmp_path / "second"))
  assert r["ledger"]["budgets_on_private_data"] == 2
  assert r["ledger"]["epsilon"] == r["ledger_epsilon"] > 0
  out = capsys.readouterr().out
  assert "NOTE: 2 budgets are spent on the private data" in out, out
  assert f"budget ε {r['ledger_epsilon']:.2f} of " in out, out


@pytest.mark.slow
def test_main_job_teachers_labels_student(tmp_path, capsys):
  c = load_script(REPO / "configs" / "pate_mnist.py").get_config("cpu")
  c.teachers.dataset = "digits"
  c.teachers.num_teachers, c.teachers.num_steps, c.teachers.checkpoint_every = 5, 10, 10
  c.teachers.gap_plot = False
  c.aggregate.num_queries, c.aggregate.chunk_size = 20, 32
  c.student.num_steps, c.student.segment_steps, c.student.batch_size = 4, 2, 8
  c.student.student.kwargs.update(TINY_GAN)
  c.aggregate.sigma = 2.0  # 5 teachers: σ 40 would answer at random
  c.aggregate.epsilon_max = 1000.0  # σ 2 costs λ/4 per answer (data-independent)
  c.attack.num_histograms, c.attack.num_queries = 3, 300
  c.attack.variants = ml_collections.ConfigDict({"paper": {}})
  handed = []  # what on_labels sees: the budget spent, the student not started

  def on_labels():
    handed.append(((tmp_path / "teachers" / "ledger.npz").is_file(),
                   (tmp_path / "aggregate" / "labels.npz").is_file(),
                   any((tmp_path / "student").rglob("checkpoints"))))

  s = experiment.run_and_report(lambda *a: run_pate.run(*a, on_labels=on_labels),
                                run_pate.report, c, str(tmp_path))
  assert handed == [(True, True, False)]
  # Apart from the wall and the stages' seconds, and private: compressing the teachers'
  # directory takes seconds that follow the votes.
  assert s["private"]["seconds"]["hand_over"] > 0 and "hand_over_seconds" not in s
  assert s["student"]["num_labels"] == 20
  assert s["aggregate"]["mechanism"] == "gnmax"
  # The data-dependent ε is private; the published ε are data-independent or
  # released with smooth sensitivity, and the noise was secret.
  assert s["private"]["epsilon"]["rdp_data_dependent_improved"]["epsilon"] > 0
  assert not any("data_dependent" in k for k in s["epsilon"])
  assert s["epsilon_release"]["epsilon_released"] > 0
  assert s["noise_source"]["public"] is False
  assert (tmp_path / "teachers" / "ledger.npz").exists()  # the budget lives with the votes
  record = json.loads((tmp_path / "results.json").read_text())
  assert record["results"]["student"]["eval_accuracy"] == s["student"]["eval_accuracy"]
  # The job ends with its headline numbers and the absolute paths of its files.
  tail = capsys.readouterr().out.strip().splitlines()[-18:]
  assert tail[-2] == f"results: {(tmp_path / 'results.json').resolve()}"
  assert tail[-1].startswith("figures: ") and "privacy.png" in tail[-1]
  assert tail[-3] == f"report: {(tmp_path / 'report.md').resolve()}"
  text = "\n".join(tail)
  for headline in ("private (data owner only): 5 teachers × ", "test accuracy mean",
                   "20 of 20 queries answered, label accuracy",
                   "private (data owner only): ε rdp_data_dependent_improved = ",
                   "ε rdp_data_independent_improved = ", "ε released with smooth sensitivity = ",
                   "pate_g student: held-out accuracy",
                   "private (data owner only): histogram attack (3 lowest-consensus",
                   "with consistent answers", "main job wall to the student's end",
                   "private (data owner only): wall end to end "):
    assert headline in text, (headline, text)
  # Every printed line with a private value says so.
  for line in text.splitlines():
    if any(w in line for w in ("data_dependent", "teachers ×", "histogram attack",
                               "plurality", "attack ", "end to end")):
      assert line.lstrip().startswith("private (data owner only)"), line
  assert (tmp_path / "aggregate" / "privacy.png").stat().st_size > 1000
  # The attack on the run's own lowest-consensus answered queries, and report.md.
  attack = s["private"]["attack"]
  labels = np.load(tmp_path / "aggregate" / "labels.npz")
  votes = np.load(tmp_path / "teachers" / "votes.npz")["votes"]
  answered_votes = votes[labels["query_index"][labels["answered"]]]
  top = sorted(answered_votes.max(-1))[:3]
  assert [max(r["votes"]) for r in attack["histograms"]] == top
  assert all(r["error_consistent/paper"] >= 0 for r in attack["histograms"])
  fresh, consistent = attack["ledger_check"]
  # The attack runs on the host (config.attack.device), as the accounting does.
  assert experiment.read_results(tmp_path / "attack")["platform"] == "cpu"
  # On a CPU-only machine the attack runs after the student, on an accelerator beside it.
  beside = jax.devices()[0].platform != "cpu"
  # The attack's seconds (its solvers stop on convergence on the private votes) and the
  # wall that holds them are private; the publishable wall stops at the student's end.
  assert set(s["stage_seconds"]) == {"teachers", "labels_and_student"}
  assert "attack_beside_student" not in s["concurrent_seconds"]
  seconds = s["private"]["seconds"]
  # Drawing privacy.png (the private ε curve) takes seconds that follow the votes too:
  # it is drawn after the student's end, after every stage's files.
  drawn = (tmp_path / "aggregate" / "privacy.png").stat().st_mtime
  for stage in ("teachers", "aggregate", "student"):
    assert (tmp_path / stage / "results.json").stat().st_mtime < drawn, stage
  assert set(seconds) == {"wall_end_to_end", "attack", "hand_over", "privacy_plot",
                          *(["attack_beside_student"] if beside else [])}
  assert seconds["privacy_plot"] == json.loads(
      (tmp_path / "aggregate" / "privacy_plot_seconds.json").read_text())["private"][
          "privacy_plot_seconds"] > 0
  assert sum(s["stage_seconds"].values()) <= s["wall_seconds"] < seconds["wall_end_to_end"]
  assert "attack" not in json.dumps({k: v for k, v in s.items() if k != "private"})
  assert experiment.read_results(tmp_path / "attack")["beside_student"] is beside
  # The summary's, the report's and the work directory's own times are the student's end
  # (the time the summary records), not the attack's: a copy that keeps times leaks none.
  ended = time.mktime(time.strptime(record["written_at"], "%Y-%m-%dT%H:%M:%S%z"))
  # So are the attack's directory's, whose files (private, in it owner-only) keep theirs.
  times = [os.stat(p).st_mtime for p in (tmp_path / "results.json",
                                        tmp_path / "report.md", tmp_path, tmp_path / "attack")]
  assert len(set(times)) == 1 and 0 <= times[0] - ended < 1, (times, ended)
  assert times[0] < os.stat(tmp_path / "attack" / "results.json").st_mtime
  assert os.stat(tmp_path / "attack").st_mode & 0o077 == 0
  # The teachers' and the student's walls, phase by phase: the phases tile each wall.
  for stage, names in (("teachers", ["load", "partition", "digest", "setup", "init", "plan",
                                     "train", "wait_for_votes_compiled", "votes",
                                     "checkpoint_wait", "write"]),
                       ("student", ["data", "labels", "fit"])):
    phases, r = s["phase_seconds"][stage], experiment.read_results(tmp_path / stage)
    assert list(phases) == names and phases == r["phase_seconds"], (stage, phases)
    assert min(phases.values()) >= 0 and -1e-6 <= r["wall_seconds"] - sum(
        phases.values()) < 0.5, (stage, phases, r["wall_seconds"])
  teachers_r = experiment.read_results(tmp_path / "teachers")
  assert s["phase_seconds"]["teachers"]["train"] == teachers_r["train_seconds"]
  assert s["phase_seconds"]["teachers"]["votes"] == teachers_r["votes_seconds"]
  assert s["student"]["labels_seconds"] <= s["phase_seconds"]["student"]["labels"]
  assert fresh["num_charged"] == 300 and consistent["num_charged"] == 1
  report = (tmp_path / "report.md").read_text()
  public, private = report.split("## Private: for the data owner only")
  for section in ("## Publishable", "### Noisy labels", "released with smooth sensitivity",
                  "### Student", "](student/accuracy.png)"):
    assert section in public, section
  for section in ("### Teachers", "### Data-dependent ε", "### Histogram attack",
                  "](attack/defense_consistent_answers.png)", "](aggregate/privacy.png)",
                  "](teachers/gap.png)" if (tmp_path / "teachers" / "gap.png").exists() else ""):
    assert section in private, section
  # The vote histograms are the attack's experiment: private only.
  hist = " ".join(map(str, attack["histograms"][0]["votes"]))
  assert hist in private and hist not in public
  for figure in ("student/accuracy.png", "attack/defense_consistent_answers.png"):
    assert (tmp_path / figure).stat().st_size > 1000
  # The finished teachers' checkpoints are gone, the student keeps one.
  assert not [p for p in (tmp_path / "teachers" / "checkpoints").iterdir() if p.name.isdigit()]
  assert [p.name for p in (tmp_path / "student" / "checkpoints").iterdir()
          if p.name.isdigit()] == ["4"]
  # No other mechanism's noise fields in the record of a GNMax run.
  assert "gamma" not in record["config"]["aggregate"]


def test_host_work_runs_beside_the_accelerator_where_their_devices_differ():
  c = load_script(REPO / "configs" / "pate_mnist.py").get_config("cpu")
  # Beside the student where it trains on an accelerator; on a CPU-only machine the two
  # would share the cores.
  on_accelerator = jax.devices()[0].platform != "cpu"
  assert c.attack.beside_student is None
  assert main_job.attack_beside_student(c) == on_accelerator
  c.attack.beside_student = True
  assert main_job.attack_beside_student(c)
  c.attack.beside_student, c.attack.device = None, "default"
  assert not main_job.attack_beside_student(c)
  c.attack.device = "gpu0"
  with pytest.raises(ValueError, match="config.attack.device"):
    main_job.attack_beside_student(c)
  # The labels' accounting, compiled ahead beside the teachers: the same rule.
  assert c.compile_accounting_ahead is None
  assert main_job.accounting_ahead(c) == on_accelerator
  c.compile_accounting_ahead = True
  assert main_job.accounting_ahead(c)
  c.attack.device, c.attack.beside_student, c.attack.enabled = "host", True, False
  assert not main_job.attack_beside_student(c)  # no attack: nothing beside the student
  # The student's training, compiled ahead beside the teachers: wherever it trains on an
  # accelerator.
  assert c.compile_student_ahead is None
  assert main_job.student_ahead(c) == on_accelerator
  c.compile_student_ahead = True
  assert main_job.student_ahead(c)


@pytest.mark.parametrize("field, value", [
    ("num_steps", 0), ("num_steps", -1), ("batch_size", 0), ("segment_steps", -1)])
def test_a_schedule_the_student_cannot_train_on_is_refused_before_its_labels(
    tmp_path, teachers_dir, field, value):
  """The labels come first: the student's schedule was checked once they were paid for (a
  secret-noise budget spent on a student that never trained). Refused before anything is
  read or written, naming the field (and by --dry_run)."""
  c = _config("student_pate_g", votes_dir=str(teachers_dir), **{field: value})
  match = rf"^config.{field} must be an integer >= 1; got {value}$"
  with pytest.raises(ValueError, match=match):
    train_student.run(c, str(tmp_path / "work"))
  assert not (tmp_path / "work").exists()  # no labels.npz, no ledger: nothing was asked
  with pytest.raises(ValueError, match=match):
    train_student.plan(c)


@pytest.mark.parametrize("batch_size", [100_000, "pool + 1"])
def test_a_batch_larger_than_the_pool_is_refused_before_its_labels(
    tmp_path, teachers_dir, monkeypatch, batch_size):
  """Each step's batches are slices of the pool's permutations laid end to end: a batch
  larger than the pool holds every row more than once (100,000 trained for minutes).
  Refused before any label is asked for, naming the field (and by --dry_run); a batch of
  the pool's size, larger than the labelled rows, is allowed."""
  from pate_jax import votes as votes_lib  # pylint: disable=g-import-not-at-top
  from pate_jax.stages import student as student_stage  # pylint: disable=g-import-not-at-top
  pool = int(votes_lib.load_votes(str(teachers_dir))["num_pool"])
  b = pool + 1 if batch_size == "pool + 1" else batch_size

  def asked(*args, **kwargs):
    raise AssertionError("the labels were asked for")

  monkeypatch.setattr(student_stage.aggregate, "run", asked)
  c = _config("student_pate_g", votes_dir=str(teachers_dir), batch_size=b)
  match = (rf"^config.batch_size must be <= the student's pool of {pool} rows \(a larger "
           rf"batch repeats every row within each step\); got {b}$")
  _scripts.assert_refused_before_work(train_student.run, train_student.plan, c,
                                      tmp_path / "work", match)
  c.batch_size = pool  # the largest allowed
  student_stage.check_batch(c, pool)


@pytest.mark.parametrize("batch_size", [100_000, "pool + 1"])
def test_main_job_refuses_a_batch_larger_than_the_pool_before_the_teachers_train(
    tmp_path, monkeypatch, batch_size):
  """The main job's student pool is its dataset's student split: a larger batch is refused
  before the teachers train (and by --dry_run), naming config.student.batch_size."""
  def trained(*args, **kwargs):
    raise AssertionError("the teachers trained")

  monkeypatch.setattr(main_job.teachers_stage, "run", trained)
  c = load_script(REPO / "configs" / "pate_mnist.py").get_config("cpu")
  pool = main_job._query_set(c)[2]  # pylint: disable=protected-access
  c.student.batch_size = pool + 1 if batch_size == "pool + 1" else batch_size
  match = rf"^config.student.batch_size must be <= the student's pool of {pool} rows "
  with pytest.raises(ValueError, match=match):
    run_pate.run(c, str(tmp_path / "work"))
  assert not (tmp_path / "work" / "teachers").exists()
  c = load_script(REPO / "configs" / "pate_mnist.py").get_config("cpu")
  c.student.batch_size = pool + 1 if batch_size == "pool + 1" else batch_size
  with pytest.raises(ValueError, match=match):
    main_job.plan(c)


@pytest.mark.parametrize("field, value, match", [
    ("labels", "plurality", r"config.student.labels must be 'noisy' in the main job"),
    ("labels", "true_answered", r"config.student.labels must be 'noisy'"),
    ("active", ml_collections.ConfigDict({"round_sizes": (50, 50)}),
     r"config.student.active.round_sizes must be empty in the main job"),
    # A schedule it cannot train on: it failed after the teachers trained and the labels
    # were paid for.
    ("num_steps", 0, r"^config.student.num_steps must be an integer >= 1; got 0"),
    ("batch_size", -1, r"^config.student.batch_size must be an integer >= 1; got -1"),
    ("segment_steps", 0, r"^config.student.segment_steps must be an integer >= 1; got 0"),
])
def test_main_job_refuses_a_student_its_summary_cannot_report(tmp_path, field, value, match):
  """Its publishable summary reports the aggregate stage's noisy labels and ledger: a
  student of un-noised labels, or the active learner (which spends from the budget itself),
  would be published under them. Refused before anything is written (and by --dry_run)."""
  c = load_script(REPO / "configs" / "pate_mnist.py").get_config("cpu")
  c.student[field] = value
  _scripts.assert_refused_before_work(run_pate.run, main_job.plan, c, tmp_path / "work", match)


@pytest.mark.parametrize("stage, field, value, instead", [
    ("aggregate", "noise_seed", 0, "--config.noise_seed"),
    ("teachers", "seed", 3, "--config.seed"),
    ("student", "seed", 5, "--config.seed"),
])
def test_main_job_refuses_what_it_sets_itself(tmp_path, stage, field, value, instead):
  """A stage's seed or noise seed given by hand was replaced without a word: a research
  ``aggregate.noise_seed`` became secret noise and spent the real budget. The student's
  labelling is the aggregate stage's config, so it has no field of its own here."""
  c = load_script(REPO / "configs" / "pate_mnist.py").get_config("cpu")
  assert "aggregate" not in c.student and c[stage][field] is None
  c[stage][field] = value
  with pytest.raises(ValueError, match=rf"config.{stage}.{field}: .*{instead}"):
    run_pate.run(c, str(tmp_path / "work"))
  assert not (tmp_path / "work").exists()
  with pytest.raises(ValueError, match=rf"config.{stage}.{field}"):
    main_job.plan(c)
  c[stage][field] = None
  main_job.wire(c, None)  # what the main job sets
  assert c.teachers.seed == c.aggregate.seed == c.student.seed == c.seed
  assert c.aggregate.noise_seed is None and c.student.aggregate.noise_seed is None


@pytest.mark.slow
def test_main_job_with_host_work_beside_the_accelerator(tmp_path):
  c = load_script(REPO / "configs" / "pate_mnist.py").get_config("cpu")
  c.teachers.dataset = "digits"
  c.teachers.num_teachers, c.teachers.num_steps, c.teachers.checkpoint_every = 5, 10, 10
  c.teachers.gap_plot = False
  c.aggregate.num_queries, c.aggregate.sigma, c.aggregate.epsilon_max = 20, 2.0, 1000.0
  c.student.num_steps, c.student.segment_steps, c.student.batch_size = 4, 2, 8
  c.student.student.kwargs.update(TINY_GAN)
  c.attack.num_histograms, c.attack.num_queries = 2, 200
  c.attack.variants = ml_collections.ConfigDict({"paper": {}})
  c.attack.beside_student, c.compile_accounting_ahead, c.compile_student_ahead = (True,) * 3
  s = run_pate.run(c, str(tmp_path))
  assert set(s["concurrent_seconds"]) == {"accounting_compiled_beside_teachers",
                                          "student_compiled_beside_teachers"}
  assert s["private"]["seconds"]["attack_beside_student"] > 0
  beside = experiment.read_results(tmp_path / "attack")
  assert beside["beside_student"] is True and beside["platform"] == "cpu"
  # The same attack computed again, in this thread after the student: the same numbers.
  after = main_job.attack_stage(c, tmp_path)
  assert after == s["private"]["attack"]
  assert experiment.read_results(tmp_path / "attack")["beside_student"] is False


@pytest.mark.parametrize("field, value, match", [
    ("num_teachers", 0, r"^config\.teachers\.num_teachers must be an integer >= 1; got 0$"),
    ("learning_rate", -1.0, r"^config\.teachers\.learning_rate must be > 0"),
    ("weight_decay", -1.0, r"^config\.teachers\.weight_decay must be >= 0; got -1.0$"),
])
def test_main_job_names_the_teachers_settings_as_nested_fields(tmp_path, field, value, match):
  """The main job's teachers' settings were refused as config.<field> (train_teachers'
  names), and only once the data was loaded and the compilations ahead had started."""
  c = load_script(REPO / "configs" / "pate_mnist.py").get_config("cpu")
  c.teachers[field] = value
  _scripts.assert_refused_before_work(run_pate.run, main_job.plan, c, tmp_path / "work", match)


def test_main_job_plan_names_a_teachers_setting_the_data_refuses():
  """A shift as large as the images is refused once they are loaded, naming the nested field."""
  c = load_script(REPO / "configs" / "pate_mnist.py").get_config("cpu")
  c.teachers.max_shift = 1000
  with pytest.raises(ValueError, match=r"^config\.teachers\.max_shift must be smaller than "):
    main_job.plan(c)


@pytest.mark.slow
def test_main_job_refuses_an_unknown_attack_device_before_training(tmp_path):
  c = load_script(REPO / "configs" / "pate_mnist.py").get_config("cpu")
  c.attack.device = "gpu0"
  with pytest.raises(ValueError, match="config.attack.device"):
    run_pate.run(c, str(tmp_path))
  assert not (tmp_path / "teachers").exists()


@pytest.mark.parametrize("content, error, match", [
    (None, FileNotFoundError, r"^config.runs\[1\]: no .*results.json \(a student workdir"),
    ("{}", ValueError, r"^config.runs\[1\]: .*results.json is not a results.json of "
                       r"experiments/train_student.py"),
    ('{"results": 1}', ValueError, r"^config.runs\[1\]: .*\(no results entry\)$"),
])
def test_plot_students_names_the_run_it_cannot_read(tmp_path, content, error, match):
  """A run without results.json was an OSError naming the path alone, one of another
  script a KeyError ('results'): both name ``config.runs[i]`` now, before anything is
  written."""
  import plot_students  # pylint: disable=g-import-not-at-top
  first, second = tmp_path / "first", tmp_path / "second"
  for run_dir in (first, second):
    run_dir.mkdir()
  (first / "results.json").write_text('{"results": {}}')  # read; the second is named
  if content is not None:
    (second / "results.json").write_text(content)
  c = load_script(REPO / "configs" / "plot_students.py").get_config()
  c.runs = f"{first},{second}"
  with pytest.raises(error, match=match):
    plot_students.run(c, str(tmp_path / "plots"))
  assert not (tmp_path / "plots").exists()


@pytest.mark.slow
def test_plot_students_reads_runs_and_writes_png(tmp_path, teachers_dir, capsys):
  import plot_students  # pylint: disable=g-import-not-at-top
  runs = []
  secret = tmp_path / "teachers"  # a copy: secret noise spends the teachers' own budget
  shutil.copytree(teachers_dir, secret, ignore=shutil.ignore_patterns("checkpoints*"))
  for votes_dir, overrides in ((secret, {"aggregate.noise_seed": None}),
                               (teachers_dir, {}),  # a research seed: private as a whole
                               (teachers_dir, {"labels": "plurality"})):
    c = _config("student_supervised", votes_dir=str(votes_dir), **overrides,
                **TINY_CLASSIFIER)
    run_dir = tmp_path / f"run{len(runs)}"
    train_student.run(c, str(run_dir))
    runs.append(str(run_dir))
  c = load_script(REPO / "configs" / "plot_students.py").get_config()
  c.runs = ",".join(runs)
  capsys.readouterr()
  out = experiment.run_and_report(plot_students.run, plot_students.report, c,
                                  str(tmp_path / "plots"))
  tail = capsys.readouterr().out.strip().splitlines()  # the numbers, then the paths
  assert "accuracy" in tail[-3] and "queries" in tail[-3]
  assert tail[-2].startswith(f"results: {(tmp_path / 'plots').resolve()}")
  assert tail[-1] == f"figures: {(tmp_path / 'plots' / 'students.png').resolve()}"
  assert [p["label"] for p in out["points"]] == [
      "supervised", "supervised, research noise (private)",
      "supervised, plurality labels (no noise: private)"]
  plot_students.report(out)  # its lines: the private points' say so
  printed = capsys.readouterr().out.splitlines()
  assert [line.startswith("private (data owner only)") for line in printed] == [
      p["private"] for p in out["points"]] == [False, True, True]
  assert out["points"][0]["epsilon"] > 0 and out["points"][2]["epsilon"] is None
  # A publishable ε is printed with its δ and the samplers' term, as every (ε, δ) pair.
  sampler = out["points"][0]["sampler_delta"]
  assert out["points"][0]["delta"] == 1e-5 and 0 < sampler < 1e-5
  assert f"at δ = 1e-05 + {sampler:.1e}" in printed[0]
  # A file private as a whole makes its point private, whatever its labels say.
  record = json.loads((tmp_path / "run0" / "results.json").read_text())
  assert not plots.point(record["results"], "run0", record["disclosure"])["private"]
  assert plots.point(record["results"], "run0", experiment.MEASUREMENT)["private"]
  assert (tmp_path / "plots" / "students.png").stat().st_size > 0


@pytest.mark.slow
def test_a_failed_game_restarts_the_student_with_a_fresh_key(tmp_path, teachers_dir):
  """config.game_check: the first try fails (a bound no loss meets), the second, the last
  allowed, runs unchecked from a fresh key in its own checkpoints; a rerun resumes it."""
  c = _config("student_pate_g", votes_dir=str(teachers_dir))
  c.student.kwargs.update(TINY_GAN)
  c.game_check.update({"step": 3, "max_value": -1.0, "max_restarts": 1})
  r = train_student.run(c, str(tmp_path))
  assert [(f["try"], f["step"], f["metric"]) for f in r["game_restarts"]] == [
      (1, 3, "loss_gen")]
  assert r["game_restarts"][0]["value"] > -1.0
  assert (tmp_path / "checkpoints").is_dir() and (tmp_path / "checkpoints_try2").is_dir()
  assert [e["step"] for e in r["history"]] == [3, 6] and r["resumed_from_step"] == 0
  again = train_student.run(c, str(tmp_path))  # try 1 fails again at once; try 2 is restored
  assert again["game_restarts"] == r["game_restarts"] and again["resumed_from_step"] == 6
  assert again["eval_accuracy"] == r["eval_accuracy"]
  c.game_check.max_restarts = 0  # no check: the first try's checkpoint runs on
  plain = train_student.run(c, str(tmp_path / "plain"))
  assert plain["game_restarts"] == [] and [e["step"] for e in plain["history"]] == [3, 6]


@pytest.mark.slow
def test_seeds_train_side_by_side_as_their_own_runs(tmp_path, teachers_dir, capsys):
  """config.num_seeds = 2: one vmapped program trains the students of --config.seed=0 and
  1 on the same labels, failed games included (every first try fails here, and each seed's
  second try runs from that seed's restart key); the results give each seed's accuracy as
  its own run's, their mean and the mean curve."""
  c = _config("student_pate_g", votes_dir=str(teachers_dir), num_seeds=2)
  c.student.kwargs.update(TINY_GAN)
  c.game_check.update({"step": 3, "max_value": -1.0, "max_restarts": 1})
  r = experiment.run_and_report(train_student.run, train_student.report, c,
                                str(tmp_path / "both"))
  assert "mean of 2 students, seeds 0-1" in capsys.readouterr().out
  assert r["seeds"] == [0, 1] and r["num_seeds"] == 2
  assert [(f["seed"], f["try"], f["step"]) for f in r["game_restarts"]] == [(0, 1, 3),
                                                                          (1, 1, 3)]
  assert (tmp_path / "both" / "checkpoints_try2").is_dir()
  for seed in (0, 1):
    one = copy.deepcopy(c)
    one.seed, one.num_seeds = seed, 1
    alone = train_student.run(one, str(tmp_path / f"seed{seed}"))
    assert alone["num_labels"] == r["num_labels"]
    assert r["eval_accuracy_seeds"][seed] == pytest.approx(alone["eval_accuracy"],
                                                          abs=1.5 / r["num_eval"])
    mine, theirs = r["seed_histories"][seed], alone["history"]
    assert [e["step"] for e in mine] == [e["step"] for e in theirs] == [3, 6]
    np.testing.assert_allclose([e["loss_gen"] for e in mine],
                               [e["loss_gen"] for e in theirs], rtol=1e-3)
  assert r["eval_accuracy"] == pytest.approx(np.mean(r["eval_accuracy_seeds"]))
  assert [e["eval_accuracy"] for e in r["history"]] == pytest.approx(
      [np.mean([h[n]["eval_accuracy"] for h in r["seed_histories"]]) for n in range(2)])
  again = train_student.run(c, str(tmp_path / "both"))  # every try restored
  assert again["eval_accuracy_seeds"] == r["eval_accuracy_seeds"]
  assert again["resumed_from_step"] == 6
  assert r["resumed_from_step_tries"] == [0, 0] and again["resumed_from_step_tries"] == [6, 6]


@pytest.mark.parametrize("overrides, match", [
    ({"num_seeds": 0}, "config.num_seeds must be an integer >= 1"),
    ({"num_seeds": 2, "active": {"round_sizes": (10,)}}, "active learner trains one student"),
])
def test_seeds_are_refused_where_they_cannot_be(tmp_path, teachers_dir, overrides, match):
  c = _config("student_pate_g", votes_dir=str(teachers_dir))
  with c.unlocked():
    c.update(overrides)
  with pytest.raises(ValueError, match=match):
    train_student.run(c, str(tmp_path))


def test_main_job_student_curve_is_titled_private_where_its_noise_was_a_research_seed():
  student = {"student": "pate_g", "num_labels": 100}
  research = main_job.student_plot_title(student, {"public": True, "noise_seed": 0})
  secret = main_job.student_plot_title(student, {"public": False})
  assert research.startswith(experiment.PRIVATE_TITLE) and "100 noisy labels" in research
  assert secret == "pate_g student, 100 noisy labels"


def test_a_rerun_removes_the_earlier_report_before_it_spends(tmp_path, teachers_dir):
  """The student stage removes an earlier run's results.json before its labels are asked:
  a rerun that then fails (here: more queries than the pool) leaves no report of less than
  the budget spent. A config refused before that keeps the old report."""
  from pate_jax.stages import student as student_stage  # pylint: disable=g-import-not-at-top
  work = tmp_path / "w"
  work.mkdir()
  (work / "results.json").write_text("{}")
  bad_labels = _config("student_supervised", votes_dir=str(teachers_dir), labels="none")
  with pytest.raises(ValueError, match="config.labels"):
    student_stage.run(bad_labels, str(work))
  assert (work / "results.json").exists()
  too_many = _config("student_supervised", votes_dir=str(teachers_dir),
                     **{"aggregate.num_queries": 10**6})
  with pytest.raises(ValueError, match="num_queries"):
    student_stage.run(too_many, str(work))
  assert not (work / "results.json").exists()
