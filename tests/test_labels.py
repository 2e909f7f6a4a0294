"""Tests for pate_jax.labels: the labels.npz writer and reader, and its check against a
budget's record."""

from __future__ import annotations

import os

import numpy as np
import pytest

from pate_jax import labels as labels_lib


def _record(**override):
  record = dict(labels=np.array([3, -1, -1]), status=np.array([0, 1, 2]),
                true_labels=np.array([3, 2, 1]), dataset_index=np.array([10, 11, 12]),
                query_index=np.array([0, 1, 2]), votes_digest="ab" * 32, mechanism="gnmax",
                epsilon=1.25, epsilon_max=2.0, delta=1e-5, noise="secret")
  record.update(override)
  return record


def test_round_trip_in_a_work_directory(tmp_path):
  path = labels_lib.save_labels(tmp_path / "run", **_record())
  assert path == tmp_path / "run" / "labels.npz"
  out = labels_lib.load_labels(tmp_path / "run", votes_digest="ab" * 32)
  assert set(out) == set(labels_lib.KEYS) | {"sampler_delta"}
  assert out["sampler_delta"] is None  # not given: not written
  np.testing.assert_array_equal(out["query_index"], [0, 1, 2])
  np.testing.assert_array_equal(out["answered"], [True, False, False])
  np.testing.assert_array_equal(out["labels"], [3, -1, -1])
  assert out["labels"].dtype == np.int32 and out["dataset_index"].dtype == np.int64
  assert (out["epsilon"], out["epsilon_max"], out["delta"]) == (1.25, 2.0, 1e-5)
  assert out["mechanism"] == "gnmax" and out["noise"] == "secret"
  assert labels_lib.load_labels(path)["mechanism"] == "gnmax"  # The file itself.


def test_the_samplers_delta_term_travels_with_the_labels(tmp_path):
  """What the float64 samplers add to δ (public) is written beside δ, and read back; a
  file written without it reads as None."""
  labels_lib.save_labels(tmp_path, **_record(sampler_delta=2.5e-10))
  assert labels_lib.load_labels(tmp_path)["sampler_delta"] == 2.5e-10


def test_the_file_holds_no_private_value(tmp_path):
  # labels.npz goes to the student: the released labels and public facts only.
  path = labels_lib.save_labels(tmp_path, **_record())
  with np.load(path) as f:
    assert sorted(f.files) == sorted(labels_lib.KEYS)
  assert not any("private" in k or "cost" in k or "order" in k for k in labels_lib.KEYS)


def test_research_noise_labels_are_owner_only(tmp_path):
  """With a recorded seed the noise is public and the labels bound the votes beyond any ε:
  the file and its directory are the owner's only; secret noise's labels keep the umask's."""
  old = os.umask(0o022)
  try:
    research = labels_lib.save_labels(tmp_path / "research", **_record(noise="research:0"))
    secret = labels_lib.save_labels(tmp_path / "secret", **_record())
  finally:
    os.umask(old)
  assert research.stat().st_mode & 0o777 == 0o600
  assert research.parent.stat().st_mode & 0o777 == 0o700
  assert secret.stat().st_mode & 0o777 == 0o644
  assert secret.parent.stat().st_mode & 0o777 == 0o755
  assert labels_lib.load_labels(research)["noise"] == "research:0"


def test_bad_files_and_arguments(tmp_path):
  with pytest.raises(FileNotFoundError, match="aggregate.py"):
    labels_lib.load_labels(tmp_path)
  np.savez(tmp_path / "labels.npz", labels=np.zeros(3))
  with pytest.raises(ValueError, match=r"labels.npz must hold the keys .*missing \['query_index'"):
    labels_lib.load_labels(tmp_path)
  with pytest.raises(ValueError, match="status must have shape"):
    labels_lib.save_labels(tmp_path / "x", **_record(status=np.zeros(2)))
  with pytest.raises(ValueError, match="labels, answered and status must agree"):
    labels_lib.save_labels(tmp_path / "x", **_record(labels=np.array([3, 1, -1])))


def test_labels_of_other_votes_and_tampered_outcomes_are_refused(tmp_path):
  path = labels_lib.save_labels(tmp_path, **_record())
  with pytest.raises(ValueError, match="answered on other votes"):
    labels_lib.load_labels(tmp_path, votes_digest="cd" * 32)
  with np.load(path) as f:
    arrays = dict(f)
  np.savez(path, **{**arrays, "labels": np.array([3, 1, 0])})  # A label where none was paid.
  with pytest.raises(ValueError, match="labels, answered and status must agree"):
    labels_lib.load_labels(tmp_path)
  np.savez(path, **{**arrays, "noise": np.array("none")})  # Neither secret nor a seed.
  with pytest.raises(ValueError, match=r"noise must be 'secret' or 'research:<seed>', got 'none'"):
    labels_lib.load_labels(tmp_path)
  np.savez(path, **{**arrays, "noise": np.array("public:7")})  # A seed of another kind.
  with pytest.raises(ValueError, match=r"labels.npz: noise must be .*, got 'public:7'"):
    labels_lib.load_labels(tmp_path)


def test_the_noise_seed_of_loaded_labels(tmp_path):
  labels_lib.save_labels(tmp_path / "s", **_record())
  labels_lib.save_labels(tmp_path / "r", **_record(noise="research:7"))
  assert labels_lib.noise_seed(labels_lib.load_labels(tmp_path / "s")) is None
  assert labels_lib.noise_seed(labels_lib.load_labels(tmp_path / "r")) == 7


def test_check_against_the_budgets_record():
  labels = labels_lib.load_labels  # noqa: F841  (the dict below is what it returns)
  f = {"query_index": np.array([0, 1, 2]), "labels": np.array([3, -1, -1]),
       "status": np.array([0, 1, 2])}
  rows, row_labels, row_status = np.array([1, 0, 7]), np.array([-1, 3, 5]), np.array([1, 0, 0])
  labels_lib.check_against(f, rows, row_labels, row_status, "x")  # Row 2 was refused: free.
  with pytest.raises(ValueError, match="x: row 0 is not the teachers' budget's answer"):
    labels_lib.check_against(f, rows, np.array([-1, 4, 5]), row_status, "x")  # Spliced.
  with pytest.raises(ValueError, match="row 1"):
    labels_lib.check_against(f, np.array([0]), np.array([3]), np.array([0]), "x")  # Unpaid.


@pytest.mark.parametrize("override", [
    dict(epsilon=float("nan")), dict(epsilon=-1.0), dict(epsilon=float("inf")),
    dict(epsilon=5.0), dict(delta=3.0), dict(epsilon_max=float("nan")),
    dict(epsilon_max=0.0)])
def test_a_published_epsilon_that_is_not_a_number_within_its_budget_is_refused(tmp_path,
                                                                              override):
  """load_labels read epsilon with float(): a NaN, negative, infinite or over-budget ε of
  answered labels was reported as theirs (the tabular student's results.json copies it)."""
  path = labels_lib.save_labels(tmp_path, **_record(**override))
  with pytest.raises(ValueError, match="epsilon must be a finite number >= 0"):
    labels_lib.load_labels(path)


def test_labels_of_a_ledger_that_answered_nothing_load_though_their_epsilon_passes_the_max(
    tmp_path):
  """Every query refused by a tiny ε_max: the ledger's ε is its accountant's floor, above
  ε_max, and the stage writes those labels; a rerun and the student read them back."""
  path = labels_lib.save_labels(tmp_path, **_record(
      labels=np.array([-1, -1, -1]), status=np.array([2, 2, 2]), epsilon=0.0035,
      epsilon_max=0.001))
  assert labels_lib.load_labels(path)["epsilon"] == 0.0035


def test_a_non_scalar_epsilon_is_refused_naming_the_file(tmp_path):
  path = labels_lib.save_labels(tmp_path, **_record())
  with np.load(path) as f:
    arrays = dict(f)
  np.savez(path, **{**arrays, "epsilon": np.array([1.0, 2.0])})  # was a bare TypeError
  with pytest.raises(ValueError, match=r"labels\.npz: epsilon must be a float64 scalar"):
    labels_lib.load_labels(path)
