"""The teachers' budget refuses forged and restored ledgers that are consistent with their
journal: an older generation copied back, a cost off by a part in 10⁴, a forged answered
counter, an answered row without its label; and repeats inside one batch come back as
recorded. (Each of these checks was once removed without any test failing.)"""

from __future__ import annotations

import hashlib
import json
import shutil

import numpy as np
import pytest

from pate_jax import accounting as acc
from pate_jax import budget as budget_lib
from pate_jax import rng
from pate_jax import votes as votes_lib
from pate_jax.ledger import _aggregator as aggregator_module

ORDERS = np.array([1.5, 2.0, 3.0, 5.0, 8.0, 16.0, 32.0, 64.0])


def _budget(path, q=30):
  r = np.random.default_rng(7)
  votes = np.stack([r.multinomial(250, p) for p in r.dirichlet(np.full(10, 50.0), q)])
  path.mkdir(parents=True, exist_ok=True)
  votes_lib.save_votes(path / "votes.npz", votes.astype(np.int32),
                       votes.argmax(1).astype(np.int32), dataset="synthetic")
  return lambda: budget_lib.TeachersBudget(
      path, votes_lib.load_votes(path), rng.noise_key("aggregation"), mechanism="gnmax",
      params={"sigma": 40.0}, epsilon_max=20.0, delta=1e-5, orders=ORDERS, chunk_size=16)


def _forge(path, **fields):
  """Rewrites ledger.npz with ``fields`` and appends its journal line (a self-consistent
  forgery that only the recomputation can refuse)."""
  ledger = path / budget_lib.LEDGER_FILE
  with np.load(ledger) as f:
    arrays = dict(f)
  arrays.update({k: (fn(arrays) if callable(fn) else fn) for k, fn in fields.items()})
  np.savez(ledger, **arrays)
  journal = ledger.with_name(ledger.name + budget_lib.JOURNAL_SUFFIX)
  journal.write_text(journal.read_text() + f"{int(arrays['generation'])} "
                     f"{hashlib.sha256(ledger.read_bytes()).hexdigest()}\n")


def test_an_older_generation_restored_beside_its_journal_is_refused(tmp_path, monkeypatch):
  """In a new process (no in-memory lineage: only the journal knows generation 2)."""
  make = _budget(tmp_path)
  make().answer(np.arange(5))
  gen1 = (tmp_path / budget_lib.LEDGER_FILE).read_bytes()
  make().answer(np.arange(5, 10))
  (tmp_path / budget_lib.LEDGER_FILE).write_bytes(gen1)   # generation 1, journal at 2
  monkeypatch.setattr(aggregator_module, "_NEWEST", {})
  with pytest.raises(budget_lib.BudgetError, match="not the newest copy"):
    make().state()


def _epsilon_of(cost) -> np.float64:
  """The improved conversion's ε at δ 1e-5 of an RDP curve over ORDERS."""
  return np.float64(acc.rdp_accountant(ORDERS, "improved").compose(
      np.asarray(cost, np.float64)).epsilon(1e-5)[0])


@pytest.mark.parametrize("fields, match", [
    (("ledger_cost", "ledger_private_cost"), "is not the cost"),
    # Only the data-dependent cost (and its ε): the bound matches, so only the recomputation
    # of the private cost can refuse it.
    (("ledger_private_cost",), "ledger_private_cost is not the cost"),
])
def test_a_cost_off_by_one_part_in_ten_thousand_is_refused(tmp_path, fields, match):
  make = _budget(tmp_path)
  make().answer(np.arange(10))
  scale = 1 - 1e-4
  forged = {}
  for field in fields:  # the cost and the ε recorded with it, forged together
    forged[field] = lambda a, f=field: a[f] * scale
    forged[field.replace("_cost", "_epsilon")] = lambda a, f=field: _epsilon_of(a[f] * scale)
  _forge(tmp_path, **forged)
  with pytest.raises(budget_lib.BudgetError, match=match):
    make().state()


def test_a_forged_answered_counter_is_refused(tmp_path):
  make = _budget(tmp_path)
  make().answer(np.arange(10))   # GNMax: 10 charged, 10 answered
  _forge(tmp_path, ledger_num_answered=lambda a: np.int64(a["ledger_num_answered"] - 1))
  with pytest.raises(budget_lib.BudgetError, match="counters"):
    make().state()


def test_an_answered_row_without_a_label_is_refused(tmp_path):
  make = _budget(tmp_path)
  make().answer(np.arange(10))
  def drop(a):
    labels = a["row_labels"].copy()
    labels[0] = -1
    return labels
  _forge(tmp_path, row_labels=drop)
  with pytest.raises(budget_lib.BudgetError, match="row_labels and row_status"):
    make().state()


def test_a_row_repeated_within_one_batch_is_marked_repeated(tmp_path):
  out = _budget(tmp_path)().answer(np.array([3, 3, 4]))
  np.testing.assert_array_equal(out.repeated, [False, True, False])
  np.testing.assert_array_equal(out.labels[0], out.labels[1])


def test_a_cost_lowered_at_one_order_only_is_refused(tmp_path):
  """_check_cost must refuse a cost off at any order (np.all), not only at every order."""
  make = _budget(tmp_path)
  make().answer(np.arange(10))
  eps = lambda cost: np.float64(acc.rdp_accountant(ORDERS, "improved").compose(  # noqa: E731
      np.asarray(cost, np.float64)).epsilon(1e-5)[0])
  def lower(a):  # halved at the best order only: a smaller ε; the other orders stay exact
    cost = np.asarray(a["ledger_cost"], np.float64).copy()
    cost[ORDERS == float(a["ledger_best_order"])] *= 0.5
    return cost
  _forge(tmp_path, ledger_cost=lower, ledger_epsilon=lambda a: eps(lower(a)))
  with pytest.raises(budget_lib.BudgetError, match="ledger_cost is not the cost"):
    make().state()


def test_a_forged_charged_counter_is_refused(tmp_path):
  make = _budget(tmp_path)
  make().answer(np.arange(10))   # GNMax: 10 charged, 10 answered
  _forge(tmp_path, ledger_num_charged=lambda a: np.int64(a["ledger_num_charged"] + 1),
         ledger_next_id=lambda a: np.uint64(a["ledger_next_id"] + 1))  # (restore's check)
  with pytest.raises(budget_lib.BudgetError, match="counters"):
    make().state()


def test_a_recorded_epsilon_off_by_one_part_in_ten_thousand_is_refused(tmp_path):
  """restore_ledger's check of ledger_epsilon against its cost (rtol 1e-9): the budget's
  publishable epsilon is read from the record."""
  make = _budget(tmp_path)
  make().answer(np.arange(10))
  _forge(tmp_path, ledger_epsilon=lambda a: np.float64(a["ledger_epsilon"] * (1 - 1e-4)))
  with pytest.raises(budget_lib.BudgetError, match="is not the ε of its cost"):
    make().epsilon


def test_a_journal_line_naming_an_older_generation_is_refused(tmp_path, monkeypatch):
  """Restoring generation 1 and appending its journal line after generation 2's made it the
  newest: rows 5..9 were forgotten, answered again with fresh noise and paid for once."""
  make = _budget(tmp_path)
  make().answer(np.arange(5))
  ledger = tmp_path / budget_lib.LEDGER_FILE
  gen1 = ledger.read_bytes()
  make().answer(np.arange(5, 10))
  ledger.write_bytes(gen1)
  journal = ledger.with_name(ledger.name + budget_lib.JOURNAL_SUFFIX)
  journal.write_text(journal.read_text() + f"1 {hashlib.sha256(gen1).hexdigest()}\n")
  monkeypatch.setattr(aggregator_module, "_NEWEST", {})
  with pytest.raises(budget_lib.BudgetError, match="journal"):
    make().answer(np.arange(5, 10))


@pytest.mark.parametrize("line", ["2", "2 nothex", "two " + "a" * 64, "2.0 " + "a" * 64,
                                  "-1 " + "a" * 64])
def test_a_malformed_journal_line_is_refused_naming_the_journal(tmp_path, line):
  make = _budget(tmp_path)
  make().answer(np.arange(3))
  journal = tmp_path / (budget_lib.LEDGER_FILE + budget_lib.JOURNAL_SUFFIX)
  journal.write_text(journal.read_text() + line + "\n")
  with pytest.raises(budget_lib.BudgetError, match=r"\.journal: line 2"):
    make().state()


@pytest.mark.parametrize("field,forge", [
    ("rows", lambda a: a["rows"].astype(np.float64) + 0.25),          # truncated to a row
    ("row_labels", lambda a: a["row_labels"].astype(np.int64) + 2**32),  # wraps to a label
    ("row_labels", lambda a: a["row_labels"] + 100),                  # not a class
    ("release_count", lambda a: np.array([0, 5])),                    # TypeError before
])
def test_row_columns_of_another_dtype_or_range_are_refused(tmp_path, field, forge):
  make = _budget(tmp_path)
  make().answer(np.arange(5))
  _forge(tmp_path, **{field: forge})
  with pytest.raises(budget_lib.BudgetError):
    make().state()


def _nan_epsilon(text):
  release = json.loads(text)
  release["public"]["epsilon_released"] = float("nan")
  return json.dumps(release)


def _releasing_budget(tmp_path):
  _budget(tmp_path)  # votes.npz
  return lambda: budget_lib.TeachersBudget(  # noqa: E731
      tmp_path, votes_lib.load_votes(tmp_path), rng.noise_key("aggregation"),
      mechanism="gnmax", params={"sigma": 40.0}, epsilon_max=50.0, delta=1e-5,
      orders=ORDERS, chunk_size=16,
      release=budget_lib.ReleaseSpec(order=8.0, beta=0.02, sigma_ss=10.0),
      release_key=rng.noise_key("epsilon_release"))


@pytest.mark.parametrize("draw,forge", [
    (False, lambda text: "{not json"),                       # a bare JSONDecodeError before
    (False, lambda text: json.dumps({"public": {"epsilon_released": 0.0, "num_charged": 5},
                                     "private": {}})),      # never drawn: returned as is
    pytest.param(True, _nan_epsilon, marks=pytest.mark.slow),  # drawn, its ε made NaN
])
def test_a_forged_release_is_refused(tmp_path, draw, forge):
  """release() returned a stored release that covers every charged row as it was: a
  forged one (never drawn, or its ε NaN) was published."""
  make = _releasing_budget(tmp_path)
  make().answer(np.arange(5))
  if draw:
    assert make().release()["public"]["release"] == 1
  _forge(tmp_path, release_json=lambda a: np.str_(forge(str(a["release_json"]))))
  with pytest.raises(budget_lib.BudgetError, match="release_json"):
    make().release()


@pytest.mark.slow
def test_a_release_written_before_releases_were_clipped_is_published_on_the_grid(tmp_path):
  """A release of an older version records no clipping range and holds the float64 bits of
  its draw (which can tell neighbours apart): it is read back, and published on the release
  grid and clipped to the budget's data-independent ε; the stored file is left as it is."""
  make = _releasing_budget(tmp_path)
  make().answer(np.arange(5))
  drawn = make().release()
  upper = drawn["public"]["clipped_to"][1]
  stored = {}

  def unclipped(value):
    def forge(text):
      release = json.loads(text)
      release["public"].pop("clipped_to", None)
      release["public"]["epsilon_released"] = value
      stored.clear()
      stored.update(release)
      return json.dumps(release)
    return lambda a: np.str_(forge(str(a["release_json"])))

  off_grid = upper / 3.0 + 1e-9
  _forge(tmp_path, release_json=unclipped(off_grid))
  got = make().release()
  cell = round(off_grid / acc.RELEASE_GRID) * acc.RELEASE_GRID
  assert got["public"]["epsilon_released"] == cell != off_grid
  assert got["public"]["clipped_to"] == [0.0, upper]
  assert got["private"] == stored["private"]
  assert {k: v for k, v in got["public"].items() if k not in ("epsilon_released",
                                                              "clipped_to")} == {
      k: v for k, v in stored["public"].items() if k != "epsilon_released"}
  data = np.load(tmp_path / budget_lib.LEDGER_FILE)
  assert json.loads(str(data["release_json"])) == stored   # the file is left as it is
  for value, published in ((1e3 + upper, upper), (-0.7, 0.0)):
    _forge(tmp_path, release_json=unclipped(value))
    assert make().release()["public"]["epsilon_released"] == published


def test_a_deleted_ledger_beside_its_journal_does_not_give_the_budget_back(tmp_path):
  make = _budget(tmp_path)
  make().answer(np.arange(5))
  (tmp_path / budget_lib.LEDGER_FILE).unlink()   # the journal still records one spend
  with pytest.raises(budget_lib.BudgetError, match="is missing but"):
    make().answer(np.arange(5, 10))
  assert not (tmp_path / budget_lib.LEDGER_FILE).exists()


def _journal_lines(path):
  journal = path / (budget_lib.LEDGER_FILE + budget_lib.JOURNAL_SUFFIX)
  return journal, journal.read_text().splitlines()


def test_a_write_interrupted_before_its_journal_line_is_adopted_only_as_the_next(tmp_path):
  """Generation 2 whose journal line was lost names generation 1's file as ``previous``: it
  is adopted and its line written again; the same file naming another ``previous`` is not
  this journal's next write."""
  make = _budget(tmp_path)
  make().answer(np.arange(5))
  make().answer(np.arange(5, 10))
  journal, lines = _journal_lines(tmp_path)
  ledger = tmp_path / budget_lib.LEDGER_FILE
  with np.load(ledger) as f:
    arrays = dict(f)
  assert str(arrays["previous"]) == lines[0].split()[1] and int(arrays["generation"]) == 2
  journal.write_text(lines[0] + "\n")   # killed between the file and its journal line
  assert make().state()["rows"].tolist() == list(range(10))
  assert journal.read_text().splitlines() == lines
  journal.write_text(lines[0] + "\n")
  np.savez(ledger, **{**arrays, "previous": np.str_("f" * 64)})
  with pytest.raises(budget_lib.BudgetError, match="does not extend the journal's generation 1"):
    make().state()


def test_a_journal_line_cut_short_is_completed_only_for_the_file_it_was_recording(tmp_path):
  """A journal line cut short (the run killed, or the disk full, part way through its
  append) is completed where its bytes begin the line of the ledger file it follows (the
  journal's next generation, naming the newest file as its previous one); after an older
  file put back, beside another file, or as other bytes, it is refused as before."""
  make = _budget(tmp_path)
  make().answer(np.arange(5))
  gen1 = (tmp_path / budget_lib.LEDGER_FILE).read_bytes()
  make().answer(np.arange(5, 10))
  journal, lines = _journal_lines(tmp_path)
  ledger = tmp_path / budget_lib.LEDGER_FILE
  for cut in (1, 2, 30, len(lines[1])):        # the generation only, ..., all but "\n"
    journal.write_text(lines[0] + "\n" + lines[1][:cut])
    assert make().state()["rows"].tolist() == list(range(10))
    assert journal.read_text() == "\n".join(lines) + "\n"
  gen2 = ledger.read_bytes()
  with np.load(ledger) as f:
    arrays = dict(f)
  for name, torn, file in [
      ("an older file put back", lines[1][:30], gen1),
      ("another file of generation 2", "2 ", None),
      ("bytes of no line of it", "2 " + "0" * 20, gen2)]:
    if file is None:
      np.savez(ledger, **{**arrays, "previous": np.str_("f" * 64)})
    else:
      ledger.write_bytes(file)
    journal.write_text(lines[0] + "\n" + torn)
    with pytest.raises(budget_lib.BudgetError, match=r"\.journal: line 2"):
      make().state()
    assert journal.read_text() == lines[0] + "\n" + torn, name

def test_a_ledger_beside_votes_of_other_dataset_rows_is_refused(tmp_path):
  """The same counts saved again for other dataset rows (another index: another salted
  digest) cost the same; the ledger's answers are still not theirs."""
  make = _budget(tmp_path)
  make().answer(np.arange(5))
  old = votes_lib.load_votes(tmp_path)
  votes_lib.save_votes(tmp_path / "votes.npz", old["votes"], old["labels"],
                       index=np.asarray(old["index"]) + 1000, dataset="synthetic")
  with pytest.raises(budget_lib.BudgetError, match="spent on other votes than these"):
    make().answer(np.arange(5))


def test_a_ledger_listing_a_row_twice_is_refused(tmp_path):
  make = _budget(tmp_path)
  make().answer(np.arange(5))
  _forge(tmp_path, rows=lambda a: np.asarray(a["rows"])[[0, 1, 2, 3, 3]])
  with pytest.raises(budget_lib.BudgetError, match="must list distinct rows"):
    make().state()


def test_a_ledger_with_more_releases_drawn_than_paid_for_is_refused(tmp_path):
  """Release 2 recorded where one release was charged: its cost is missing from ε."""
  make = _releasing_budget(tmp_path)
  make().answer(np.arange(5))   # charges release 1 before the rows; none drawn yet
  spec = budget_lib.ReleaseSpec(order=8.0, beta=0.02, sigma_ss=10.0)

  def second_release(a):
    eps = float(a["ledger_epsilon"])
    return np.str_(json.dumps({"public": {
        "epsilon_released": 0.0, "clipped_to": [0.0, eps], "release": 2, "num_charged": 5,
        "order": spec.order, "beta": spec.beta, "sigma_ss": spec.sigma_ss}, "private": {}}))

  _forge(tmp_path, release_count=np.int64(2), release_json=second_release)
  with pytest.raises(budget_lib.BudgetError, match="release_count 2 and releases_paid 1"):
    make().state()


def test_a_research_ledger_of_another_seed_is_refused(tmp_path):
  """Two research seeds write research_ledger.npz: one seed's answers are not the other's."""
  _budget(tmp_path)
  make = lambda seed: budget_lib.TeachersBudget(  # noqa: E731
      tmp_path, votes_lib.load_votes(tmp_path), rng.noise_key("aggregation"),
      mechanism="gnmax", params={"sigma": 40.0}, epsilon_max=np.inf, delta=1e-5,
      orders=ORDERS, chunk_size=16, research_seed=seed)
  make(1).answer(np.arange(5))
  with pytest.raises(budget_lib.BudgetError, match="its noise is 'research:1'"):
    make(2).answer(np.arange(5))


def test_a_release_clipped_above_the_budgets_epsilon_is_refused(tmp_path):
  """A stored release is published as it is: its ε and the range it was clipped to are at
  most the budget's data-independent ε."""
  make = _releasing_budget(tmp_path)
  make().answer(np.arange(5))
  spec = budget_lib.ReleaseSpec(order=8.0, beta=0.02, sigma_ss=10.0)

  def above(a):
    eps = float(a["ledger_epsilon"])
    return np.str_(json.dumps({"public": {
        "epsilon_released": 1.5 * eps, "clipped_to": [0.0, 2.0 * eps], "release": 1,
        "num_charged": 5, "order": spec.order, "beta": spec.beta,
        "sigma_ss": spec.sigma_ss}, "private": {}}))

  _forge(tmp_path, release_count=np.int64(1), release_json=above)
  with pytest.raises(budget_lib.BudgetError, match="release_json is not release 1"):
    make().state()


def test_the_votes_digest_is_salted_with_the_files_random_bytes(tmp_path):
  """labels.npz carries the digest: unsalted, anyone could test guessed votes against it."""
  def by_hand(*arrays):
    h = hashlib.sha256()
    for a in map(np.ascontiguousarray, arrays):
      h.update(f"{a.dtype.str}|{a.shape}|".encode())
      h.update(a.tobytes())
    return h.hexdigest()

  votes = np.array([[3, 1], [0, 4]], np.int32)
  digests = []
  for name in ("a", "b"):
    votes_lib.save_votes(tmp_path / name / "votes.npz", votes, np.array([0, 1], np.int32))
    loaded = votes_lib.load_votes(tmp_path / name)
    assert np.asarray(loaded["salt"]).size == 16
    digests.append(budget_lib.votes_digest(loaded))
    assert digests[-1] == by_hand(loaded["votes"], loaded["index"], loaded["salt"])
    assert digests[-1] != by_hand(loaded["votes"], loaded["index"])
  assert digests[0] != digests[1]   # the same votes, another salt


def test_a_ledger_of_the_journals_generation_but_another_write_is_refused(tmp_path):
  """Two copies of the teachers spent once each on other rows: b's generation 1 put beside
  a's journal (generation 1, another hash) would forget the rows a paid for."""
  make_a = _budget(tmp_path / "a")
  shutil.copytree(tmp_path / "a", tmp_path / "b")   # the same votes.npz: the same digest
  make_b = lambda: budget_lib.TeachersBudget(  # noqa: E731
      tmp_path / "b", votes_lib.load_votes(tmp_path / "b"), rng.noise_key("aggregation"),
      mechanism="gnmax", params={"sigma": 40.0}, epsilon_max=20.0, delta=1e-5,
      orders=ORDERS, chunk_size=16)
  make_a().answer(np.arange(5))
  make_b().answer(np.arange(5, 10))
  shutil.copyfile(tmp_path / "b" / budget_lib.LEDGER_FILE,
                  tmp_path / "a" / budget_lib.LEDGER_FILE)
  with pytest.raises(budget_lib.BudgetError, match="is not the newest copy"):
    make_a().answer(np.arange(5))
