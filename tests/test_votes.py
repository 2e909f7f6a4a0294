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


def test_save_rejects_unequal_rows(tmp_path):
  with pytest.raises(ValueError, match="sum to the number of teachers"):
    votes_lib.save_votes(tmp_path / "v.npz", [[1, 1], [3, 0]], [0, 0])


def test_load_missing(tmp_path):
  with pytest.raises(FileNotFoundError, match="train_teachers"):
    votes_lib.load_votes(tmp_path)
