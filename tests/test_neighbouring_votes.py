"""Neighbouring votes: what a run may publish does not move when one teacher's vote moves.

README, *What you may publish*: the neighbours of every ε differ in one training record,
which moves one teacher's vote on each query. Each test runs a stage twice, on ``votes.npz``
and on its neighbour (one teacher's vote moved on one row), with the same noise, and
compares everything an attacker holding the run's files and screen could read outside the
parts marked private: ``results.json`` without its ``private`` entries, every line printed
or logged that does not say "private", and every file written, with its size and mode
(the published student: the arrays of its checkpoint).

Two neighbours: (a) the row moved is not among the rows asked: nothing publishable may
change; (b) it is asked, with a vote gap so large that its released label cannot change:
only the released, noised ε may change (``epsilon_release.epsilon_released``, and the
headline's line of it: by a cell of its grid for Confident-GNMax's votes here, not at all for
GNMax's), and the private parts must (the neighbour is seen by what is private: the tests
are not vacuous). Mutations of the stages that publish a private value, print one on an
unmarked line, or compress votes.npz fail them. A third neighbour, one teacher's vote moved
on every row (one training record replaced in its shard), under a budget that lies between
the two neighbours' data-dependent ε: both are refused at the same row, which a refusal
read from the data-dependent ε would not do.

The noise is the same in both runs of a pair: either a research seed (``noise_seed``: the
run is then private as a whole, and its non-private parts are what a secret run would
publish), or secret noise whose key is fixed (``rng.secret_key`` replaced by a constant
key): the release's own code path, with its budget beside the votes and in the registry.

The tabular release is tested one step earlier, at its data: teachers (the tabular stage,
private as a whole) on training rows and on a neighbour (one row replaced), then the
aggregate stage's release and the student forests on the released labels; where the
released labels are the same, only the released ε and timings may differ (slow).

The main job (experiments/run_pate.py: teachers, labels, student, attack) is tested at its
data too: trained on the 8x8 digits and on a neighbour (one training example's label
replaced, in one teacher's shard), with the same seeds and secret noise, it publishes the
same, every stage's ``results.json`` outside ``private`` (the attack's, a measurement, is
private as a whole), ``report.md``'s part before *Private*, the student's curve and every
unmarked line; the votes differ, and the released labels do not (slow).

Exempt, as the README's timing policy allows (timing is not protected in general): the
seconds and clock times a run records (:data:`TIMINGS`, :data:`STUDENT_TIMINGS`) and prints
("50 s"). Exempt as random: orbax's names of a checkpoint's data files, their number and
sizes (the same state, written twice from the same votes, is laid out differently).
Exempt as salted: ``labels.npz``'s
``votes_digest``, the SHA-256 of the votes and their salt (16 fresh bytes of ``os.urandom``
per votes.npz), which differs between any two votes files; ``labels.npz`` is compressed, so
its size moves with that digest's bytes, and every other member's compressed size is
compared. Private files (README: ``votes.npz``, the ledger and its journal, the registry,
``results.json`` with a private part, the figures) may change in content; they must be the
same files, with the same modes, and ``votes.npz``, stored uncompressed, the same size.
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import json
import logging
import pathlib
import re
import warnings
import zipfile

import jax
import numpy as np
import pytest

from pate_jax import experiment
from pate_jax import mechanisms
from pate_jax import rng
from pate_jax import votes as votes_lib
from pate_jax.stages import aggregate

REPO = pathlib.Path(__file__).resolve().parent.parent
T, C, Q, POOL = 250, 10, 60, 40
NUM_QUERIES = 20

TIMINGS = frozenset({
    "time_s",         # the stage's wall seconds (README: timing is not protected)
    "written_at",     # the clock time results.json was written
})
"""Fields, at any depth outside ``private``, whose values are timings (the README's timing
policy); ``private`` parts are dropped whole."""

RELEASED_EPSILON = ("results", "epsilon_release", "epsilon_released")
"""The one publishable value a neighbour on an asked row may move: the noised release."""
_RELEASED_LINE = re.compile(r"(ε released with smooth sensitivity = |released ε )[0-9.e+-]+")
"""Where the aggregate and student headlines print it."""


def without_released(lines):
  """``lines`` with the released ε they print written as "<released>"."""
  return [_RELEASED_LINE.sub(r"\1<released>", line) for line in lines]

_PRIVATE_WORD = re.compile(r"(?<!non-)(?<!not )\bprivate\b", re.IGNORECASE)
_SECONDS = re.compile(r"\b\d+(\.\d+)? s\b")


def publishable(record, exempt=TIMINGS):
  """``record`` (parsed JSON) without its ``private`` entries and ``exempt`` fields, at
  any depth."""
  if isinstance(record, dict):
    return {k: publishable(v, exempt) for k, v in record.items()
            if k != "private" and k not in exempt}
  if isinstance(record, list):
    return [publishable(v, exempt) for v in record]
  return record


def drop(record, path):
  """``record`` without the field at ``path`` (a tuple of keys), where it is."""
  head, *rest = path
  if not isinstance(record, dict) or head not in record:
    return record
  if not rest:
    return {k: v for k, v in record.items() if k != head}
  return {**record, head: drop(record[head], tuple(rest))}


def publishable_lines(text, *paths):
  """The lines of ``text`` that do not say "private" (README: "non-private" and "not
  private" do not count), with each of ``paths`` written as its name and every count of
  seconds ("50 s", a timing) as "<seconds>"."""
  for i, path in enumerate(paths):
    text = text.replace(str(path), f"<dir{i}>")
  return [_SECONDS.sub("<seconds>", line) for line in text.splitlines()
          if not _PRIVATE_WORD.search(line)]


_RANDOM_NAME = re.compile(r"\b[0-9a-f]{32}\b")


def files(root):
  """Every file under ``root``: relative path -> the sorted (size, mode) of each file of
  that path, orbax's random file names (32 hex digits: a checkpoint's data files) written
  as "<random>"."""
  out = {}
  for p in sorted(pathlib.Path(root).rglob("*")):
    if p.is_file():
      name = _RANDOM_NAME.sub("<random>", str(p.relative_to(root)))
      out.setdefault(name, []).append((p.stat().st_size, p.stat().st_mode & 0o777))
  return {name: tuple(sorted(each)) for name, each in out.items()}


def modes(listing):
  """:func:`files`'s listing without the sizes (nor the count of a random name's files:
  orbax lays out the same checkpoint in a varying number of data files)."""
  return {name: {mode for _, mode in each} for name, each in listing.items()}


def npz_members(path):
  """Each member of an .npz: name -> (its array, its compressed size)."""
  with zipfile.ZipFile(path) as z:
    sizes = {i.filename.removesuffix(".npy"): i.compress_size for i in z.infolist()}
  with np.load(path, allow_pickle=False) as f:
    return {k: (f[k], sizes[k]) for k in f.files}


def consensus_votes(seed=3, agree=200):
  """``[Q, C]`` votes of ``T`` teachers, ``agree`` of them on each row's label (the rest at
  random): answers the noise does not flip, and a data-dependent ε well below the
  data-independent one, so that the release is not clipped to it."""
  gen = np.random.default_rng(seed)
  labels = gen.integers(0, C, Q)
  votes = np.stack([gen.multinomial(T - agree, np.full(C, 1.0 / C)) for _ in range(Q)])
  votes[np.arange(Q), labels] += agree
  return votes.astype(np.int32), labels.astype(np.int32)


def neighbour(votes, row):
  """``votes`` with one teacher's vote on ``row`` moved from its plurality to another
  class."""
  a = int(votes[row].argmax())
  moved = votes.copy()
  moved[row, a] -= 1
  moved[row, (a + 1) % votes.shape[1]] += 1
  return moved


def neighbour_on_every_row(votes):
  """``votes`` with one teacher's vote moved from the plurality to the runner-up on every
  row: the neighbour of one training record replaced in that teacher's shard."""
  rows = np.arange(votes.shape[0])
  moved = votes.copy()
  moved[rows, votes.argmax(1)] -= 1
  moved[rows, np.argsort(votes, 1)[:, -2]] += 1
  return moved


def asked_rows(config, labels):
  return votes_lib.query_rows(config.query_selection, labels[:POOL], config.num_queries, C)


def aggregate_config(teachers, base, noise, mechanism="gnmax", **overrides):
  c = experiment.load_script(REPO / "configs" / "aggregate_mnist.py").get_config("cpu")
  c.votes_dir, c.mechanism, c.sigma = str(teachers), mechanism, 40.0
  c.threshold = 100.0  # Confident-GNMax: most rows pass, whichever the votes' neighbour
  c.num_queries, c.chunk_size, c.epsilon_max, c.privacy_plot = NUM_QUERIES, 16, 6.0, True
  c.budget_registry = str(base / "registry")
  if noise == "research":
    c.noise_seed = 11
  c.update(overrides)
  return c


@pytest.fixture
def fixed_secret_key(monkeypatch):
  """Secret noise (``rng.noise_key`` without a seed) from one constant key: both runs of
  a pair draw the same noise through the release's own code."""
  words = np.array([0x243F6A88, 0x85A308D3, 0x13198A2E, 0x03707344], np.uint32)
  monkeypatch.setattr(rng, "secret_key",
                      lambda: jax.random.wrap_key_data(words, impl=rng.SECRET_IMPL))


def run_aggregate(base, votes, labels, noise, caplog, mechanism="gnmax", **overrides):
  """The aggregate stage as its script runs it (``experiment.run_and_report``) on
  ``votes``, teachers in ``base/teachers``, work directory ``base/work``: its
  results.json, its printed and logged text, and its files (``overrides``: config fields
  set over :func:`aggregate_config`'s)."""
  teachers = base / "teachers"
  teachers.mkdir(parents=True)
  votes_lib.save_votes(teachers / "votes.npz", votes, labels, num_pool=POOL,
                       dataset="synthetic", private_data="ab" * 32)
  caplog.clear()
  out = io.StringIO()
  with contextlib.redirect_stdout(out), caplog.at_level(logging.INFO):  # absl's default
    experiment.run_and_report(aggregate.run, aggregate.report,
                              aggregate_config(teachers, base, noise, mechanism,
                                               **overrides),
                              str(base / "work"))
  logged = "\n".join(r.getMessage() for r in caplog.records)
  return {"results": json.loads((base / "work" / "results.json").read_text()),
          "lines": publishable_lines(out.getvalue() + "\n" + logged, base),
          "files": files(base)}


def private_part(run):
  """The ``private`` part of a run's results, without its seconds."""
  return {k: v for k, v in run["results"]["results"]["private"].items()
          if not k.endswith("_seconds")}


def assert_same_publishable(x, y, *, exempt=()):
  """Everything ``x`` and ``y`` (:func:`run_aggregate`'s) publish is equal, but ``exempt``
  paths of results.json."""
  rx, ry = publishable(x["results"]), publishable(y["results"])
  for path in exempt:
    rx, ry = drop(rx, path), drop(ry, path)
  assert rx == ry
  if exempt:
    assert without_released(x["lines"]) == without_released(y["lines"])
  else:
    assert x["lines"] == y["lines"]
  assert x["files"].keys() == y["files"].keys()


@pytest.mark.parametrize("mechanism, noise", [
    ("gnmax", "secret"), ("gnmax", "research"),
    pytest.param("lnmax", "secret", marks=pytest.mark.slow),  # each compiles its own
    pytest.param("confident_gnmax", "secret", marks=pytest.mark.slow)])
@pytest.mark.parametrize("case", ["unasked", "asked"])
def test_aggregate_publishes_nothing_a_neighbour_moves(tmp_path, caplog, fixed_secret_key,
                                                       mechanism, noise, case):
  votes, labels = consensus_votes()
  rows = asked_rows(aggregate_config(tmp_path, tmp_path, noise), labels)
  if case == "unasked":
    row = int(np.setdiff1d(np.arange(Q), rows)[0])
  else:
    top2 = np.sort(votes[rows], axis=1)[:, -2:]
    row = int(rows[np.argmax(top2[:, 1] - top2[:, 0])])  # its gap: over 190 votes
  x = run_aggregate(tmp_path / "x", votes, labels, noise, caplog, mechanism)
  y = run_aggregate(tmp_path / "y", neighbour(votes, row), labels, noise, caplog, mechanism)

  assert_same_publishable(x, y, exempt=() if case == "unasked" else (RELEASED_EPSILON,))
  # The published files: labels.npz's every member (and its compressed size) but the
  # salted digest of the votes.
  lx, ly = (npz_members(tmp_path / d / "work" / "labels.npz") for d in "xy")
  assert lx.keys() == ly.keys()
  for name in lx.keys() - {"votes_digest"}:
    np.testing.assert_array_equal(lx[name][0], ly[name][0], err_msg=name)
    assert lx[name][1] == ly[name][1], name
  # Private files: the same files, with the same modes; votes.npz (uncompressed) the same
  # size; the others' sizes may follow the votes.
  assert modes(x["files"]) == modes(y["files"])
  assert x["files"]["teachers/votes.npz"] == y["files"]["teachers/votes.npz"]
  # The neighbour is seen by the private parts (the comparison is not vacuous).
  if case == "asked":
    px, py = (private_part(r) for r in (x, y))
    assert px != py
    release = x["results"]["results"].get("epsilon_release")
    if mechanism != "lnmax":  # (LNMax has no release)
      assert px["epsilon_release"]["epsilon_data_dependent"] != (
          py["epsilon_release"]["epsilon_data_dependent"])
      assert release["epsilon_released"] < release["clipped_to"][1]  # not clipped


def _planned_epsilon(config, votes, rows, data_dependent):
  """The budget's ε after the release is reserved and each prefix of ``rows`` is answered
  (GNMax answers every row), composed by hand: with ``data_dependent`` the ε a budget
  spent on the data-dependent costs would check against ``epsilon_max``."""
  m, params = mechanisms.GNMAX, {"sigma": float(config.sigma)}
  empty = mechanisms.make_accountant(m, None, config.conversion)
  release = aggregate.release_spec(config, m, params, C).rdp_curve(np.asarray(empty.orders))
  with jax.enable_x64(True):
    cost = np.asarray(m.cost(votes[rows], np.ones(len(rows), bool), params, empty.orders,
                             data_dependent), np.float64)
    total = release + np.cumsum(cost, axis=0)
    return np.asarray(dataclasses.replace(empty, cost=total).epsilon(config.delta)[0])


def test_aggregate_answers_the_same_rows_of_a_neighbour_whose_private_epsilon_crosses_the_budget(
    tmp_path, caplog, fixed_secret_key):
  """The budget's refusals read its data-independent bound, never the data-dependent ε.
  One training record replaced moves one teacher's vote on every row, and with it the
  private ε after every prefix; ``epsilon_max`` lies between the two neighbours' after some
  prefix, where a refusal on the data-dependent ε (answering until the papers' ε passes the
  budget) would answer them a different number of rows: the number of labels, labels.npz
  and the headline would tell the neighbours apart. Both are refused at the same row, and
  publish the same but for the released ε (its order, β and σ_ss too: fixed by the rule
  before the votes are read)."""
  votes, labels = consensus_votes(agree=170)
  other = neighbour_on_every_row(votes)
  config = aggregate_config(tmp_path, tmp_path, "secret")
  rows = asked_rows(config, labels)
  px, py = (_planned_epsilon(config, v, rows, True) for v in (votes, other))
  k = NUM_QUERIES - 5
  budget = float(0.5 * (px[k] + py[k]))
  assert px[k] < budget < py[k]  # a data-dependent refusal would answer the neighbour less
  expected = int(np.sum(_planned_epsilon(config, votes, rows, False) <= budget))
  assert 0 < expected < NUM_QUERIES  # the data-independent bound refuses some rows
  x = run_aggregate(tmp_path / "x", votes, labels, "secret", caplog, epsilon_max=budget)
  y = run_aggregate(tmp_path / "y", other, labels, "secret", caplog, epsilon_max=budget)

  rx, ry = (r["results"]["results"] for r in (x, y))
  assert rx["num_answered"] == ry["num_answered"] == expected
  assert rx["num_refused_budget"] == NUM_QUERIES - expected
  assert_same_publishable(x, y, exempt=(RELEASED_EPSILON,))
  lx, ly = (npz_members(tmp_path / d / "work" / "labels.npz") for d in "xy")
  for name in lx.keys() - {"votes_digest"}:
    np.testing.assert_array_equal(lx[name][0], ly[name][0], err_msg=name)
  # The neighbour is seen by the private parts (the comparison is not vacuous).
  assert (private_part(x)["ledger"]["epsilon_data_dependent"]
          < private_part(y)["ledger"]["epsilon_data_dependent"])


# --- The student stage ---------------------------------------------------------------------

STUDENT_TIMINGS = TIMINGS | {
    "labels_seconds",  # the student's phases and wall (README: timing is not protected;
    "train_seconds",   # the private figure's seconds are already left out of them)
    "wall_seconds",
    "phase_seconds",
}


def digits_votes(t=T, agree=200, seed=0):
  """votes.npz's arrays on the 8x8 digits' student split (pool, then held-out rows): ``t``
  teachers, ``agree`` of them on each row's true label, the rest at random."""
  from pate_jax import data  # pylint: disable=g-import-not-at-top
  ds = data.load_image_dataset("digits")
  split = data.student_split("digits", len(ds.test_labels))
  index = np.concatenate([split.pool_index, split.eval_index])
  y = ds.test_labels[index].astype(np.int32)
  gen = np.random.default_rng(seed)
  votes = np.stack([gen.multinomial(t - agree, np.full(C, 1.0 / C)) for _ in y])
  votes[np.arange(len(y)), y] += agree
  return votes.astype(np.int32), y, index, len(split.pool_index)


def checkpoint_arrays(directory):
  """The arrays of the newest step under a student's checkpoint ``directory``, by path."""
  import orbax.checkpoint as ocp  # pylint: disable=g-import-not-at-top
  step = max(int(p.name) for p in directory.iterdir() if p.name.isdigit())
  with warnings.catch_warnings():  # orbax: no sharding given, it reads the saved one
    warnings.simplefilter("ignore", UserWarning)
    state = ocp.PyTreeCheckpointer().restore(directory / str(step) / "default")
  return {jax.tree_util.keystr(k): np.asarray(v)
          for k, v in jax.tree_util.tree_leaves_with_path(state)}


def student_config(teachers, base, noise):
  c = experiment.load_script(REPO / "configs" / "student_supervised.py").get_config("cpu")
  c.votes_dir = str(teachers)
  c.num_steps, c.segment_steps, c.batch_size = 6, 3, 8
  a = c.aggregate
  a.mechanism, a.sigma, a.num_queries, a.chunk_size = "gnmax", 40.0, NUM_QUERIES, 16
  a.epsilon_max, a.privacy_plot, a.budget_registry = 6.0, True, str(base / "registry")
  if noise == "research":
    a.noise_seed = 11
  return c


def run_student(base, arrays, noise, caplog):
  """The student stage as its script runs it, on votes ``arrays`` (:func:`digits_votes`):
  as :func:`run_aggregate`."""
  from pate_jax.stages import student  # pylint: disable=g-import-not-at-top
  votes, y, index, num_pool = arrays
  teachers = base / "teachers"
  teachers.mkdir(parents=True)
  votes_lib.save_votes(teachers / "votes.npz", votes, y, index=index, num_pool=num_pool,
                       dataset="digits", private_data="cd" * 32)
  caplog.clear()
  out = io.StringIO()
  # The script's level (train_student.py: quiet_logs, orbax logs every save at INFO).
  with contextlib.redirect_stdout(out), caplog.at_level(logging.WARNING):
    experiment.run_and_report(student.run, student.report,
                              student_config(teachers, base, noise), str(base / "work"))
  logged = "\n".join(r.getMessage() for r in caplog.records)
  return {"results": json.loads((base / "work" / "results.json").read_text()),
          "lines": publishable_lines(out.getvalue() + "\n" + logged, base),
          "files": files(base)}


@pytest.mark.parametrize("noise", [
    "secret", pytest.param("research", marks=pytest.mark.slow)])
@pytest.mark.parametrize("case", ["unasked", "asked"])
def test_student_publishes_nothing_a_neighbour_moves(tmp_path, caplog, fixed_secret_key,
                                                     noise, case):
  votes, y, index, num_pool = digits_votes()
  rows = votes_lib.query_rows("balanced", y[:num_pool], NUM_QUERIES, C)
  if case == "unasked":
    row = int(np.setdiff1d(np.arange(num_pool), rows)[0])  # a pool row never asked
  else:
    row = int(rows[0])  # 200 of 250 teachers on its label: a gap of 150 votes at least
  x = run_student(tmp_path / "x", (votes, y, index, num_pool), noise, caplog)
  y_ = run_student(tmp_path / "y", (neighbour(votes, row), y, index, num_pool), noise, caplog)
  rx, ry = (publishable(r["results"], STUDENT_TIMINGS) for r in (x, y_))
  if case == "asked":
    rx, ry = drop(rx, RELEASED_EPSILON), drop(ry, RELEASED_EPSILON)
  assert rx == ry
  assert without_released(x["lines"]) == without_released(y_["lines"])
  if case == "unasked":
    assert x["lines"] == y_["lines"]
  assert x["files"].keys() == y_["files"].keys()
  assert modes(x["files"]) == modes(y_["files"])
  assert x["files"]["teachers/votes.npz"] == y_["files"]["teachers/votes.npz"]
  # The published student: the same arrays in its checkpoint. (Not the same file sizes:
  # orbax writes one state into data files of varying number and size from run to run.)
  sx, sy = (checkpoint_arrays(tmp_path / d / "work" / "checkpoints") for d in "xy")
  assert sx.keys() == sy.keys() and sx
  for name, value in sx.items():
    np.testing.assert_array_equal(value, sy[name], err_msg=name)
  if case == "asked":
    assert private_part(x) != private_part(y_)


# --- A tabular release: a neighbouring training row ----------------------------------------


def replace_training_row(data_dir, row=0):
  """The task's ``adult/train.csv`` with training row ``row`` replaced (its income
  flipped): a neighbouring dataset of the same size."""
  path = pathlib.Path(data_dir) / "adult" / "train.csv"
  lines = path.read_text().splitlines()
  fields = lines[1 + row].split(",")
  fields[-1] = str(1 - int(fields[-1]))
  lines[1 + row] = ",".join(fields)
  path.write_text("\n".join(lines) + "\n")


@pytest.mark.slow
def test_a_tabular_release_publishes_nothing_a_neighbouring_training_row_moves(
    tmp_path, caplog, fixed_secret_key):
  """Teachers (the tabular stage, a measurement private as a whole) on training rows and
  on their neighbour (one row replaced), the aggregate stage's secret-noise release of
  their votes, and the student forests on the released labels (``config.labels_dir``):
  where the released labels are the same, everything the release and the students publish
  is, but the released ε and timings."""
  import shutil  # pylint: disable=g-import-not-at-top
  from pate_jax.stages import tabular as tabular_stage  # pylint: disable=g-import-not-at-top
  from test_tabular import _tiny_synthetic_task  # pylint: disable=g-import-not-at-top
  config = _tiny_synthetic_task(tmp_path / "x" / "data", "cpu")
  config.query_counts = [40]
  config.lnmax_gammas, config.gnmax_sigmas, config.num_seeds = [1.0], [1.0], 1
  config.reference_pools, config.student_repeats = 0, 2
  shutil.copytree(tmp_path / "x" / "data", tmp_path / "y" / "data")
  replace_training_row(tmp_path / "y" / "data")
  runs = {}
  for d in "xy":
    base = tmp_path / d
    c = config.copy_and_resolve_references()
    c.data_dir, c.budget_registry = str(base / "data"), str(base / "registry")
    tabular_stage.run(c, base / "teachers")
    agg = aggregate_config(base / "teachers", base, "secret")
    agg.num_queries, agg.query_selection = 30, "first"
    out = io.StringIO()
    caplog.clear()
    with contextlib.redirect_stdout(out), caplog.at_level(logging.INFO):
      experiment.run_and_report(aggregate.run, aggregate.report, agg, str(base / "work"))
      c.labels_dir = str(base / "work")
      experiment.run_and_report(tabular_stage.run, tabular_stage.report, c,
                                str(base / "student"))
    logged = "\n".join(r.getMessage() for r in caplog.records)
    runs[d] = {"votes": votes_lib.load_votes(base / "teachers")["votes"],
               "labels": npz_members(base / "work" / "labels.npz"),
               "lines": publishable_lines(out.getvalue() + "\n" + logged, base),
               "results": [json.loads((base / w / "results.json").read_text())
                           for w in ("work", "student")]}
  x, y = runs["x"], runs["y"]
  assert not np.array_equal(x["votes"], y["votes"])  # the neighbour moved some votes
  np.testing.assert_array_equal(x["labels"]["labels"][0], y["labels"]["labels"][0])
  for name in x["labels"].keys() - {"votes_digest"}:
    np.testing.assert_array_equal(x["labels"][name][0], y["labels"][name][0], err_msg=name)
  timings = TIMINGS | {"timings"}  # the released student's seconds from the task read on
  for rx, ry in zip(x["results"], y["results"]):
    assert (drop(publishable(rx, timings), RELEASED_EPSILON)
            == drop(publishable(ry, timings), RELEASED_EPSILON))
  assert without_released(x["lines"]) == without_released(y["lines"])


# --- The main job: a neighbouring training example of one teacher --------------------------

MAIN_JOB_TIMINGS = STUDENT_TIMINGS | {
    "stage_seconds",             # the main job's stages and the host work beside them
    "concurrent_seconds",
    "votes_seconds",             # the teachers stage's phases, its throughput and the
    "compiled_ahead_seconds",    # seconds its checkpoints blocked its training
    "train_examples_per_second",
    "blocking_seconds",
    "final_wait_seconds",
    "share_of_training",
}
"""The timings of the main job's results and of its stages' (README: timing is not
protected)."""

_RELEASED_REPORT = re.compile(r"(ε released with smooth sensitivity: )\*\*[0-9.e+-]+\*\*")
"""Where report.md prints the released ε."""


def main_job_config():
  """The main job on the 8x8 digits, as small as the other main-job tests (five teachers,
  a few steps of each stage), its attack included."""
  import ml_collections  # pylint: disable=g-import-not-at-top
  c = experiment.load_script(REPO / "configs" / "pate_mnist.py").get_config("cpu")
  c.teachers.dataset = "digits"
  c.teachers.num_teachers, c.teachers.num_steps, c.teachers.checkpoint_every = 5, 60, 60
  c.aggregate.num_queries, c.aggregate.chunk_size = NUM_QUERIES, 32
  c.aggregate.sigma = 2.0  # 5 teachers: σ 40 would answer at random
  c.aggregate.epsilon_max = 1000.0  # σ 2 costs λ/4 per answer (data-independent)
  c.student.num_steps, c.student.segment_steps, c.student.batch_size = 4, 2, 8
  c.student.student.kwargs.update(
      {"generator_hidden": (16,), "discriminator_hidden": (16, 8), "noise_dim": 4})
  c.attack.num_histograms, c.attack.num_queries = 3, 100
  c.attack.variants = ml_collections.ConfigDict({"paper": {}})
  return c


def with_training_label(row, label):
  """scikit-learn's digits (the loader of ``data.load_image_dataset("digits")``) with the
  label of training example ``row`` replaced by ``label``: a neighbouring private dataset
  of the same size."""
  from pate_jax.data import _images  # pylint: disable=g-import-not-at-top
  load = _images._load_digits  # pylint: disable=protected-access

  def loader():
    splits = load()
    images, labels = splits["train"]
    labels = labels.copy()
    labels[row] = label
    return {**splits, "train": (images, labels)}

  return loader


def publishable_report(text, base):
  """report.md's lines before its private part, with ``base`` written as "<dir0>", every
  count of seconds as "<seconds>" and the released ε as "<released>"."""
  head = text.split("\n## Private")[0]
  assert len(head) < len(text), "report.md has no private part"
  return [_RELEASED_REPORT.sub(r"\1<released>", line)
          for line in publishable_lines(head, base)]


def run_main_job(base, caplog, capsys):
  """The main job as experiments/run_pate.py runs it, into ``base/work``: every
  results.json (by path; ``None`` where private as a whole), report.md's publishable
  lines, the printed and logged lines that do not say "private", and the files."""
  from pate_jax.stages import main_job  # pylint: disable=g-import-not-at-top
  work = base / "work"
  caplog.clear()
  capsys.readouterr()
  with caplog.at_level(logging.WARNING):  # the script's level (run_pate.py: quiet_logs)
    experiment.run_and_report(main_job.run, main_job.report, main_job_config(), str(work))
  printed = capsys.readouterr()
  logged = "\n".join(r.getMessage() for r in caplog.records)
  results = {}
  for path in sorted(work.rglob("results.json")):
    record = json.loads(path.read_text().replace(str(base), "<dir0>"))
    private_whole = record["disclosure"].startswith("private")
    results[str(path.relative_to(work))] = None if private_whole else record
  return {"results": results,
          "report": publishable_report((work / "report.md").read_text(), base),
          "lines": publishable_lines("\n".join([printed.out, printed.err, logged]), base),
          "files": files(work)}


@pytest.mark.slow  # two main jobs: about 40 s on the 2-core CPU
def test_the_main_job_publishes_nothing_a_neighbouring_training_example_moves(
    tmp_path, caplog, capsys, monkeypatch, fixed_secret_key):
  """Teachers, labels, student and attack (experiments/run_pate.py) on the digits and on
  their neighbour (the label of one training example, in one teacher's shard, replaced),
  with the same seeds and secret noise: the votes differ, the released labels do not, and
  so everything the job publishes is the same, but timings, the salted digest of the votes
  and the released ε; the private parts see the neighbour."""
  from pate_jax.data import _images  # pylint: disable=g-import-not-at-top
  x = run_main_job(tmp_path / "x", caplog, capsys)
  monkeypatch.setattr(_images, "_load_digits", with_training_label(0, 1))  # a 0 made a 1
  y = run_main_job(tmp_path / "y", caplog, capsys)
  wx, wy = tmp_path / "x" / "work", tmp_path / "y" / "work"
  # The neighbour moved votes (the test is not vacuous), not the released labels.
  vx, vy = (votes_lib.load_votes(w / "teachers")["votes"] for w in (wx, wy))
  assert (vx != vy).any(axis=1).sum() > 0
  lx, ly = (npz_members(w / "aggregate" / "labels.npz") for w in (wx, wy))
  np.testing.assert_array_equal(lx["labels"][0], ly["labels"][0])
  # The published files: labels.npz's every member (and its compressed size) but the
  # salted digest of the votes; the student's checkpoint; its curve.
  assert lx.keys() == ly.keys()
  for name in lx.keys() - {"votes_digest"}:
    np.testing.assert_array_equal(lx[name][0], ly[name][0], err_msg=name)
    assert lx[name][1] == ly[name][1], name
  sx, sy = (checkpoint_arrays(w / "student" / "checkpoints") for w in (wx, wy))
  assert sx.keys() == sy.keys() and sx
  for name, value in sx.items():
    np.testing.assert_array_equal(value, sy[name], err_msg=name)
  assert (wx / "student" / "accuracy.png").read_bytes() == (
      wy / "student" / "accuracy.png").read_bytes()
  # Every results.json outside its private parts (those private as a whole: the attack's),
  # report.md's publishable part and every line printed or logged without "private".
  assert x["results"].keys() == y["results"].keys()
  assert x["results"]["attack/results.json"] is None  # a measurement: private as a whole
  for path, rx in x["results"].items():
    ry = y["results"][path]
    if rx is not None:
      rx, ry = (drop(publishable(r, MAIN_JOB_TIMINGS), RELEASED_EPSILON) for r in (rx, ry))
      rx, ry = (drop(r, ("results", "aggregate") + RELEASED_EPSILON[1:]) for r in (rx, ry))
    assert rx == ry, path
  assert x["report"] == y["report"]
  assert without_released(x["lines"]) == without_released(y["lines"])
  # Every file, with its mode; votes.npz (stored uncompressed) the same size.
  assert x["files"].keys() == y["files"].keys()
  assert modes(x["files"]) == modes(y["files"])
  assert x["files"]["teachers/votes.npz"] == y["files"]["teachers/votes.npz"]
  # The neighbour is seen by what is private: the teachers' accuracies.
  px, py = (json.loads((w / "results.json").read_text())["results"]["private"]["teachers"]
            for w in (wx, wy))
  assert px != py
