"""Tests for pate_jax.labels: the labels.npz writer and reader."""

from __future__ import annotations

import numpy as np
import pytest

from pate_jax import labels as labels_lib


def _record():
  return dict(labels=np.array([3, -1, 0]), status=np.array([0, 1, 2]),
              true_labels=np.array([3, 2, 1]), dataset_index=np.array([10, 11, 12]),
              ledger_cost=np.array([0.1, 0.2]), ledger_orders=np.array([2.0, 4.0]),
              ledger_epsilon=0.7, ledger_delta=1e-5, mechanism="gnmax")


def test_round_trip_in_a_work_directory(tmp_path):
  path = labels_lib.save_labels(tmp_path / "run", **_record())
  assert path == tmp_path / "run" / "labels.npz"
  out = labels_lib.load_labels(tmp_path / "run")
  assert set(out) == set(labels_lib.KEYS)
  np.testing.assert_array_equal(out["query_index"], [0, 1, 2])
  np.testing.assert_array_equal(out["answered"], [True, False, False])
  np.testing.assert_array_equal(out["labels"], [3, -1, 0])
  assert out["labels"].dtype == np.int32 and out["dataset_index"].dtype == np.int64
  assert out["ledger_epsilon"] == 0.7 and out["ledger_delta"] == 1e-5
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
