"""The tensorflow-datasets path of the image loaders, on tfds' mocked data.

Real SVHN and CIFAR-10 are not on the test machines. ``tfds.testing.mock_data`` stands
in for them: the builders are tfds' own (their features, image shapes and classes) and
``as_data_source`` hands back random examples instead of reading ArrayRecord files.
The mock leaves ``builder.is_prepared()`` alone, and with downloads off (the tests'
``$PATE_JAX_OFFLINE=1``) the loader reads only a prepared dataset, so
:func:`_write_prepared_metadata` writes what ``download_and_prepare`` leaves besides the
data files: ``dataset_info.json`` (with the split sizes) and ``features.json``.
"""

from __future__ import annotations

import contextlib
import json
import pathlib
from unittest import mock

import jax
import numpy as np
import pytest

tfds = pytest.importorskip("tensorflow_datasets",
                           reason="tensorflow-datasets is not installed: no tfds path to test")

# pylint: disable=g-import-not-at-top,wrong-import-position
from pate_jax import data, experiment, models, students, teachers
from pate_jax import votes as votes_lib
from pate_jax.data import _images
from pate_jax.stages import teachers as teachers_stage
# pylint: enable=g-import-not-at-top,wrong-import-position

REPO = pathlib.Path(__file__).resolve().parent.parent
N = 24  # mocked examples in every split
SPLITS = {"svhn": ("train", "test", "extra"), "cifar10": ("train", "test")}


def _tfds_name(name: str) -> str:
  return data.DATASETS[name][2]


def _write_prepared_metadata(name: str) -> None:
  """Marks ``name`` prepared in the mocked data directory (call inside ``mock_data``)."""
  builder = tfds.builder(_tfds_name(name), file_format="array_record")
  template = tfds.core.ShardedFileTemplate(data_dir=builder.data_path,
                                           dataset_name=builder.name,
                                           filetype_suffix="array_record")
  builder.info.set_splits(tfds.core.SplitDict([
      tfds.core.SplitInfo(name=split, shard_lengths=[N], num_bytes=0,
                          filename_template=template.replace(split=split))
      for split in SPLITS[name]]))
  builder.data_path.mkdir(parents=True)
  builder.info.write_to_directory(builder.data_path)


@contextlib.contextmanager
def _prepared_tfds(root: pathlib.Path):
  """tfds mocked with ``N`` examples per split, SVHN and CIFAR-10 prepared under ``root``."""
  with tfds.testing.mock_data(num_examples=N, data_dir=str(root)):
    for name in SPLITS:
      _write_prepared_metadata(name)
    yield


def _no_probe(url, *args, **kwargs):
  raise AssertionError(f"probed {url}: a prepared dataset needs no download")


@pytest.fixture
def prepared_tfds(tmp_path, monkeypatch):
  """Mocked, prepared SVHN and CIFAR-10; an empty offline directory (returned), so that no
  local copy comes first; any probe of the datasets' download sources fails the test."""
  monkeypatch.setattr(_images, "unreachable", _no_probe)
  empty = tmp_path / "data"
  empty.mkdir()
  with _prepared_tfds(tmp_path / "tensorflow_datasets"):
    yield empty


@pytest.mark.parametrize("name", sorted(SPLITS))
def test_prepared_dataset_loads_offline(prepared_tfds, tmp_path, name):
  ds = data.load_image_dataset(name, prepared_tfds, use_tfds=True, download=False)
  assert ds.name == name and ds.num_classes == 10 and not ds.fallback
  assert ds.image_shape == (32, 32, 3)
  # Where the data came from, as results files record it: the tfds name, no path.
  assert ds.source == f"tfds:{_tfds_name(name)}"
  assert str(tmp_path) not in ds.source and "/" not in ds.source
  splits = {"train": (ds.train_images, ds.train_labels),
            "test": (ds.test_images, ds.test_labels)}
  if name == "svhn":
    splits["extra"] = (ds.extra_images, ds.extra_labels)
  else:
    assert ds.extra_images is None and ds.extra_labels is None
  builder = tfds.builder(_tfds_name(name), file_format="array_record")
  for split, (images, labels) in splits.items():
    assert images.shape == (N, 32, 32, 3) and images.dtype == np.uint8, split
    assert labels.shape == (N,) and labels.dtype == np.int32, split
    assert labels.min() >= 0 and labels.max() < 10, split
    source = builder.as_data_source(split=split)  # every example, in order
    np.testing.assert_array_equal(images, np.stack([source[i]["image"] for i in range(N)]))
    np.testing.assert_array_equal(labels, [source[i]["label"] for i in range(N)])


def test_unprepared_dataset_is_downloaded_when_its_source_answers(tmp_path, monkeypatch):
  probed = []
  monkeypatch.setattr(_images, "unreachable", lambda url: probed.append(url))  # reachable
  (tmp_path / "data").mkdir()
  with tfds.testing.mock_data(num_examples=N):  # no metadata: is_prepared() is False
    with mock.patch.object(tfds.core.DatasetBuilder, "download_and_prepare",
                           autospec=True) as prepare:
      ds = data.load_image_dataset("svhn", tmp_path / "data", download=True)
  assert probed == [_images.TFDS_SOURCES["svhn"]]
  prepare.assert_called_once()
  assert ds.source == "tfds:svhn_cropped" and ds.extra_images.shape == (N, 32, 32, 3)


@pytest.mark.parametrize("download, probe, message", [
    (False, _no_probe, "downloads are off"),
    (True, lambda url: "ufldl.stanford.edu:80: OSError: offline", "is unreachable")],
    ids=["offline", "unreachable"])
def test_unprepared_dataset_is_not_found_without_a_download(tmp_path, monkeypatch, download,
                                                            probe, message):
  monkeypatch.setattr(_images, "unreachable", probe)
  (tmp_path / "data").mkdir()
  with tfds.testing.mock_data(num_examples=N):
    with mock.patch.object(tfds.core.DatasetBuilder, "download_and_prepare",
                           autospec=True) as prepare:
      with pytest.raises(FileNotFoundError, match=message):
        data.load_image_dataset("svhn", tmp_path / "data", download=download)
  prepare.assert_not_called()


def _svhn_config(data_dir: pathlib.Path):
  """configs/svhn_250.py (the paper's setting: its deeper CNN on train + extra) with 2
  teachers, a few steps and small batches."""
  config = experiment.load_script(REPO / "configs" / "svhn_250.py").get_config()
  assert config.dataset == "svhn" and config.use_extra and config.model.name == "svhn_cnn"
  config.update({"data_dir": str(data_dir), "num_teachers": 2, "num_steps": 2,
                 "checkpoint_every": 2, "batch_size": 4, "gap_plot": False,
                 "distill_temperatures": ()})
  return config


@pytest.mark.slow
def test_svhn_250_ensemble_votes_on_train_and_extra_shards(prepared_tfds):
  """The teachers stage's data and ensemble for configs/svhn_250.py, and the ensemble's
  untrained votes on the student's queries (training: the slow tests below)."""
  config = _svhn_config(prepared_tfds)
  ds, train_x, train_y, (shard_x, shard_y, dropped), _ = teachers_stage.prepare_data(config)
  assert ds.source == "tfds:svhn_cropped"
  np.testing.assert_array_equal(train_x, np.concatenate([ds.train_images, ds.extra_images]))
  np.testing.assert_array_equal(train_y, np.concatenate([ds.train_labels, ds.extra_labels]))
  assert shard_x.shape == (2, N, 32, 32, 3) and shard_y.shape == (2, N) and dropped == 0
  ensemble = teachers_stage.build_ensemble(config, ds.num_classes)
  assert isinstance(ensemble.fns.model, models.SvhnCNN)
  state = ensemble.init(jax.random.split(jax.random.key(0), 2), data.to_float(shard_x[0]))
  index, num_pool = teachers.query_set(ds)
  assert sorted(index) == list(range(N)) and num_pool == round(0.9 * N)  # small: 90/10
  votes = np.asarray(ensemble.votes(state["params"], data.to_float(ds.test_images[index]),
                                    ds.num_classes, 2))
  assert votes.shape == (N, 10)
  np.testing.assert_array_equal(votes.sum(axis=1), 2)  # one vote per teacher
  # The student's view of the same rows.
  pool, eval_x, eval_y, num_classes = students.load_public_data(
      {"dataset": "svhn", "index": index, "num_pool": num_pool,
       "labels": ds.test_labels[index]}, str(prepared_tfds))
  assert pool.shape == (num_pool, 32, 32, 3) and pool.dtype == np.float32
  assert eval_x.shape == (N - num_pool, 32, 32, 3) and num_classes == 10
  np.testing.assert_array_equal(eval_y, ds.test_labels[index[num_pool:]])


@pytest.fixture(scope="module")
def svhn_teachers(tmp_path_factory):
  """The teachers stage run with configs/svhn_250.py on mocked SVHN: ``(root, workdir,
  results)``; ``root / "data"`` is the (empty) offline directory."""
  root = tmp_path_factory.mktemp("svhn_teachers")
  (root / "data").mkdir()
  with _prepared_tfds(root / "tensorflow_datasets"):
    results = teachers_stage.run(_svhn_config(root / "data"), str(root / "work"))
  return root, root / "work", results


@pytest.mark.slow
def test_svhn_250_teachers_stage_trains_and_votes(svhn_teachers):
  root, workdir, results = svhn_teachers
  assert results["dataset"] == "svhn" and results["data_source"] == "tfds:svhn_cropped"
  assert results["examples_per_teacher"] == N  # (N train + N extra) // 2 teachers
  assert results["dropped_examples"] == 0 and results["compute_dtype"] == "bfloat16"
  written = json.loads((workdir / "results.json").read_text())["results"]
  assert written["data_source"] == "tfds:svhn_cropped" and str(root) not in written["data_source"]
  votes = votes_lib.load_votes(workdir)
  assert votes["dataset"] == "svhn" and votes["votes"].shape == (N, 10)
  np.testing.assert_array_equal(votes["votes"].sum(axis=1), 2)  # one vote per teacher
  assert votes["num_pool"] == round(0.9 * N)  # a small test set keeps a 90/10 split


@pytest.mark.slow
def test_student_step_on_svhn_votes(svhn_teachers, tmp_path):
  """One PATE-G step (configs/student_pate_g.py) on the mocked SVHN pool, labelled by the
  teachers' plurality on a few rows (not private; the aggregator is not under test)."""
  root, workdir, _ = svhn_teachers
  votes = votes_lib.load_votes(workdir)
  with _prepared_tfds(tmp_path / "tensorflow_datasets"):  # the same mocked examples
    pool, eval_x, eval_y, num_classes = students.load_public_data(votes, str(root / "data"))
  labelled = np.arange(8)
  labels = np.asarray(votes["votes"])[labelled].argmax(axis=1)
  student_data = students.make_student_data(pool, labelled, labels, eval_x, eval_y,
                                            num_classes)
  config = experiment.load_script(REPO / "configs" / "student_pate_g.py").get_config()
  student = students.build_student(config.student.name, num_classes, pool.shape[1:],
                                   **config.student.kwargs.to_dict())
  start = students.init_state(student, pool, jax.random.key(0))
  result = students.fit(student, student_data, jax.random.key(0), num_steps=1, batch_size=4,
                        segment_steps=1, log=None)
  (entry,) = result.history
  assert entry["step"] == 1 and 0.0 <= result.eval_accuracy <= 1.0
  assert all(np.isfinite(v) for v in entry.values())
  moved = [not np.array_equal(a, b) for a, b in zip(jax.tree.leaves(start),
                                                     jax.tree.leaves(result.state))]
  assert any(moved)  # the step updated the student
