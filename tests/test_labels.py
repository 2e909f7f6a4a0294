"""Tests for pate_jax.labels: the labels.npz writer and reader."""

from __future__ import annotations

import numpy as np
import pytest

from pate_jax import labels as labels_lib
from pate_jax import ledger as ledger_lib


def _record():
  state = ledger_lib.init_ledger(np.array([0.1, 0.2]), orders=np.array([2.0, 4.0]),
                                 delta=1e-5, mechanism="gnmax", params={"sigma": 3.0},
                                 epsilon_max=10.0)
  return dict(labels=np.array([3, -1, -1]), status=np.array([0, 1, 2]),
              true_labels=np.array([3, 2, 1]), dataset_index=np.array([10, 11, 12]),
              **ledger_lib.ledger_record(state))


def test_round_trip_in_a_work_directory(tmp_path):
  path = labels_lib.save_labels(tmp_path / "run", **_record())
  assert path == tmp_path / "run" / "labels.npz"
  out = labels_lib.load_labels(tmp_path / "run")
  assert set(out) == set(labels_lib.KEYS)
  np.testing.assert_array_equal(out["query_index"], [0, 1, 2])
  np.testing.assert_array_equal(out["answered"], [True, False, False])
  np.testing.assert_array_equal(out["labels"], [3, -1, -1])
  assert out["labels"].dtype == np.int32 and out["dataset_index"].dtype == np.int64
  assert out["ledger_epsilon"] == _record()["ledger_epsilon"] and out["ledger_delta"] == 1e-5
  assert out["mechanism"] == "gnmax"
  np.testing.assert_array_equal(out["ledger_orders"], [2.0, 4.0])
  assert labels_lib.load_labels(path)["mechanism"] == "gnmax"  # The file itself.


def test_bad_files_and_arguments(tmp_path):
  with pytest.raises(FileNotFoundError, match="aggregate.py"):
    labels_lib.load_labels(tmp_path)
  np.savez(tmp_path / "labels.npz", labels=np.zeros(3))
  with pytest.raises(ValueError, match=r"labels.npz must hold the keys .*missing \['query_index'"):
    labels_lib.load_labels(tmp_path)
  with pytest.raises(ValueError, match="status must have shape"):
    labels_lib.save_labels(tmp_path / "x", **{**_record(), "status": np.zeros(2)})
  with pytest.raises(ValueError, match="ledger_cost"):
    labels_lib.save_labels(tmp_path / "x", **{**_record(), "ledger_cost": np.zeros(3)})
  with pytest.raises(ValueError, match="ledger_cost must be finite and non-negative"):
    labels_lib.save_labels(tmp_path / "x", **{**_record(), "ledger_cost": -np.ones(2)})
  with pytest.raises(ValueError, match="missing .*ledger_epsilon_max"):
    labels_lib.save_labels(tmp_path / "x", **{k: a for k, a in _record().items()
                                              if k != "ledger_epsilon_max"})


def test_a_tampered_ledger_is_refused(tmp_path):
  path = labels_lib.save_labels(tmp_path, **_record())
  with np.load(path) as f:
    arrays = dict(f)
  np.savez(path, **{**arrays, "ledger_cost": np.zeros(2)})  # ε no longer matches the cost.
  with pytest.raises(ValueError, match=f"{path}: ledger_epsilon .* is not the ε of ledger_cost"):
    labels_lib.load_labels(tmp_path)
  np.savez(path, **{**arrays, "labels": np.array([3, 1, 0])})  # A label where none was paid.
  with pytest.raises(ValueError, match="labels, answered and status must agree"):
    labels_lib.load_labels(tmp_path)
