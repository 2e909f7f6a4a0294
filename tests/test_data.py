"""Datasets, partitions and the student split."""

from __future__ import annotations

import gzip
import struct

import jax
import numpy as np
import pytest
import scipy.io

from pate_jax import data


def _write_npz(directory, n_train=12, n_test=6, shape=(28, 28, 1)):
  directory.mkdir(parents=True)
  rng = np.random.default_rng(0)
  for split, n in (("train", n_train), ("test", n_test)):
    np.savez(directory / f"{split}.npz", image=rng.integers(0, 256, (n, *shape), np.uint8),
             label=np.arange(n) % 10)


def _write_idx(path, array):
  header = struct.pack(">HBB", 0, 8, array.ndim) + struct.pack(">" + "I" * array.ndim,
                                                               *array.shape)
  with gzip.open(path, "wb") as f:
    f.write(header + array.astype(np.uint8).tobytes())


class TestPartition:

  def test_disjoint_equal_and_reports_dropped(self):
    part = data.partition_indices(jax.random.key(0), 1003, 10)
    assert part.index.shape == (10, 100)
    assert part.dropped == 3
    assert len(np.unique(part.index)) == 1000  # disjoint
    assert part.index.min() >= 0 and part.index.max() < 1003

  def test_keyed(self):
    a = data.partition_indices(jax.random.key(0), 100, 4).index
    b = data.partition_indices(jax.random.key(0), 100, 4).index
    c = data.partition_indices(jax.random.key(1), 100, 4).index
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, c)

  def test_stacks_arrays(self):
    images = np.arange(20)[:, None, None, None] * np.ones((1, 2, 2, 1))
    labels = np.arange(20)
    x, y, dropped = data.partition(jax.random.key(0), images, labels, 3)
    assert x.shape == (3, 6, 2, 2, 1) and y.shape == (3, 6) and dropped == 2
    np.testing.assert_array_equal(x[..., 0, 0, 0], y)  # rows stay paired

  @pytest.mark.parametrize("t", [0, -3])
  def test_rejects_non_positive(self, t):
    with pytest.raises(ValueError, match="num_teachers must be positive"):
      data.partition_indices(jax.random.key(0), 10, t)

  def test_rejects_more_teachers_than_examples(self):
    with pytest.raises(ValueError, match="larger than the training set"):
      data.partition_indices(jax.random.key(0), 10, 11)

  def test_rejects_non_int(self):
    with pytest.raises(ValueError, match="num_teachers must be an int"):
      data.partition_indices(jax.random.key(0), 10, 2.5)

  @pytest.mark.parametrize("n, t", [(1000, 10), (12, 3), (7, 7), (7, 1), (11, 4), (5, 5)])
  def test_every_row_is_held_once_but_the_remainder(self, n, t):
    """Shards of n // t rows each, pairwise disjoint, whose union is all but n mod t rows
    (none when t divides n): a brute-force count of each row's shards."""
    part = data.partition_indices(jax.random.key(3), n, t)
    assert part.index.shape == (t, n // t) and part.dropped == n % t
    held = np.zeros(n, np.int64)
    for shard in part.index:
      np.add.at(held, shard, 1)
    assert held.max() == 1 and held.sum() == n - n % t


class TestStudentSplit:

  def test_mnist(self):
    split = data.student_split("mnist", 10_000)
    assert len(split.pool_index) == 9_000 and len(split.eval_index) == 1_000
    both = np.concatenate([split.pool_index, split.eval_index])
    assert len(np.unique(both)) == 10_000
    assert not np.array_equal(split.pool_index, np.arange(9_000))  # shuffled
    np.testing.assert_array_equal(split.pool_index, data.student_split("mnist", 10_000).pool_index)

  def test_svhn(self):
    split = data.student_split("svhn", 26_032)
    np.testing.assert_array_equal(split.pool_index, np.arange(10_000))
    np.testing.assert_array_equal(split.eval_index, np.arange(10_000, 26_032))

  def test_small_test_set_keeps_ninety_ten(self):
    split = data.student_split("digits", 500)
    assert (len(split.pool_index), len(split.eval_index)) == (450, 50)

  def test_unknown(self):
    with pytest.raises(ValueError, match="dataset"):
      data.student_split("imagenet", 10)


class TestLoaders:

  def test_npz(self, tmp_path):
    _write_npz(tmp_path / "mnist")
    ds = data.load_image_dataset("mnist", tmp_path, use_tfds=False)
    assert ds.train_images.shape == (12, 28, 28, 1) and ds.test_labels.dtype == np.int32
    assert ds.source == "local:mnist/ in the data directory" and not ds.fallback
    assert str(tmp_path) not in ds.source  # No absolute path in results files.

  def test_env_var(self, tmp_path, monkeypatch):
    _write_npz(tmp_path / "mnist")
    monkeypatch.setenv(data.ENV_VAR, str(tmp_path))
    assert data.load_image_dataset("mnist", use_tfds=False).train_images.shape[0] == 12

  def test_idx(self, tmp_path):
    d = tmp_path / "fashion_mnist"
    d.mkdir()
    rng = np.random.default_rng(0)
    for prefix, n in (("train", 7), ("t10k", 3)):
      _write_idx(d / f"{prefix}-images-idx3-ubyte.gz", rng.integers(0, 256, (n, 28, 28)))
      _write_idx(d / f"{prefix}-labels-idx1-ubyte.gz", np.arange(n) % 10)
    ds = data.load_image_dataset("fashion_mnist", tmp_path, use_tfds=False)
    assert ds.train_images.shape == (7, 28, 28, 1)
    np.testing.assert_array_equal(ds.test_labels, [0, 1, 2])

  def test_svhn_mat(self, tmp_path):
    d = tmp_path / "svhn"
    d.mkdir()
    rng = np.random.default_rng(0)
    for split, n in (("train", 5), ("test", 4), ("extra", 3)):
      scipy.io.savemat(d / f"{split}_32x32.mat", {
          "X": rng.integers(0, 256, (32, 32, 3, n)).astype(np.uint8),
          "y": np.array([[10], [1], [2], [3], [4]][:n], np.uint8)})
    ds = data.load_image_dataset("svhn", tmp_path, use_tfds=False)
    assert ds.train_images.shape == (5, 32, 32, 3) and ds.extra_images.shape[0] == 3
    np.testing.assert_array_equal(ds.train_labels, [0, 1, 2, 3, 4])  # 10 means digit 0

  def test_wrong_shape(self, tmp_path):
    _write_npz(tmp_path / "mnist", shape=(32, 32, 3))
    with pytest.raises(ValueError, match=r"shape \(32, 32, 3\), expected \(28, 28, 1\)"):
      data.load_image_dataset("mnist", tmp_path, use_tfds=False)

  def test_unknown_dataset(self):
    with pytest.raises(ValueError, match="unknown dataset 'imagenet'"):
      data.load_image_dataset("imagenet")

  def test_missing_names_every_place(self, tmp_path):
    with pytest.raises(FileNotFoundError) as err:
      data.load_image_dataset("cifar10", tmp_path, use_tfds=False)
    message = str(err.value)
    assert "cifar10" in message and str(tmp_path / "cifar10") in message
    assert "tensorflow-datasets" in message and data.ENV_VAR in message

  def test_offline_tfds_is_reported_not_waited_on(self, tmp_path):
    pytest.importorskip("tensorflow_datasets",
                        reason="tensorflow-datasets is not installed: no tfds path to go offline")
    with pytest.raises(FileNotFoundError, match="downloads are off"):
      data.load_image_dataset("cifar10", tmp_path)

  def test_fallback_is_flagged(self, tmp_path):
    with pytest.warns(UserWarning, match="FALLING BACK"):
      ds = data.load_image_dataset("mnist", tmp_path, use_tfds=False, allow_fallback=True)
    assert ds.fallback and ds.name == "digits" and "FALLBACK" in ds.source
    assert ds.train_images.dtype == np.uint8 and ds.train_images.max() == 255
    # A data directory that does not exist is a mistyped path: no fallback.
    with pytest.raises(FileNotFoundError, match="No fallback: the data directory given"):
      data.load_image_dataset("mnist", tmp_path / "typo", use_tfds=False, allow_fallback=True)

  def test_real_mnist(self, data_dir):
    ds = data.load_image_dataset("mnist", data_dir, use_tfds=False)
    np.testing.assert_array_equal(np.bincount(ds.test_labels),
                                  [980, 1135, 1032, 1010, 982, 892, 958, 1028, 974, 1009])
    assert ds.train_images.shape == (60_000, 28, 28, 1)
    assert abs(ds.train_images.mean() - 33.318) < 1e-3


def test_data_does_not_import_tabular():
  """pate_jax.tabular builds on pate_jax.data, never the reverse (no import cycle)."""
  import ast  # pylint: disable=g-import-not-at-top
  import pathlib  # pylint: disable=g-import-not-at-top
  root = pathlib.Path(data.__file__).parent
  found = []
  for path in sorted(root.glob("*.py")):
    for node in ast.walk(ast.parse(path.read_text())):
      names = ([a.name for a in node.names] if isinstance(node, ast.Import) else
               [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
      found += [f"{path.name}: {n}" for n in names if n.startswith("pate_jax.tabular")]
  assert found == []
