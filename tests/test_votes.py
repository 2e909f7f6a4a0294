"""Vote histograms and the votes.npz hand-over."""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
import pytest

from pate_jax import votes as votes_lib


def test_histogram_counts_predictions():
  preds = jnp.array([[0, 1, 2], [0, 1, 1], [2, 1, 1]])  # T=3, Q=3
  h = votes_lib.histogram(preds, 4)
  np.testing.assert_array_equal(h, [[2, 0, 1, 0], [0, 3, 0, 0], [0, 2, 1, 0]])
  assert h.dtype == jnp.int32
  np.testing.assert_array_equal(h.sum(1), 3)


def test_histogram_rejects_bad_rank():
  with pytest.raises(ValueError, match=r"\[T, Q\]"):
    votes_lib.histogram(jnp.zeros(3, jnp.int32), 2)


def test_normalized_gap():
  v = jnp.array([[7, 2, 1], [5, 5, 0], [10, 0, 0]])
  np.testing.assert_allclose(votes_lib.normalized_gap(v), [0.5, 0.0, 1.0])


def test_roundtrip(tmp_path):
  v = np.array([[3, 1], [0, 4], [2, 2]])
  path = votes_lib.save_votes(tmp_path / "votes.npz", v, [0, 1, 1], num_pool=2, dataset="x")
  out = votes_lib.load_votes(tmp_path)  # a workdir is accepted too
  np.testing.assert_array_equal(out["votes"], v)
  assert out["votes"].dtype == np.int32 and out["num_pool"] == 2
  assert out["num_teachers"] == 4 and out["dataset"] == "x" and path.exists()
  np.testing.assert_array_equal(out["index"], [0, 1, 2])
  assert path.stat().st_mode & 0o777 == 0o600  # a function of the private data


def test_save_rejects_unequal_rows(tmp_path):
  with pytest.raises(ValueError, match="sum to the number of teachers"):
    votes_lib.save_votes(tmp_path / "v.npz", [[1, 1], [3, 0]], [0, 0])


def test_load_missing(tmp_path):
  with pytest.raises(FileNotFoundError, match="train_teachers"):
    votes_lib.load_votes(tmp_path)


def test_query_rows_balanced_and_first():
  r = np.random.default_rng(0)
  labels = r.integers(0, 10, 9_000)
  rows = votes_lib.query_rows("balanced", labels, 100, 10)
  assert len(set(rows.tolist())) == 100
  np.testing.assert_array_equal(np.bincount(labels[rows], minlength=10), np.full(10, 10))
  # Every prefix is as balanced as it can be; each class's rows come in pool order.
  for k in (7, 23, 61):
    counts = np.bincount(labels[rows[:k]], minlength=10)
    assert counts.max() - counts.min() <= 1
  for c in range(10):
    mine = rows[labels[rows] == c]
    np.testing.assert_array_equal(mine, np.flatnonzero(labels == c)[:10])
  np.testing.assert_array_equal(votes_lib.query_rows("first", labels, 5, 10), np.arange(5))
  # 105 over 10 classes: the first 5 classes get 11.
  counts = np.bincount(labels[votes_lib.query_rows("balanced", labels, 105, 10)], minlength=10)
  np.testing.assert_array_equal(counts, [11] * 5 + [10] * 5)
  # A class the pool lacks is skipped: the others fill in.
  short = np.array([1, 1, 1, 1, 0])
  np.testing.assert_array_equal(votes_lib.query_rows("balanced", short, 4, 3), [4, 0, 1, 2])
  with pytest.raises(ValueError, match="query_selection"):
    votes_lib.query_rows("random", labels, 5, 10)
  with pytest.raises(ValueError, match="num_queries"):
    votes_lib.query_rows("first", labels, 9_001, 10)


@pytest.mark.parametrize("kwargs, match", [
    ({"num_classes": 0}, "num_classes must be a positive integer"),
    ({"num_classes": 2.5}, "num_classes must be a positive integer"),
    ({"num_classes": 3, "num_teachers": 4}, r"num_teachers must be an integer in \[0, 2\]"),
    ({"num_classes": 3, "num_teachers": -1}, "num_teachers must be an integer"),
])
def test_histogram_names_a_bad_argument(kwargs, match):
  with pytest.raises(ValueError, match=match):
    votes_lib.histogram(np.array([[0, 1], [2, 2]]), **kwargs)
  np.testing.assert_array_equal(  # and counts the first teachers where asked
      votes_lib.histogram(np.array([[0, 1], [2, 2]]), 3, 1), [[1, 0, 0], [0, 1, 0]])


def test_private_files_are_the_owners_before_a_byte_is_written(tmp_path):
  """``io.open_private``: created 0600, and a file that was wider (a journal written before
  files were private) is narrowed before it is appended to."""
  from pate_jax import io  # pylint: disable=g-import-not-at-top
  old = tmp_path / "journal"
  old.write_text("1 a\n")
  old.chmod(0o644)
  with io.open_private(old, append=True) as f:
    assert old.stat().st_mode & 0o777 == 0o600  # before the write
    f.write(b"2 b\n")
  assert old.read_text() == "1 a\n2 b\n"
  with io.open_private(tmp_path / "new") as f:
    f.write(b"x")
  assert (tmp_path / "new").stat().st_mode & 0o777 == 0o600


def test_the_salt_is_fresh_when_the_same_votes_are_of_other_rows(tmp_path):
  votes = np.array([[3, 1], [2, 2]], np.int32)
  path = tmp_path / "votes.npz"
  votes_lib.save_votes(path, votes, np.array([0, 1]), index=np.array([0, 1]))
  first = votes_lib.load_votes(path)["salt"]
  votes_lib.save_votes(path, votes, np.array([0, 1]), index=np.array([0, 1]))
  np.testing.assert_array_equal(votes_lib.load_votes(path)["salt"], first)  # same rows: kept
  votes_lib.save_votes(path, votes, np.array([0, 1]), index=np.array([5, 6]))
  assert not np.array_equal(votes_lib.load_votes(path)["salt"], first)    # other rows: fresh


def test_soft_counts_are_written_checked_and_give_the_probabilities(tmp_path):
  """``soft_counts`` and their scale go into votes.npz beside the probabilities they give
  (each row over its sum: a distillation target sums to 1 even with one teacher, whose
  floors lose up to C/S); counts that are negative, fractional, of another shape or
  above ``S T`` per row are refused, naming the field."""
  v = np.array([[3, 1], [2, 2]])
  counts = np.array([[[3 * 60_000, 4 * 65_536 - 3 * 60_000 - 5], [10, 20]]])
  path = votes_lib.save_votes(tmp_path / "votes.npz", v, [0, 1], soft_counts=counts,
                          temperatures=(1.0,))
  out = votes_lib.load_votes(path)
  np.testing.assert_array_equal(out["soft_counts"], counts)
  assert out["soft_counts"].dtype == np.int32 and out["soft_count_scale"] == 65_536
  np.testing.assert_allclose(out["probabilities"],
                             counts / counts.sum(-1, keepdims=True), rtol=1e-6)
  # One teacher whose rows the floors leave 6/S short of 1: the targets still sum to 1.
  one = np.asarray(votes_lib.soft_counts(np.full((2, 10), 0.1, np.float32)))[None]
  assert one.sum(-1).max() == 65_530
  path = votes_lib.save_votes(tmp_path / "one.npz", np.eye(10, dtype=int)[[0, 1]], [0, 1],
                              soft_counts=one, temperatures=(1.0,))
  np.testing.assert_allclose(votes_lib.load_votes(path)["probabilities"].sum(-1), 1.0,
                             rtol=1e-6)
  for bad, match in ((-counts, "soft_counts must be >= 0"),
                     (counts + 0.5, "soft_counts must be integers"),
                     (counts[:, :1], "soft_counts must be integers"),
                     (counts * 2, "at most soft_count_scale")):
    with pytest.raises(ValueError, match=match):
      votes_lib.save_votes(tmp_path / "bad.npz", v, [0, 1], soft_counts=bad, temperatures=(1.0,),
                       probabilities=np.zeros((1, 2, 2)))
  with pytest.raises(ValueError, match="soft_count_scale"):
    votes_lib.save_votes(tmp_path / "bad.npz", v, [0, 1], soft_counts=counts, temperatures=(1.0,),
                     soft_count_scale=0)


def test_soft_counts_of_any_floats_are_rows_of_at_most_the_scale():
  """Probabilities summing past 1 by float rounding, all ones, NaN, negatives: every row
  of counts is >= 0 and sums to at most S; a probability vector loses < 1 per entry."""
  rng = np.random.default_rng(0)
  p = rng.dirichlet(np.ones(10), size=500).astype(np.float32)
  up = np.nextafter(p, np.float32(2))
  for x in (p, up, np.ones((4, 10)), np.full((4, 10), np.nan), rng.uniform(-1, 2, (50, 10))):
    c = np.asarray(votes_lib.soft_counts(x))
    assert c.dtype == np.int32 and c.min() >= 0 and c.sum(-1).max() <= votes_lib.SOFT_COUNT_SCALE
  c = np.asarray(votes_lib.soft_counts(up))
  assert np.abs(c / votes_lib.SOFT_COUNT_SCALE - p).max() < 2.0 / votes_lib.SOFT_COUNT_SCALE
  assert np.asarray(votes_lib.soft_counts(p, scale=4)).sum(-1).max() <= 4
  for scale in (0, 2**31):
    with pytest.raises(ValueError, match="scale"):
      votes_lib.soft_counts(p, scale=scale)


def test_soft_counts_divide_a_row_summing_past_one_by_its_sum():
  """A row summing past 1 is divided by its sum before the floor (all ones: S/C each), one
  summing below 1 is not: its floors are ⌊S·p⌋ (float32, as computed)."""
  s = votes_lib.SOFT_COUNT_SCALE
  np.testing.assert_array_equal(votes_lib.soft_counts(np.ones((1, 4))), [[s // 4] * 4])
  np.testing.assert_array_equal(votes_lib.soft_counts([[0.6, 0.6]]), [[s // 2, s // 2]])
  low = np.array([[0.2, 0.3]], np.float32)
  np.testing.assert_array_equal(votes_lib.soft_counts(low), np.floor(low * np.float32(s)))


def test_soft_counts_take_the_floors_excess_over_the_scale_from_the_largest_entry():
  """At a large scale the floors of a float32 row can pass S (1/3 rounds up: three floors
  of S/3 + a few exceed S by 2 at S = 2^26): the excess comes off the largest entry (the
  first on a tie), so the row sums to S exactly, not to a zero row."""
  scale = 2**26
  third = np.full((1, 3), np.float32(1) / np.float32(3), np.float32)
  p = third / np.maximum(third.sum(-1, keepdims=True, dtype=np.float32), np.float32(1))
  floors = np.floor(p * np.float32(scale)).astype(np.int64)
  excess = int(floors.sum()) - scale
  assert excess > 0  # the case this test is about
  want = floors.copy()
  want[0, 0] -= excess
  c = np.asarray(votes_lib.soft_counts(third, scale=scale))
  np.testing.assert_array_equal(c, want)
  assert c.sum() == scale


def test_soft_count_sums_that_wrap_are_refused():
  """Rows were summed in the counts' integer dtype: four int64 counts of 2**62 sum to 0."""
  for counts in (np.array([[2**62] * 4], np.int64), np.array([[2**63, 2**63, 3]], np.uint64)):
    with pytest.raises(ValueError, match="soft_counts must be >= 0"):
      votes_lib.check_soft_counts(counts, 10, 2**16)


def test_soft_counts_whose_scale_times_teachers_passes_int32_are_refused():
  """soft_counts are kept as int32: with S·T >= 2**31 a valid count wrapped negative."""
  t = 40_000
  arrays = {"votes": np.array([[t, 0]], np.int32), "labels": np.array([0]),
            "index": np.array([0]), "num_pool": np.int64(1), "num_teachers": np.int64(t),
            "dataset": np.str_("x"), "probabilities": np.array([[[1.0, 0.0]]], np.float32),
            "temperatures": np.array([1.0], np.float32),
            "soft_counts": np.array([[[t * 2**16, 0]]], np.int64),
            "soft_count_scale": np.int64(2**16)}
  with pytest.raises(ValueError, match="soft_count_scale × num_teachers must be < 2"):
    votes_lib.check_votes(arrays, "votes.npz")


def test_votes_npz_is_stored_so_its_size_follows_the_shapes_only(tmp_path):
  """Compressed, votes.npz's size (and the seconds spent writing it, inside the teachers'
  publishable phases) would follow how much the teachers agree: stored, two ensembles of
  the same shapes, unanimous and split, give files of one size."""
  import zipfile  # pylint: disable=g-import-not-at-top
  rng = np.random.default_rng(0)
  sizes = []
  for name, predictions in (("unanimous", np.zeros((50, 200), np.int64)),
                            ("split", rng.integers(0, 10, (50, 200)))):
    votes = np.asarray(votes_lib.histogram(jnp.asarray(predictions), 10))
    path = votes_lib.save_votes(tmp_path / name / "votes.npz", votes, np.zeros(200, int),
                                dataset="toy", predictions=predictions.astype(np.uint8))
    with zipfile.ZipFile(path) as z:
      assert {i.compress_type for i in z.infolist()} == {zipfile.ZIP_STORED}
    sizes.append(path.stat().st_size)
  assert sizes[0] == sizes[1]


def test_soft_counts_take_the_excess_from_the_largest_of_unequal_entries():
  """The floors of 14/33, 16/33, 3/33 (float32) at S = 2^26 exceed S: the excess comes off
  the largest entry (16/33), not the smallest or the first, and the row sums to S."""
  scale = 2**26
  x = np.array([[14, 16, 3]], np.float32) / np.float32(33)
  p = x / np.maximum(x.sum(-1, keepdims=True, dtype=np.float32), np.float32(1))
  want = np.floor(p * np.float32(scale)).astype(np.int64)
  excess = int(want.sum()) - scale
  assert excess > 0  # the case this test is about
  want[0, 1] -= excess
  c = np.asarray(votes_lib.soft_counts(x, scale=scale))
  np.testing.assert_array_equal(c, want)
  assert c.sum() == scale


def test_check_soft_counts_bounds_each_rows_sum_by_scale_times_teachers():
  """T teachers' summed counts of scale S: each entry and each row's sum at most S·T (the
  sensitivity √2 S of one teacher holds only for such rows); a row over it by one count
  is refused though every entry is within it."""
  ok = np.array([[3, 5], [8, 0]])
  np.testing.assert_array_equal(votes_lib.check_soft_counts(ok, 2, 4), ok)
  for bad in ([[4, 5]], [[8, 8]], [[9, 0]], [[-1, 2]]):
    with pytest.raises(ValueError, match="soft_counts must be >= 0 with rows summing"):
      votes_lib.check_soft_counts(np.array(bad), 2, 4)


def _raw_votes_file(path, **changes):
  """A votes.npz written field by field (not through save_votes), with ``changes``."""
  arrays = {"votes": np.array([[3, 1], [2, 2]], np.int32), "labels": np.array([0, 1]),
            "index": np.array([0, 1]), "num_pool": np.int64(2), "num_teachers": np.int64(4),
            "dataset": np.str_("x"), "salt": np.arange(16, dtype=np.uint8),
            "predictions": np.array([[0, 0], [0, 0], [0, 1], [1, 1]], np.uint8)}
  arrays.update(changes)
  np.savez(path, **arrays)
  return path


@pytest.mark.parametrize("changes, match", [
    ({"num_pool": np.int64(3)}, r"num_pool must be an integer in \[0, Q=2\]"),
    ({"num_pool": np.int64(-1)}, r"num_pool must be an integer in \[0, Q=2\]"),
    ({"salt": np.arange(16, dtype=np.int64)}, "salt must be 16 bytes"),
    ({"salt": np.arange(15, dtype=np.uint8)}, "salt must be 16 bytes"),
])
def test_load_refuses_a_pool_past_the_votes_or_a_salt_not_of_16_bytes(tmp_path, changes, match):
  good = votes_lib.load_votes(_raw_votes_file(tmp_path / "good.npz"))
  assert good["num_teachers"] == 4 and good["num_pool"] == 2
  with pytest.raises(ValueError, match=match):
    votes_lib.load_votes(_raw_votes_file(tmp_path / "votes.npz", **changes))
