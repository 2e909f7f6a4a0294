"""experiments/compare_runs.py: what the comparison ignores and what it catches, the
catalogue's coverage of the scripts, and one catalogue run twice on this checkout, equal."""

from __future__ import annotations

import json
import pathlib

import pytest

from pate_jax import experiment
from pate_jax.stages import compare_runs as cr

import _scripts  # tests/_scripts.py  # pylint: disable=g-bad-import-order

REPO = pathlib.Path(__file__).resolve().parent.parent


def _record(accuracy=0.9, workdir="/tmp/a/before/agg", **results):
  return {"disclosure": "publishable", "seed": 0,
          "results": {"accuracy": accuracy, "time_s": 1.0, "wall_seconds": 2.0,
                      "speedup": 30.0, "loadavg_1min": {"loop": 1.5},
                      "checkpoints": {"saves": 2, "bytes": 80_000, "blocking_seconds": 0.1},
                      "timings": {"load_s": 0.3}, "curve": [0.1, 0.2],
                      "figure": workdir + "/a.png", **results},
          "config": {"votes_dir": "../before/teachers", "k_s": 1, "runs": "runs/x/before/t"},
          "git": "abc123-dirty", "versions": {"jax": "0.4"},
          "device": {"backend": "cpu", "host": "vm"}, "written_at": "2026-01-01T00:00:00"}


def test_volatile_keys_and_work_directories_are_ignored():
  other = _record(workdir="/elsewhere/after/agg")
  other["results"].update(time_s=9.0, wall_seconds=7.0, speedup=3.0, loadavg_1min={"loop": 4.0},
                          timings={"load_s": 9.9})
  other["results"]["checkpoints"].update(bytes=80_004, blocking_seconds=0.5)
  # A path outside the run's directory is recorded as .../<last part> (portable_path).
  other["config"].update(votes_dir=".../teachers", runs="/abs/after/t")
  other.update(git="def456", versions={"jax": "0.5"}, written_at="2027-02-02T00:00:00")
  other["device"]["host"] = "other"
  assert cr.compare_files(_record(), other) == {
      "equal": True, "num_differences": 0, "differences": [], "max_relative_difference": None}
  other["config"]["votes_dir"] = "../../tmp/x/after/teachers"  # as older code recorded it
  assert cr.compare_files(_record(), other)["equal"]
  kept = cr.comparable(_record(checkpoint_bytes_deleted_at_completion=28_806))
  assert kept["results"] == {"accuracy": 0.9, "checkpoints": {"saves": 2},
                             "curve": [0.1, 0.2], "figure": "a.png"}
  assert kept["config"] == {"votes_dir": "teachers", "k_s": 1, "runs": "t"}
  assert kept["device"] == {"backend": "cpu"} and "git" not in kept


def test_a_changed_accuracy_and_a_changed_setting_are_reported():
  out = cr.compare_files(_record(0.9), _record(0.91, curve=[0.1, 0.25]))
  assert not out["equal"] and out["num_differences"] == 2
  first, second = out["differences"]
  assert first == {"key": "results.accuracy", "before": 0.9, "after": 0.91,
                   "max_relative_difference": pytest.approx(0.01 / 0.91)}
  assert second["key"] == "results.curve"  # a list of numbers: one place
  assert second["max_relative_difference"] == pytest.approx(0.05 / 0.25)
  assert out["max_relative_difference"] == pytest.approx(0.2)
  changed = _record()
  changed["config"]["k_s"] = 2  # not a timing, though it ends in _s
  changed["results"]["label"] = "answered 3/40"
  out = cr.compare_files(_record(), changed)
  assert [d["key"] for d in out["differences"]] == ["results.label", "config.k_s"]
  assert out["differences"][0] == {"key": "results.label", "before": "<missing>",
                                   "after": "answered 3/40"}


def _write(path: pathlib.Path, record) -> None:
  path.parent.mkdir(parents=True, exist_ok=True)
  path.write_text(json.dumps(record))


def test_compare_trees_reports_missing_and_different_files(tmp_path):
  before, after = tmp_path / "before", tmp_path / "after"
  for side in (before, after):
    _write(side / "a" / "results.json", _record())
    _write(side / "a" / "checkpoints" / "x.json", {"t": str(side)})  # left out
  _write(before / "b" / "results.json", _record())
  _write(before / "c" / "figure2.json", [{"accuracy": 0.5}])
  _write(after / "c" / "figure2.json", [{"accuracy": 0.6}])
  out = cr.compare(before, after)
  assert not out["equal"] and sorted(out["files"]) == ["a/results.json", "b/results.json",
                                                       "c/figure2.json"]
  assert out["files"]["a/results.json"]["equal"]
  assert out["files"]["b/results.json"] == {"equal": False, "missing": "after"}
  assert out["files"]["c/figure2.json"]["differences"][0]["key"] == "[0].accuracy"
  run, status = {"rc": 0, "wall_s": 1.0}, cr._status  # pylint: disable=protected-access
  assert status("a", run, run, out["files"])["status"] == "equal"
  b = status("b", run, run, out["files"])
  assert b["status"] == "DIFFERENT" and b["missing_files"] == {"b/results.json": "after"}
  assert status("a", {"rc": 1, "wall_s": 1.0}, run, out["files"])["status"] == "FAILED"
  assert status("z", {"rc": None, "wall_s": 0.0}, run, {})["status"] == "NEW"


def test_the_catalogue_covers_every_script_and_seeds_every_noise():
  scripts = {p.stem for p in (REPO / "experiments").glob("*.py")}
  covered = {r.script for r in cr.CATALOGUE}
  assert scripts == covered | set(cr.NOT_COVERED), scripts ^ (covered | set(cr.NOT_COVERED))
  assert not covered & set(cr.NOT_COVERED)
  for entry in cr.CATALOGUE:
    config = experiment.load_config(str(REPO / entry.config))
    args = [f"--config.{o}" for o in entry.overrides]
    assert experiment.unknown_overrides(args, config) == [], entry.name
    seeded = {o.split("=")[0].rpartition("noise_seed")[0] for o in entry.overrides
              if o.split("=")[0].endswith("noise_seed") and o.endswith("=0")}
    for field, _ in experiment.config_items(config):
      if field.endswith("noise_seed"):  # seeded here or by a parent's noise_seed
        assert any(field.startswith(prefix) for prefix in seeded), (entry.name, field)


def test_prerequisites_are_added_in_catalogue_order():
  assert [r.name for r in cr.with_prerequisites(["plot_students"])] == [
      "teachers", "student", "plot_students"]
  assert len(cr.with_prerequisites([""])) == len(cr.CATALOGUE)
  with pytest.raises(ValueError, match="unknown run"):
    cr.with_prerequisites(["nope"])


@pytest.mark.slow
def test_one_run_twice_on_this_checkout_is_equal(tmp_path, digits_votes_dir):
  """The aggregate run (research noise seed 0) twice: its raw records differ (times,
  dates, work directories), once comparable they are equal."""
  entry = next(r for r in cr.CATALOGUE if r.name == "aggregate")
  entry = entry._replace(overrides=tuple(o if not o.startswith("votes_dir=") else
                                         f"votes_dir={digits_votes_dir}"
                                         for o in entry.overrides))
  done = [cr.run_catalogue(REPO, tmp_path / side, runs=[entry]) for side in ("a", "b")]
  assert [d["aggregate"]["rc"] for d in done] == [0, 0], (tmp_path / "a" / "aggregate.log"
                                                          ).read_text()[-2000:]
  raw = [json.loads((tmp_path / side / "aggregate" / "results.json").read_text())
         for side in ("a", "b")]
  assert raw[0] != raw[1]
  # The log holds the run's private lines: owner-only, in an owner-only directory.
  assert (tmp_path / "a" / "aggregate.log").stat().st_mode & 0o777 == 0o600
  assert (tmp_path / "a").stat().st_mode & 0o777 == 0o700
  out = cr.compare(tmp_path / "a", tmp_path / "b")
  assert out["equal"] and "aggregate/results.json" in out["files"], out


def test_every_line_the_comparison_prints_while_it_runs_is_marked(tmp_path, monkeypatch,
                                                                  capsys):
  """Its results are a research measurement, private as a whole, and a run's wall may hold
  seconds that follow the private data (the main job's attack's): the lines it prints while
  the catalogue runs carry the mark, as its report's do."""
  def fake_catalogue(checkout, root, environ, *, runs, timeout_s, log):
    del checkout, environ, timeout_s
    root.mkdir(parents=True)
    out = {r.name: {"rc": 0, "wall_s": 60.1, "command": r.script} for r in runs}
    for name in out:
      log(f"  {name}: rc 0, 60.1 s")
    return out

  monkeypatch.setattr(cr, "run_catalogue", fake_catalogue)
  c = experiment.load_script(REPO / "configs" / "compare_runs.py").get_config("cpu")
  c.before, c.runs = "", "aggregate"
  cr.run(c, str(tmp_path / "w"))
  lines = capsys.readouterr().out.splitlines()
  assert len(lines) >= 4 and all(
      line.startswith(experiment.PRIVATE_MARK) for line in lines), lines


@pytest.mark.parametrize("field, value, match", [
    ("timeout_s", 0, r"^config.timeout_s must be > 0; got 0.0$"),
    ("timeout_s", -1, r"^config.timeout_s must be > 0; got -1.0$"),
    ("timeout_s", float("nan"), r"^config.timeout_s must be finite; got nan$"),
    ("timeout_s", "x", r"^config.timeout_s must be a real number; got 'x'$"),
    ("timeout_s", True, r"^config.timeout_s must be a real number; got True$"),
    ("runs", 3, r"^config.runs must be a string of comma-separated catalogue names; got 3$"),
    ("platform", "cpux", r"^config.platform must be empty \(JAX's default\) or comma-separated "
                         r"names of \('cpu', .*\); got 'cpux'$"),
    ("platform", "cpu,", r"^config.platform must be empty .*; got 'cpu,'$"),
    ("platform", 0, r"^config.platform must be empty .*; got 0$"),
    ("platform", None, r"^config.platform must be empty .*; got None$"),
])
def test_a_bad_timeout_or_runs_is_refused_before_anything_is_checked_out(
    tmp_path, monkeypatch, field, value, match):
  """A timeout of 0 or below killed every run of both sides, each counted as failed, after
  the checkouts, and so did a platform JAX does not know (the reason only in each run's
  log); runs that are not a string failed as an AttributeError. Refused naming the field
  (and by --dry_run)."""
  def git(*args):
    raise AssertionError(f"git {args} ran")

  monkeypatch.setattr(cr, "_git", git)
  monkeypatch.setattr(cr, "run_catalogue", git)
  c = experiment.load_script(REPO / "configs" / "compare_runs.py").get_config("cpu")
  c.before, c.runs = "", "aggregate"
  with c.ignore_type():
    c[field] = value
  _scripts.assert_refused_before_work(cr.run, cr.plan, c, tmp_path / "w", match)


@pytest.mark.parametrize("side", ["before", "after"])
@pytest.mark.parametrize("rev, match", [
    ("no-such-commit", r": 'no-such-commit' names no commit of this repository "
                       r"\(git rev-parse --verify\)$"),
    ("--all", r" must be a commit of this repository \(a hash, branch or tag\) or empty "
              r"\(the working tree\); got '--all'$"),
    (7, r" must be a commit .*; got 7$"),
])
def test_an_unknown_commit_is_refused_naming_its_field_before_anything_is_checked_out(
    tmp_path, monkeypatch, side, rev, match):
  """--dry_run showed an unknown commit as "UNKNOWN: config.before / config.after: ...", and
  the run named both fields. Refused by both, naming the one field, before any worktree is
  added (git rev-parse --verify is all that runs)."""
  ran = []
  real = cr._git  # pylint: disable=protected-access

  def git(*args):
    ran.append(args[0])
    if args[0] != "rev-parse":
      raise AssertionError(f"git {args} ran")
    return real(*args)

  monkeypatch.setattr(cr, "_git", git)
  monkeypatch.setattr(cr, "run_catalogue", git)
  c = experiment.load_script(REPO / "configs" / "compare_runs.py").get_config("cpu")
  c.before, c.after, c.runs = "HEAD", "", "aggregate"
  with c.ignore_type():
    c[side] = rev
  _scripts.assert_refused_before_work(cr.run, cr.plan, c, tmp_path / "w",
                                      rf"^config\.{side}{match}")
  assert set(ran) <= {"rev-parse"}


def test_the_plan_shows_the_commits_it_compares():
  c = experiment.load_script(REPO / "configs" / "compare_runs.py").get_config("cpu")
  c.before, c.after, c.runs = "HEAD", "", "aggregate"
  p = cr.plan(c)
  assert p["before"] == f"HEAD = {cr.commits(c)['before'][:12]}"
  assert p["after"] == "the working tree"


@pytest.mark.parametrize("platform", ["cuda", "gpu", "tpu", "rocm,gpu"])
def test_an_accelerator_platform_is_refused_where_none_is_installed(tmp_path, monkeypatch,
                                                                     platform):
  """Every run of both sides failed on starting JAX (the reason only in each run's log)."""
  def git(*args):
    raise AssertionError(f"git {args} ran")

  monkeypatch.setattr(cr, "_git", git)
  monkeypatch.setattr(cr, "run_catalogue", git)
  monkeypatch.setattr(experiment, "accelerator_installed", lambda: False)
  c = experiment.load_script(REPO / "configs" / "compare_runs.py").get_config("cpu")
  c.before, c.runs, c.platform = "", "aggregate", platform
  _scripts.assert_refused_before_work(
      cr.run, cr.plan, c, tmp_path / "w",
      rf"^config.platform: '{platform}' names no platform of this machine, which has no "
      r"accelerator installed; use 'cpu' or leave it empty$")


def test_a_platform_with_cpu_or_an_installed_accelerator_is_accepted(monkeypatch):
  monkeypatch.setattr(experiment, "accelerator_installed", lambda: True)
  c = experiment.load_script(REPO / "configs" / "compare_runs.py").get_config("cpu")
  c.before, c.runs = "", "aggregate"
  monkeypatch.setenv("JAX_PLATFORMS", "cpu")
  for platform, shown, env in (("", "JAX's default", "cpu"), ("cpu", "cpu", "cpu"),
                               (" cuda, cpu ", "cuda, cpu", "cuda,cpu"), ("tpu", "tpu", "tpu")):
    c.platform = platform
    assert cr.plan(c)["platform"] == shown
    assert cr._environment(c)["JAX_PLATFORMS"] == env
