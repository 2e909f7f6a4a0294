"""Bad data fails early, naming the file, the key or the column."""

from __future__ import annotations

import csv
import zipfile

import numpy as np
import pytest

from pate_jax import data
from pate_jax.data import adult

# ----------------------------------------------------------------------------- images


def _image_dir(tmp_path, train_labels, *, test_labels=None, train_keys=("image", "label")):
  mnist = tmp_path / "mnist"
  mnist.mkdir(parents=True, exist_ok=True)
  labels = {"train": np.asarray(train_labels),
            "test": np.arange(4) % 10 if test_labels is None else np.asarray(test_labels)}
  for split, y in labels.items():
    arrays = {"image": np.zeros((len(y), 28, 28), np.uint8), "label": y}
    keys = train_keys if split == "train" else ("image", "label")
    np.savez(mnist / f"{split}.npz", **{k: arrays[k] for k in keys})
  return tmp_path


def _load(directory):
  return data.load_image_dataset("mnist", directory, use_tfds=False)


def test_integral_float_labels_are_accepted(tmp_path):
  ds = _load(_image_dir(tmp_path, [3.0, 1.0, 0.0, 9.0]))
  assert ds.train_labels.dtype == np.int32
  np.testing.assert_array_equal(ds.train_labels, [3, 1, 0, 9])


@pytest.mark.parametrize("labels,bad", [
    ([3.0, np.nan, 0.0, 1.0], "nan"),
    ([3.7, 1.0, 0.0, 1.0], "3.7"),
    ([3.0, np.inf, 0.0, 1.0], "inf"),
])
def test_nan_inf_and_fractional_labels_are_rejected(tmp_path, labels, bad):
  with pytest.raises(ValueError) as err:
    _load(_image_dir(tmp_path, labels))
  message = str(err.value)
  assert "train.npz" in message and "'label'" in message and bad in message


def test_out_of_range_labels_name_the_value(tmp_path):
  with pytest.raises(ValueError, match=r"train.npz.*'label'.*10"):
    _load(_image_dir(tmp_path, [3, 10, 0, 1]))


def test_keyless_npz_names_the_file_and_the_missing_key(tmp_path):
  with pytest.raises(ValueError, match=r"train.npz.*missing.*'label'"):
    _load(_image_dir(tmp_path, [1, 2, 3, 4], train_keys=("image",)))


@pytest.mark.parametrize("damage", ["garbage", "truncated", "bad_member"])
def test_corrupted_npz_names_the_file(tmp_path, damage):
  directory = _image_dir(tmp_path, [1, 2, 3, 4])
  path = directory / "mnist" / "train.npz"
  raw = path.read_bytes()
  if damage == "garbage":
    path.write_bytes(b"this is not a zip archive" * 10)
  elif damage == "truncated":
    path.write_bytes(raw[:len(raw) // 2])
  else:  # a zip whose 'label' member is not a .npy array
    with zipfile.ZipFile(path, "w") as z:
      z.writestr("image.npy", raw[:100])
      z.writestr("label.npy", b"garbage")
  with pytest.raises(ValueError, match=r"train.npz"):
    _load(directory)


# ----------------------------------------------------------------------------- Adult

HEADER = ["age", "workclass", "education", "marital_status", "relationship", "occupation",
          "race", "gender", "capital_gain", "capital_loss", "hours_per_week", "income"]
ROWS = [["39", "Private", "Bachelors", "Married", "Husband", "Sales", "White", "Male", "0",
         "0", "40", "0"],
        ["50", "Government", "Doctorate", "Married", "Husband", "Sales", "White", "Male",
         "5000", "0", "60", "1"]]


def _adult(tmp_path, *, header=HEADER, rows=ROWS, test_rows=ROWS, test_header=HEADER):
  for split, h, r in (("train", header, rows), ("test", test_header, test_rows)):
    path = tmp_path / "adult" / f"{split}.csv"
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="") as f:
      w = csv.writer(f)
      w.writerow(h)
      w.writerows(r)
  return tmp_path


def _without(column, header=HEADER, rows=ROWS):
  j = header.index(column)
  return [h for h in header if h != column], [r[:j] + r[j + 1:] for r in rows]


def test_adult_missing_training_column_is_an_error(tmp_path):
  header, rows = _without("age")
  with pytest.raises(ValueError, match=r"train.csv.*'age'"):
    adult.load_adult(_adult(tmp_path, header=header, rows=rows, test_header=header,
                            test_rows=rows))


def test_adult_missing_test_column_is_an_error(tmp_path):
  header, rows = _without("hours_per_week")
  with pytest.raises(ValueError, match=r"test.csv.*'hours_per_week'"):
    adult.load_adult(_adult(tmp_path, test_header=header, test_rows=rows))


def test_adult_unexpected_column_is_an_error(tmp_path):
  header = HEADER[:-1] + ["fnlwgt", "income"]
  rows = [r[:-1] + ["7", r[-1]] for r in ROWS]
  with pytest.raises(ValueError, match=r"train.csv.*'fnlwgt'"):
    adult.load_adult(_adult(tmp_path, header=header, rows=rows, test_header=header,
                            test_rows=rows))


@pytest.mark.parametrize("column,value", [
    ("age", "?"), ("age", "nan"), ("capital_gain", "inf"), ("hours_per_week", "-inf"),
    ("capital_loss", ""),
])
@pytest.mark.parametrize("split", ["train", "test"])
def test_adult_non_finite_numeric_value_is_an_error(tmp_path, column, value, split):
  bad = [list(r) for r in ROWS]
  bad[1][HEADER.index(column)] = value
  kwargs = {"rows": bad} if split == "train" else {"test_rows": bad}
  with pytest.raises(ValueError, match=rf"{split}.csv.*column '{column}'"):
    adult.load_adult(_adult(tmp_path, **kwargs))


def test_encode_rejects_non_finite_numbers():
  enc = data.fit_encoder({"x": np.array(["1", "2"])}, ["x"])
  with pytest.raises(ValueError, match=r"column 'x'.*nan"):
    data.encode(enc, {"x": np.array(["1", "nan"])})


def test_fit_encoder_numeric_columns_must_parse():
  with pytest.raises(ValueError, match=r"column 'age'.*'\?'"):
    data.fit_encoder({"age": np.array(["39", "?"])}, ["age"], numeric=["age"])
