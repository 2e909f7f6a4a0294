"""The consistent-answer defense against near-duplicate queries (configs/attack_near_duplicates.py).

Unit tests of the near-duplicate makers and of the defended answers, and one tiny end-to-end
run of ``experiments/attack.py --config.setting=near_duplicates`` (digits, few teachers).
"""

from __future__ import annotations

import json
import pathlib

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from pate_jax import aggregation as agg
from pate_jax import attacks, experiment

REPO = pathlib.Path(__file__).resolve().parent.parent


def _image(shape=(6, 5, 1)):
  """An 8-bit-like image with zeros, ones and values in between."""
  x = np.arange(np.prod(shape)).reshape(shape) % 7 / 6.0
  return x.astype(np.float32)


@pytest.mark.parametrize("make", [attacks.one_pixel_copies, attacks.pixel_step_copies])
def test_one_pixel_copies_change_exactly_one_value_within_bounds(make):
  x = _image()
  copies = np.asarray(make(jax.random.key(0), x, 300))
  assert copies.shape == (300,) + x.shape and copies.dtype == np.float32
  assert np.all((copies != x[None]).reshape(300, -1).sum(-1) == 1)
  assert copies.min() >= 0 and copies.max() <= 1


def test_pixel_step_moves_by_one_level_and_one_pixel_copies_are_distinct():
  x = _image()
  step = np.asarray(attacks.pixel_step_copies(jax.random.key(1), x, 200))
  diff = np.abs(step - x[None]).reshape(200, -1).max(-1)
  np.testing.assert_allclose(diff, 1 / 255, rtol=1e-4)
  x8 = np.round(x * 255) / 255  # on the 8-bit grid: the new value is another level
  pixel = np.asarray(attacks.one_pixel_copies(jax.random.key(2), x8, 1000))
  assert len({c.tobytes() for c in pixel}) == 1000
  np.testing.assert_allclose(pixel * 255, np.round(pixel * 255), atol=1e-3)
  with pytest.raises(ValueError, match="num"):
    attacks.one_pixel_copies(jax.random.key(2), x8, x8.size * 255 + 1)


def _one_pixel_eager(key, x, num, levels):
  """:func:`attacks.one_pixel_copies` as it was written op by op, before it was compiled."""
  flat = jnp.asarray(x).reshape(-1)
  change = jax.random.choice(key, flat.size * levels, (num,), replace=False)
  pos, k = change // levels, change % levels
  k = jnp.where(k >= jnp.round(flat[pos] * levels), k + 1, k)
  out = jnp.broadcast_to(flat, (num, flat.size)).at[jnp.arange(num), pos].set(k / levels)
  return out.reshape((num,) + x.shape)


def _pixel_step_eager(key, x, num, step):
  """:func:`attacks.pixel_step_copies` as it was written op by op, before it was compiled."""
  flat = jnp.asarray(x).reshape(-1)
  k_pos, k_sign = jax.random.split(key)
  pos = jax.random.randint(k_pos, (num,), 0, flat.size)
  sign = jnp.where(jax.random.bernoulli(k_sign, 0.5, (num,)), 1.0, -1.0)
  old = flat[pos]
  moved = old + sign * step
  new = jnp.clip(jnp.where((moved < 0) | (moved > 1), old - sign * step, moved), 0.0, 1.0)
  out = jnp.broadcast_to(flat, (num, flat.size)).at[jnp.arange(num), pos].set(new)
  return out.reshape((num,) + x.shape)


@pytest.mark.parametrize("seed, shape, num, levels, step", [
    (0, (6, 5, 1), 300, 255, None),
    pytest.param(2, (4, 3, 3), 70, 7, 0.25, marks=pytest.mark.slow)])  # its own compiles
def test_compiled_copies_equal_the_op_by_op_formula(seed, shape, num, levels, step):
  """One compiled program per call gives the copies the op-by-op formula gave, bit for bit
  (the defaults; other levels and step on another shape). The formula compiles each of its
  operations: some seconds per shape."""
  key, x = jax.random.key(seed), _image(shape)
  pixel = attacks.one_pixel_copies(key, x, num, levels=levels)
  np.testing.assert_array_equal(pixel, _one_pixel_eager(key, x, num, levels))
  moved = attacks.pixel_step_copies(key, x, num, **({} if step is None else {"step": step}))
  np.testing.assert_array_equal(moved, _pixel_step_eager(key, x, num, step or 1 / 255))
  assert pixel.dtype == moved.dtype == np.float32


def test_gaussian_copies_are_clipped_and_near():
  x = _image()
  copies = np.asarray(attacks.gaussian_copies(jax.random.key(3), x, 50))
  assert copies.min() >= 0 and copies.max() <= 1
  inside = (x > 0.1) & (x < 0.9)
  assert abs(np.std((copies - x[None])[:, inside]) * 255 - 1) < 0.1
  batch = np.asarray(attacks.near_duplicates(jax.random.key(4), np.stack([x, 1 - x]), 7, "gauss"))
  assert batch.shape == (2, 7) + x.shape


@pytest.mark.parametrize("bad", [{"image": np.full((2, 2), 1.5)}, {"num": 0}, {"kind": "blur"}])
def test_bad_arguments_raise(bad):
  args = {"image": _image(), "num": 3, "kind": "pixel", **bad}
  with pytest.raises(ValueError, match=next(iter(bad))):
    attacks.near_duplicates(jax.random.key(0), args["image"][None], args["num"], args["kind"])


def test_distinct_bytes_give_distinct_query_ids_and_repeats_one_answer():
  x = _image()
  copies = np.asarray(attacks.near_duplicates(jax.random.key(5), x[None], 500, "pixel"))[0]
  ids = agg.hash_query_ids(copies)
  assert len({r.tobytes() for r in ids}) == 500
  repeated = agg.hash_query_ids(np.broadcast_to(x, (500,) + x.shape))
  assert len({r.tobytes() for r in repeated}) == 1
  votes = np.broadcast_to(np.array([3, 3, 2, 2]), (500, 4))
  key = jax.random.key(6)
  assert (attacks.gnmax_counts(key, votes, 2.0, repeated) > 0).sum() == 1  # the defense
  assert (attacks.gnmax_counts(key, votes, 2.0, ids) > 0).sum() == 4      # a new query each


@pytest.mark.slow
def test_near_duplicates_setting_end_to_end(tmp_path):
  script = experiment.load_script(REPO / "experiments" / "attack.py")
  c = experiment.load_config(str(REPO / "configs" / "attack_near_duplicates.py") + ":cpu")
  t = c.teachers
  t.dataset, t.num_teachers, t.num_steps, t.checkpoint_every = "digits", 8, 10, 10
  c.num_candidates, c.num_histograms, c.num_queries, c.sigma, c.num_seeds = 40, 2, 150, 3.0, 2
  del c.variants["projected"]
  results = script.run(c, str(tmp_path))
  record = json.loads((tmp_path / "results.json").read_text())
  assert record["disclosure"] == experiment.MEASUREMENT
  assert record["results"]["setting"] == "near_duplicates"
  assert all(pathlib.Path(p).stat().st_size > 0 for p in results["figures"])
  s = results["summary"]
  cases = ["exact_fresh_noise", "exact_defense", "pixel_defense", "pixel_step_defense",
           "gauss_defense"]
  assert results["cases"] == cases
  for case in cases:
    assert all(np.isfinite(e) and e >= 0 for e in s[case]["mean_error"].values()), case
  assert s["exact_defense"]["all_answers_identical_fraction"] == 1.0   # the cache
  unanimous = np.array([np.count_nonzero(r["votes"]) == 1 for r in results["histograms"]])
  for kind in ("pixel", "gauss"):
    nd = results["near_duplicates"][kind]
    assert nd["distinct_query_ids_per_query"] == nd["distinct_inputs_per_query"] == [150, 150]
    assert 0 <= nd["histogram_changed_fraction"] <= 1 and nd["mean_l1_change_votes"] >= 0
    if not unanimous.all():  # fresh noise per near-duplicate: the answers vary
      assert s[f"{kind}_defense"]["all_answers_identical_fraction"] < 1


@pytest.mark.parametrize("field, value, match", [
    ("num_teachers", 0, r"^config\.teachers\.num_teachers must be an integer >= 1; got 0$"),
    ("max_shift", 1000, r"^config\.teachers\.max_shift must be smaller than the images "),
])
def test_near_duplicates_names_the_teachers_settings_as_nested_fields(tmp_path, field, value,
                                                                      match):
  """The teachers it trains were refused as config.<field>, where the user types
  --config.teachers.<field>."""
  script = experiment.load_script(REPO / "experiments" / "attack.py")
  c = experiment.load_config(str(REPO / "configs" / "attack_near_duplicates.py") + ":cpu")
  c.teachers.dataset = "digits"
  c.teachers[field] = value
  with pytest.raises(ValueError, match=match):
    script.run(c, str(tmp_path))
