"""The vectorised ablation grid (pate_jax.ablation), its loop baseline and
experiments/ablate.py (pate_jax.stages.ablation), and the per-teacher predictions of
votes.npz. One small grid, compiled once (fast_compile)."""

from __future__ import annotations

import importlib.util
import pathlib

import jax
import ml_collections
import numpy as np
import pytest

from pate_jax import ablation
from pate_jax import votes as votes_lib
from pate_jax.stages import ablation as ablation_stage

import _scripts  # tests/_scripts.py  # pylint: disable=g-bad-import-order

REPO = pathlib.Path(__file__).resolve().parent.parent
T, Q, C = 12, 40, 5
COUNTS, SCALES, DELTA = (3, 12), (2.0, 30.0), 1e-5


def _predictions(seed=0, t=T, q=Q, c=C):
  rs = np.random.RandomState(seed)
  y = rs.randint(0, c, q)
  return np.where(rs.rand(t, q) < 0.7, y, rs.randint(0, c, (t, q))), y


@pytest.fixture(scope="module")
def grid():
  preds, y = _predictions()
  keys = jax.random.split(jax.random.key(3), 2)
  return preds, y, keys, ablation.ablation_grid(preds, y, COUNTS, SCALES, keys, num_classes=C,
                                                delta=DELTA, fast_compile=True)


def test_grid_shape_and_ranges(grid):
  *_, g = grid
  for field in ablation.FIELDS:
    assert getattr(g, field).shape == (3, len(COUNTS), len(SCALES), 2), field
  np.testing.assert_array_equal(g.answered[:2], 1.0)  # LNMax, GNMax answer everything.
  assert np.all((g.answered[2] >= 0) & (g.answered[2] <= 1))
  assert np.all(g.epsilon > 0) and np.all(g.epsilon <= g.epsilon_independent + 1e-9)
  # Less noise, more ε (data-independent, per mechanism and teacher count).
  assert np.all(g.epsilon_independent[:, :, 0] > g.epsilon_independent[:, :, 1])


@pytest.mark.parametrize("cell", [(0, 1, 1, 0), (1, 0, 0, 1), (2, 1, 0, 1)])
def test_cell_equals_the_public_api(grid, cell):
  """Same key, same noise: the loop baseline (pate_jax.aggregation + the mechanism's
  accountant, cell by cell) gets the same labels (so the same accuracy) and the same ε."""
  preds, y, keys, g = grid
  m, n, s, r = cell
  votes = votes_lib.histogram(preds, C, COUNTS[n])
  got = ablation_stage.loop_cell(ablation.MECHANISMS[m], votes, y, COUNTS[n], SCALES[s],
                                 keys[r], delta=DELTA)
  want = [getattr(g, f)[cell] for f in ablation.FIELDS]
  assert got[:2] == tuple(want[:2])  # the same labels (counted) and answered queries
  np.testing.assert_allclose(got[2:], want[2:], rtol=1e-13)  # ε and its order


def test_loop_grid_over_evenly_spaced_cells_equals_the_grid(grid):
  """The benchmark's loop baseline (pate_jax.stages.ablation.loop_grid) over the cells
  grid_cells picks: the first and last cell and evenly spaced ones between, each equal to
  the vectorised grid's."""
  preds, y, keys, g = grid
  shape = g.accuracy.shape
  every = ablation_stage.grid_cells(shape)
  assert every.shape == (np.prod(shape), 4)
  np.testing.assert_array_equal(every[0], 0)
  np.testing.assert_array_equal(every[-1], np.array(shape) - 1)
  cells = ablation_stage.grid_cells(shape, 3)
  np.testing.assert_array_equal(cells[[0, -1]], every[[0, -1]])
  assert 0 < np.ravel_multi_index(tuple(cells[1]), shape) < len(every) - 1
  got, compile_s, loop_s = ablation_stage.loop_grid(preds, y, COUNTS, SCALES, keys, cells,
                                                    num_classes=C, delta=DELTA)
  want = np.stack([getattr(g, f)[tuple(cells.T)] for f in ablation.FIELDS], axis=1)
  assert got.shape == want.shape == (3, len(ablation.FIELDS)) and min(compile_s, loop_s) >= 0
  np.testing.assert_array_equal(got[:, :2], want[:, :2])
  np.testing.assert_allclose(got[:, 2:], want[:, 2:], rtol=1e-13)


def test_subset_histograms_equal_votes_histogram():
  preds, _ = _predictions(1)
  counts = np.array([1, 5, 12], np.int32)
  hists = ablation.subset_histograms(preds, counts, C)
  for k, n in enumerate(counts):
    np.testing.assert_array_equal(hists[k], votes_lib.histogram(preds, C, int(n)))
    np.testing.assert_array_equal(hists[k], votes_lib.histogram(preds[:n], C))


@pytest.mark.parametrize("override, match", [
    ({"noise_scales": (1.0, 0.0)}, "noise_scales"),
    ({"noise_scales": (-2.0,)}, "noise_scales"),
    ({"teacher_counts": (3, T + 1)}, "teacher_counts"),
    ({"teacher_counts": (0,)}, "teacher_counts"),
    ({"mechanisms": ("lnmax", "rnmax")}, "mechanisms"),
    ({"keys": np.zeros(2, np.uint32)}, "keys"),
])
def test_bad_input_names_the_argument(override, match):
  preds, y = _predictions()
  kwargs = {"teacher_counts": COUNTS, "noise_scales": SCALES,
            "keys": jax.random.split(jax.random.key(0), 2), "mechanisms": ablation.MECHANISMS,
            **override}
  with pytest.raises(ValueError, match=match):
    ablation.ablation_grid(preds, y, num_classes=C, delta=DELTA, **kwargs)


def test_votes_round_trip_with_and_without_predictions(tmp_path):
  preds, y = _predictions(2)
  votes = np.asarray(votes_lib.histogram(preds, C))
  votes_lib.save_votes(tmp_path / "a" / "votes.npz", votes, y, predictions=preds)
  out = votes_lib.load_votes(tmp_path / "a")
  assert out["predictions"].dtype == np.uint8
  np.testing.assert_array_equal(out["predictions"], preds)
  votes_lib.save_votes(tmp_path / "b" / "votes.npz", votes, y)  # the older layout
  assert "predictions" not in votes_lib.load_votes(tmp_path / "b")
  wrong = preds.copy()
  wrong[0, 3] = (wrong[0, 3] + 1) % C  # teacher 0, query 3
  with pytest.raises(ValueError, match="histogram of predictions differs from votes") as e:
    votes_lib.save_votes(tmp_path / "c" / "votes.npz", votes, y, predictions=wrong)
  # The message names the query, not its (private) histograms.
  assert str(e.value).endswith("(first at query 3)") and "[" not in str(e.value), e.value
  with pytest.raises(ValueError, match=r"predictions must be \[T=12, Q=40\]"):
    votes_lib.save_votes(tmp_path / "c" / "votes.npz", votes, y, predictions=preds[:5])


def _script():
  spec = importlib.util.spec_from_file_location("ablate", REPO / "experiments" / "ablate.py")
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  return module


def _smoke_config() -> ml_collections.ConfigDict:
  spec = importlib.util.spec_from_file_location("cfg", REPO / "configs" / "ablation_mnist.py")
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  return module.get_config("smoke")


def test_script_refuses_votes_without_predictions(tmp_path):
  preds, y = _predictions()
  votes_lib.save_votes(tmp_path / "votes.npz", votes_lib.histogram(preds, C), y)
  config = _smoke_config()
  config.votes_dir, config.num_queries = str(tmp_path), 10
  with pytest.raises(ValueError, match=r"train_teachers.*--config\.votes_dir"):
    _script().run(config, str(tmp_path / "out"))


def test_script_refuses_to_write_into_the_teachers_workdir(tmp_path):
  """The ablation's results.json and figure would replace the teachers' record: an empty
  votes_dir (which meant the workdir) and a workdir holding votes.npz are refused."""
  preds, y = _predictions()
  votes_lib.save_votes(tmp_path / "votes.npz", votes_lib.histogram(preds, C), y,
                       predictions=preds)
  with pytest.raises(ValueError, match="config.votes_dir is empty"):
    _script().run(ml_collections.ConfigDict({"votes_dir": "", "num_queries": 10}),
                  str(tmp_path))
  with pytest.raises(ValueError, match="holds a votes.npz"):
    _script().run(ml_collections.ConfigDict({"votes_dir": str(tmp_path), "num_queries": 10}),
                  str(tmp_path))
  assert sorted(p.name for p in tmp_path.iterdir()) == ["votes.npz"]


@pytest.mark.parametrize("field, value, match", [
    ("num_seeds", 0, r"^config.num_seeds must be an integer >= 1; got 0$"),
    ("repeats", 0, r"^config.repeats must be an integer >= 1; got 0$"),
    ("loop_max_cells", -1, r"^config.loop_max_cells must be an integer >= 0; got -1$"),
])
def test_script_refuses_bad_counts_before_the_grid_runs(tmp_path, field, value, match):
  """0 seeds was refused naming ``keys``, 0 repeats with "min() arg is an empty sequence"
  once the grid had compiled and run; -1 loop cells was taken as every cell."""
  preds, y = _predictions()
  votes_lib.save_votes(tmp_path / "t" / "votes.npz", votes_lib.histogram(preds, C), y,
                       predictions=preds)
  spec = importlib.util.spec_from_file_location("cfg", REPO / "configs" / "ablation_mnist.py")
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  config = module.get_config("smoke")
  config.votes_dir, config.num_queries, config[field] = str(tmp_path / "t"), 10, value
  with pytest.raises(ValueError, match=match):
    _script().run(config, str(tmp_path / "out"))
  with pytest.raises(ValueError, match=match):
    _script().plan(config)


@pytest.mark.parametrize("field, value, match", [
    ("num_queries", 0, r"^config.num_queries must be an integer >= 1; got 0$"),
    ("mechanisms", "gnmax", r"^config.mechanisms must be a non-empty tuple of mechanism names; "
                            r"got 'gnmax'$"),
    ("mechanisms", ("gnmax", "laplace"), r"^config.mechanisms must be one of .*; got 'laplace'$"),
    ("teacher_counts", (), r"^config.teacher_counts must be a non-empty tuple of integers >= 1"),
    ("teacher_counts", (0, 12), r"^config.teacher_counts must be an integer >= 1; got 0$"),
    ("noise_scales", (2.0, 0.0), r"^config.noise_scales must be > 0; got 0.0$"),
    ("noise_scales", ("x",), r"^config.noise_scales must be a real number; got 'x'$"),
    ("threshold_fraction", -0.8, r"^config.threshold_fraction must be > 0; got -0.8$"),
    ("sigma_threshold_fraction", float("nan"),
     r"^config.sigma_threshold_fraction must be finite; got nan$"),
    ("delta", 0.0, r"^config.delta must lie in \(0, 1\); got 0.0$"),
    ("max_moment", 0, r"^config.max_moment must be an integer >= 1; got 0$"),
    ("orders", (0.5, 2.0), r"^config.orders must be finite and > 1; found 0.5 at \(0,\)$"),
])
def test_script_refuses_bad_grid_settings_before_the_votes_are_read(tmp_path, field, value,
                                                                    match):
  """--dry_run accepted each; a run was refused by the library after making the work
  directory, naming its own argument (delta, not config.delta), and read a string of
  mechanisms letter by letter. Refused naming the field, before the votes are read."""
  preds, y = _predictions()
  votes_lib.save_votes(tmp_path / "t" / "votes.npz", votes_lib.histogram(preds, C), y,
                       predictions=preds)
  config = _smoke_config()
  config.votes_dir, config.num_queries = str(tmp_path / "t"), 10
  with config.ignore_type():
    config[field] = value
  loaded = []
  load = votes_lib.load_votes
  with pytest.MonkeyPatch.context() as mp:
    mp.setattr(votes_lib, "load_votes", lambda *a, **k: loaded.append(a) or load(*a, **k))
    _scripts.assert_refused_before_work(_script().run, _script().plan, config,
                                        tmp_path / "out", match)
  assert not loaded


def test_smoke_config_loads():
  spec = importlib.util.spec_from_file_location("cfg", REPO / "configs" / "ablation_mnist.py")
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  smoke = module.get_config("smoke")
  assert len(smoke.teacher_counts) * len(smoke.noise_scales) * smoke.num_seeds <= 8
  assert 250 in module.get_config("").teacher_counts
  with pytest.raises(ValueError, match="variant"):
    module.get_config("big")
