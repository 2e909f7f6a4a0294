"""Neighbouring votes through the teachers' budget's reruns, and a research-seed main job.

README, *What you may publish*: one budget per set of teachers, spent by every rerun, whose
refusals depend only on the data-independent bound, never on the votes. The tests of
``test_neighbouring_votes.py`` compare one run on ``votes.npz`` and on its neighbour (one
teacher's vote moved on one row, the same noise); here the neighbours go through a budget's
life, each step an aggregate run on the same teachers, compared with its neighbour's step:

  1. ``first``: 10 queries (a budget created, its first release drawn);
  2. ``more``: 20 queries in the same work directory (the 10 come back as recorded, 10 new
     ones and a second release are paid for);
  3. ``killed``: 30 queries in another work directory, the run killed between its answers
     (written to the ledger) and its release; ``after_kill``: the same command again (the
     answers come back as recorded, the release is drawn);
  4. ``spent``: 38 queries, more than the budget has room for (some refused);
  5. ``refused``: 39 queries: the budget spent, every new row refused.

Each step's results.json outside ``private``, labels.npz (but the salted digest), every
printed or logged line without "private" (the refusal counts, the budget's ε spent of its
ε_max, the rows answered) and every file name with its mode must be the same in both
sequences, but the released ε (noised). The same life with a research noise seed (its
ledger in its work directory, so every step runs in one) is private as a whole: every line
marked private, every file owner-only, every results.json a measurement; it charges what
the secret life charges, step by step, and its parts outside ``private`` do not move
either. A budget with no room for its first release is
refused with the same message. Neighbours: the row moved is never asked (``unasked``),
asked in the first step with a vote gap its label cannot cross (``asked``: the private
parts see it), or asked when the budget was spent (``refused``: its vote moved where the
budget refuses it).

The main job with a research noise seed (``noise_seed``) is private as a whole (README): every
``results.json`` whose values come from the noise says so in its ``disclosure`` (the
teachers', written before any noise is drawn, keeps its publishable part), every other file
it writes outside the checkpoints is owner-only, ``report.md`` says that nothing in it may
be published before any of its parts, every line printed or logged says "private" (the
teachers stage's line of counts too: it did not), the figures drawn from its labels are
titled so, and its ``labels.npz`` records the research noise.
"""

from __future__ import annotations

import contextlib
import io
import json
import logging
import pathlib
import re
from unittest import mock

import numpy as np
import pytest

from pate_jax import budget as budget_lib
from pate_jax import experiment
from pate_jax import ledger as ledger_lib
from pate_jax import votes as votes_lib
from pate_jax.stages import aggregate
from test_neighbouring_votes import (
    POOL,
    RELEASED_EPSILON,
    aggregate_config,
    consensus_votes,
    drop,
    files,
    fixed_secret_key,  # noqa: F401  (a fixture)
    modes,
    neighbour,
    npz_members,
    private_part,
    publishable,
    publishable_lines,
    without_released,
)

STEPS = (("first", 10, "a"), ("more", 20, "a"), ("killed", 30, "b"), ("after_kill", 30, "b"),
         ("spent", 38, "c"), ("refused", 39, "c"))
"""A budget's life: (step, queries asked, work directory). Queries are the pool's first
rows (``query_selection="first"``), so each step asks the rows of the one before."""

EPSILON_MAX = {"gnmax": 1.6, "confident_gnmax": 1.538}
"""The budget: room for the first 30 queries and their three releases, and for some of the
next 8 with a fourth release (Confident-GNMax's threshold checks cost more), not all."""


class Killed(BaseException):
  """A run killed between its answers and its release (as SIGKILL: no handler runs)."""


def _kill(*args, **kwargs):
  raise Killed()


def run_step(base, num_queries, workdir, caplog, mechanism, *, kill=False,
             epsilon_max=None, noise="secret"):
  """One aggregate run of a budget's life on the teachers in ``base/teachers``, into
  ``base/<workdir>``, as its script runs it (``noise``: "secret", or "research" for the
  research noise seed of :func:`aggregate_config`): what it publishes (results.json,
  labels.npz, printed and logged lines, the files under ``base``), or the error it ended
  with."""
  c = aggregate_config(base / "teachers", base, noise, mechanism)
  c.num_queries, c.query_selection = num_queries, "first"
  c.epsilon_max = EPSILON_MAX[mechanism] if epsilon_max is None else epsilon_max
  work = base / workdir
  caplog.clear()
  out = io.StringIO()
  error = None
  killed = (mock.patch.object(budget_lib.TeachersBudget, "release", _kill) if kill
            else contextlib.nullcontext())
  with contextlib.redirect_stdout(out), caplog.at_level(logging.INFO), killed:
    try:
      experiment.run_and_report(aggregate.run, aggregate.report, c, str(work))
    except (Killed, budget_lib.BudgetError) as e:
      error = f"{type(e).__name__}: {e}"
  logged = "\n".join(r.getMessage() for r in caplog.records)
  done = error is None
  # An error is printed marked private (experiment.run_main), so it publishes nothing; it
  # is compared whole all the same.
  return {"error": None if done else error.replace(str(base), "<dir0>"),
          "results": json.loads((work / "results.json").read_text()) if done else None,
          "labels": npz_members(work / "labels.npz") if done else None,
          "lines": publishable_lines(out.getvalue() + "\n" + logged, base),
          "files": files(base)}


def budget_life(base, votes, labels, caplog, mechanism, noise="secret"):
  """:data:`STEPS` on ``votes``, teachers in ``base/teachers``: each step's
  :func:`run_step`, by name. A research ledger lives in its work directory, not beside the
  votes: with research noise every step runs in one work directory, whose ledger then lives
  the life that the teachers' budget lives with secret noise."""
  teachers = base / "teachers"
  teachers.mkdir(parents=True)
  votes_lib.save_votes(teachers / "votes.npz", votes, labels, num_pool=POOL,
                       dataset="synthetic", private_data="ab" * 32)
  return {step: run_step(base, n, workdir if noise == "secret" else "a", caplog, mechanism,
                         kill=step == "killed", noise=noise)
          for step, n, workdir in STEPS}


def assert_same_step(step, x, y):
  """Everything step ``step`` of ``x`` and ``y`` publishes is the same, but the released
  ε."""
  assert x["error"] == y["error"], step
  assert (x["results"] is None) == (y["results"] is None), step
  if x["results"] is not None:
    rx, ry = (drop(publishable(r["results"]), RELEASED_EPSILON) for r in (x, y))
    assert rx == ry, step
    assert x["labels"].keys() == y["labels"].keys(), step
    for name in x["labels"].keys() - {"votes_digest"}:
      np.testing.assert_array_equal(x["labels"][name][0], y["labels"][name][0],
                                    err_msg=f"{step}: {name}")
      assert x["labels"][name][1] == y["labels"][name][1], f"{step}: {name}"
  assert without_released(x["lines"]) == without_released(y["lines"]), step
  assert x["files"].keys() == y["files"].keys(), step
  assert modes(x["files"]) == modes(y["files"]), step
  assert x["files"]["teachers/votes.npz"] == y["files"]["teachers/votes.npz"], step


@pytest.mark.slow  # twelve aggregate runs (eighteen with research noise): a minute or two
@pytest.mark.parametrize("mechanism, case, noise", [
    ("gnmax", "unasked", "secret"), ("gnmax", "asked", "secret"),
    ("gnmax", "refused", "secret"), ("confident_gnmax", "asked", "secret"),
    ("gnmax", "asked", "research"), ("gnmax", "refused", "research")])
def test_a_budget_s_reruns_publish_nothing_a_neighbour_moves(tmp_path, caplog,
                                                             fixed_secret_key, mechanism,
                                                             case, noise):
  """Research noise (``noise_seed``: the run is private as a whole, README) lives the same
  life in its work directory's ledger: the same charges, step by step, as the teachers'
  budget under secret noise, every line it prints or logs marked private (but the closing
  lines naming its files), every file it writes owner-only, every results.json a
  measurement; its parts outside ``private`` are what a secret run publishes, and a
  neighbour moves none of them either."""
  votes, labels = consensus_votes()
  asked = np.arange(STEPS[-1][1])  # every row the budget is asked for, in order
  if case == "unasked":
    row = int(np.setdiff1d(np.arange(POOL), asked)[0])
  elif case == "asked":
    first = asked[:STEPS[0][1]]
    top2 = np.sort(votes[first], axis=1)[:, -2:]
    row = int(first[np.argmax(top2[:, 1] - top2[:, 0])])  # its gap: over 190 votes
  else:
    row = int(asked[-1])  # asked last, when the budget is spent
  x = budget_life(tmp_path / "x", votes, labels, caplog, mechanism, noise)
  y = budget_life(tmp_path / "y", neighbour(votes, row), labels, caplog, mechanism, noise)

  # The life went as planned: a kill, answers recorded and released on the rerun, a
  # budget that refuses some of the 38 rows and every new one of the 39.
  assert x["killed"]["error"] == "Killed: "
  after_kill = x["after_kill"]["results"]["results"]
  assert after_kill["num_asked_now"] == 0 and after_kill["ledger"]["releases"] == 3
  spent, refused = (x[s]["results"]["results"] for s in ("spent", "refused"))
  assert 0 < spent["num_refused_budget"] < 8
  assert refused["num_refused_budget"] > spent["num_refused_budget"]
  for key in ("epsilon", "num_charged", "releases"):  # nothing new charged, nor released
    assert refused["ledger"][key] == spent["ledger"][key], key
  if case == "refused":
    status = x["refused"]["labels"]["status"][0]
    assert status[-1] == int(ledger_lib.Status.REFUSED_BUDGET)

  for step, _, _ in STEPS:
    assert_same_step(step, x[step], y[step])
  # The neighbour is seen by what is private (the comparison is not vacuous).
  if case == "asked":
    assert private_part(x["first"]) != private_part(y["first"])
    assert private_part(x["refused"]) != private_part(y["refused"])
  if noise == "research":
    assert_private_as_a_whole(x, y)
    # The ledger charges what the teachers' budget charges under secret noise, step by step
    # (GNMax's data-independent cost does not follow the answers).
    s = budget_life(tmp_path / "s", votes, labels, caplog, mechanism)
    # (Not vacuous: the secret life prints unmarked lines, and publishes labels.npz.)
    assert any(line.strip() and not _CLOSING.match(line) for line in s["first"]["lines"])
    assert modes(s["first"]["files"])["a/labels.npz"] != {0o600}
    for step, _, _ in STEPS:
      assert s[step]["error"] == x[step]["error"], step
      if x[step]["results"] is not None:
        rs, rx = (r[step]["results"]["results"] for r in (s, x))
        for key in ("num_asked_now", "num_refused_budget"):
          assert rs[key] == rx[key], (step, key)
        for key in ("epsilon", "num_charged", "releases"):
          assert rs["ledger"][key] == rx["ledger"][key], (step, key)


def assert_private_as_a_whole(*lives):
  """Each step of each research-noise budget life (:func:`budget_life`) printed and logged
  nothing unmarked but the closing lines naming its files, wrote every file owner-only (but
  the empty run lock), a results.json that says it is a measurement, and labels that
  record their research noise."""
  for life in lives:
    for step, run in life.items():
      assert [line for line in run["lines"]
              if line.strip() and not _CLOSING.match(line)] == [], step
      assert {name: mode for name, mode in modes(run["files"]).items()
              if pathlib.PurePath(name).name != ".lock" and mode != {0o600}} == {}, step
      if run["results"] is not None:
        assert run["results"]["disclosure"] == experiment.MEASUREMENT, step
        assert str(run["labels"]["noise"][0]) == "research:11", step


@pytest.mark.slow  # six refused runs: about 10 s
@pytest.mark.parametrize("mechanism", ["gnmax", "confident_gnmax"])
def test_a_budget_without_room_for_its_release_is_refused_alike(tmp_path, caplog,
                                                                 fixed_secret_key, mechanism):
  """ε_max below the first release's cost: the run is refused before anything is
  answered, with the same message on neighbouring votes (asked or not)."""
  votes, labels = consensus_votes()
  runs = []
  for d, v in (("x", votes), ("y", neighbour(votes, 0)), ("z", neighbour(votes, POOL - 1))):
    base = tmp_path / d
    (base / "teachers").mkdir(parents=True)
    votes_lib.save_votes(base / "teachers" / "votes.npz", v, labels, num_pool=POOL,
                         dataset="synthetic", private_data="ab" * 32)
    runs.append(run_step(base, 10, "a", caplog, mechanism, epsilon_max=0.05))
  assert "leaves no room for the release" in runs[0]["error"]
  for other in runs[1:]:
    assert_same_step("no room", runs[0], other)


# --- The main job with a research noise seed: private as a whole ---------------------------

_PRIVATE = re.compile(r"(?<!non-)(?<!not )\bprivate\b", re.IGNORECASE)
"""A line that says "private" (README: "non-private" and "not private" do not count)."""

_CLOSING = re.compile(r"^(results|figures): ")
"""The closing lines naming the files written (README: excepted from the mark)."""


def research_main_job(work, caplog, capsys, monkeypatch):
  """The main job (:func:`test_neighbouring_votes.main_job_config`) with research noise
  seed 11 into ``work``, as experiments/run_pate.py runs it: its printed and logged lines,
  and the title of every figure it drew (by file name)."""
  from pate_jax import reporting  # pylint: disable=g-import-not-at-top
  from pate_jax.stages import main_job  # pylint: disable=g-import-not-at-top
  from test_neighbouring_votes import main_job_config  # pylint: disable=g-import-not-at-top
  titles = {}
  for name in ("plot_history", "plot_privacy"):  # (values, title, path); gap.png: no noise
    drawn = getattr(reporting, name)

    def record(values, title, path, _drawn=drawn):
      titles[pathlib.Path(path).name] = title
      return _drawn(values, title, path)

    monkeypatch.setattr(reporting, name, record)
  config = main_job_config()
  config.noise_seed = 11
  caplog.clear()
  capsys.readouterr()
  with caplog.at_level(logging.WARNING):  # the script's level (run_pate.py: quiet_logs)
    experiment.run_and_report(main_job.run, main_job.report, config, str(work))
  printed = capsys.readouterr()
  logged = [r.getMessage() for r in caplog.records]
  return {"lines": "\n".join([printed.out, printed.err, *logged]).splitlines(),
          "titles": titles}


@pytest.mark.slow  # one main job: about 40 s on the 2-core CPU
def test_a_research_seed_main_job_says_it_is_private_as_a_whole(tmp_path, caplog, capsys,
                                                                 monkeypatch):
  """Research noise (``noise_seed``): every file the job writes from the noise, every line
  it prints and every figure says private; nothing it writes reads as a release."""
  work = tmp_path / "work"
  run = research_main_job(work, caplog, capsys, monkeypatch)
  # Every line on screen or in the log says private (the teachers' too), but the closing
  # lines naming the files.
  unmarked = [line for line in run["lines"]
              if line.strip() and not _PRIVATE.search(line) and not _CLOSING.match(line)]
  assert not unmarked
  # Every results file the noise reaches is private as a whole; the teachers' (trained
  # before any noise is drawn) records none; the other records (a figure's seconds, the
  # checkpoints' and the votes' fingerprints) are owner-only and disclose nothing.
  for path in sorted(work.rglob("*.json")):
    where = str(path.relative_to(work))
    record = json.loads(path.read_text())
    if where == "teachers/results.json":
      assert record["disclosure"] == experiment.PUBLISHABLE
      assert "noise_source" not in record["results"] and "noise_seed" not in record["config"]
    elif isinstance(record, dict) and "disclosure" in record:
      assert record["disclosure"] == experiment.MEASUREMENT, where
    else:
      assert path.stat().st_mode & 0o777 == 0o600, where
  assert {str(p.relative_to(work)) for p in work.rglob("results.json")} == {
      "results.json", "teachers/results.json", "aggregate/results.json",
      "student/results.json", "attack/results.json"}
  # Every file outside the checkpoints is owner-only (but the empty run locks); each
  # checkpoint directory too.
  for path in sorted(work.rglob("*")):
    where = str(path.relative_to(work))
    if path.is_dir() and path.name == "checkpoints":
      assert path.stat().st_mode & 0o777 == 0o700, where
    elif path.is_file() and "checkpoints" not in path.parts and path.name != ".lock":
      assert path.stat().st_mode & 0o777 == 0o600, where
  # The labels record their public noise; the figures drawn from it are titled private.
  with np.load(work / "aggregate" / "labels.npz") as f:
    assert str(f["noise"]) == "research:11"
  assert set(run["titles"]) == {"accuracy.png", "privacy.png"}
  for name, title in run["titles"].items():
    assert title.startswith(experiment.PRIVATE_TITLE), name
  # report.md says nothing in it may be published before its first number, and has no
  # part called publishable as it is.
  text = (work / "report.md").read_text()
  warning = text.index("**Nothing in this report may be published**")
  assert warning < text.index("### Noisy labels")
  assert "\n## Publishable\n" not in text


def test_printed_private_marks_every_line_as_it_ends(capsys):
  mark = experiment.PRIVATE_MARK
  with experiment.printed_private():
    print("5 teachers × 259 examples")
    assert capsys.readouterr().out == mark + "5 teachers × 259 examples\n"  # not held back
    print("a", end="")
    print("b\n\n" + mark + "c\nd", end="")
  assert capsys.readouterr().out == f"{mark}ab\n\n{mark}c\n{mark}d"  # the last line too
  with experiment.printed_private(False):
    print("5 teachers")
  assert capsys.readouterr().out == "5 teachers\n"
