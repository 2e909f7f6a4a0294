"""The vmapped / chunked / looped teacher ensemble."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from pate_jax import data, models, teachers

T, N = 6, 40


@pytest.fixture(scope="module")
def shards():
  ds = data.load_image_dataset("digits")
  x, y, _ = data.partition(jax.random.key(0), ds.train_images, ds.train_labels, T)
  return jnp.asarray(data.to_float(x[:, :N])), jnp.asarray(y[:, :N]), ds


def _fns(batch_size=None, max_shift=1):
  return teachers.TeacherFns(models.get_model("mlp", 10, hidden=(32,)), optax.adam(1e-2),
                             batch_size, max_shift)


def _train(ensemble, shards, segments):
  x, y, _ = shards
  keys = jax.random.split(jax.random.key(1), T)
  state = ensemble.init(jax.random.split(jax.random.key(2), T), x[0])
  start = 0
  for n in segments:
    state, loss = ensemble.train(state, keys, x, y, start, n)
    start += n
  return state, loss


def _max_diff(a, b):
  return max(float(jnp.abs(u - v).max()) for u, v in zip(jax.tree.leaves(a), jax.tree.leaves(b)))


def test_strategies_agree(shards):
  fns = _fns(batch_size=16)
  states = {s: _train(teachers.Ensemble(fns, s, chunk_size=4), shards, [12])[0]
            for s in teachers.STRATEGIES}
  x_test = jnp.asarray(data.to_float(shards[2].test_images))
  preds = {s: teachers.Ensemble(fns, s).predict(st["params"], x_test, query_chunk=200)
           for s, st in states.items()}
  for s in ("vmap", "chunked"):
    assert _max_diff(states["loop"], states[s]) < 1e-4  # float re-association only
    np.testing.assert_array_equal(preds["loop"], preds[s])


def test_segments_do_not_change_results(shards):
  ens = teachers.Ensemble(_fns(batch_size=8), "vmap")
  one, _ = _train(ens, shards, [10])
  three, _ = _train(ens, shards, [4, 3, 3])
  assert _max_diff(one, three) == 0.0  # bit-identical: what makes resume exact


def test_teachers_differ_and_learn(shards):
  ens = teachers.Ensemble(_fns(), "vmap")
  state, loss = _train(ens, shards, [1])
  state2, loss2 = _train(ens, shards, [60])
  assert loss.shape == (T,) and jnp.all(loss2 < loss)
  w = state2["params"]["params"]["Dense_0"]["kernel"]
  assert w.shape[0] == T and not jnp.allclose(w[0], w[1])
  x_test = jnp.asarray(data.to_float(shards[2].test_images))
  preds = ens.predict(state2["params"], x_test)
  acc = (preds == shards[2].test_labels).mean(axis=1)
  assert preds.shape == (T, len(x_test)) and acc.min() > 0.5  # 40 examples, 10 classes


def test_loop_compiles_single_teacher_once(shards):
  ens = teachers.Ensemble(_fns(), "loop")
  _train(ens, shards, [2, 2])
  assert ens._segment_one._cache_size() == 1  # pylint: disable=protected-access


def test_random_shift():
  img = jnp.zeros((3, 5, 5, 1)).at[:, 2, 2, 0].set(1.0)
  out = teachers.random_shift(jax.random.key(0), img, 1)
  assert out.shape == img.shape and jnp.all(out.sum(axis=(1, 2, 3)) == 1.0)
  flat = jnp.argmax(out[..., 0].reshape(3, 25), axis=1)
  assert jnp.all(jnp.abs(flat // 5 - 2) <= 1) and jnp.all(jnp.abs(flat % 5 - 2) <= 1)
  assert jnp.array_equal(teachers.random_shift(jax.random.key(0), img, 0), img)


def test_unknown_strategy():
  with pytest.raises(ValueError, match="strategy"):
    teachers.Ensemble(_fns(), "pmap")


def test_default_strategy():
  assert teachers.default_strategy("cpu") == "loop"
  assert teachers.default_strategy("gpu") == "vmap"
  assert teachers.default_strategy("tpu") == "vmap"


def test_models_by_name():
  x = jnp.zeros((2, 32, 32, 3))
  for name in ("mnist_cnn", "svhn_cnn", "mlp"):
    model = models.get_model(name, 7)
    params = model.init(jax.random.key(0), x)
    assert model.apply(params, x).shape == (2, 7)
  with pytest.raises(ValueError, match="unknown model 'resnet'"):
    models.get_model("resnet", 10)
