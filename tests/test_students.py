"""Students on tiny shapes: the GAN step, VAT, active learning's budget, data checks, resume."""

from __future__ import annotations

import functools
import json
import pathlib
import types

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from pate_jax.checkpoint import ResumeMismatchError
from pate_jax import experiment, models, students
from pate_jax.ledger import Status
from pate_jax.students import _pate_g

REPO = pathlib.Path(__file__).resolve().parent.parent

SHAPE = (4, 4, 1)
C = 3


def _toy_data(num_pool=60, num_labelled=12, num_eval=30, seed=0):
  """Three linearly separable classes of 4x4 images (class = brightest third)."""
  rs = np.random.RandomState(seed)

  def draw(n):
    y = rs.randint(0, C, n)
    x = rs.uniform(0, 0.3, (n, 16))
    for c in range(C):
      x[y == c, c * 5:(c + 1) * 5] += 0.7
    return x.reshape(n, *SHAPE).astype(np.float32), y

  pool, pool_y = draw(num_pool)
  ev, ev_y = draw(num_eval)
  data = students.make_student_data(pool, np.arange(num_labelled), pool_y[:num_labelled], ev,
                                    ev_y, C)
  return data, pool_y


@functools.cache
def _tiny_gan(**kwargs):
  """One student per setting for the whole module: the loop's programs are cached by the
  student object (a static argument), so tests that train the same student with the same
  batch and segment sizes compile its programs once (about 12 s of CPU each)."""
  return students.pate_g(C, SHAPE, noise_dim=5, generator_hidden=(8,),
                         discriminator_hidden=(16, 8), **kwargs)


@functools.cache
def _tiny_supervised():
  """One small supervised student for the module, as :func:`_tiny_gan`."""
  return students.supervised(students.classifier("gan_discriminator", C, hidden=(8,)))


def _batch(data, b=6):
  return {"x_lab": jnp.asarray(data.pool[:b]), "y_lab": jnp.asarray(data.labels[:b]),
          "x_unl": jnp.asarray(data.pool[b:2 * b]), "x_unl2": jnp.asarray(data.pool[2 * b:3 * b])}


def _jit(fn):
  """``fn`` compiled as one program, traced anew on its first call (a fresh wrapper: what
  the test patched before that call is what it traces). Run op by op, a GAN step's many
  small operations cost more than its one compilation."""
  return jax.jit(lambda *args: fn(*args))


def _changed(a, b):
  return any(not np.allclose(x, y) for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b)))


@pytest.mark.slow
def test_gan_step_losses_finite_and_all_parameters_move():
  data, _ = _toy_data()
  st = _tiny_gan()
  state = students.init_state(st, jnp.asarray(data.pool), jax.random.key(0))
  new, metrics = jax.jit(st.step)(state, jax.random.key(1), _batch(data), jnp.asarray(0))
  for name, value in metrics.items():
    assert np.isfinite(float(value)), name
  assert _changed(state["d_params"], new["d_params"])
  assert _changed(state["g_params"], new["g_params"])
  # The fixed weight-norm scales are not optimised.
  assert not _changed(state["weight_scale"], new["weight_scale"])


def test_learning_rate_is_constant_then_falls_linearly_to_zero():
  sched = _pate_g.learning_rate_schedule(3e-3, decay_start=6, decay_end=10)
  np.testing.assert_allclose([float(sched(i)) for i in range(12)],
                             [3e-3] * 7 + [2.25e-3, 1.5e-3, 0.75e-3, 0.0, 0.0], rtol=1e-6)
  assert _pate_g.learning_rate_schedule(3e-3) == 3e-3  # no decay: the authors' constant rate
  for bad in ((None, 10), (6, None), (10, 6), (-1, 4)):
    with pytest.raises(ValueError, match="decay_start, decay_end"):
      _pate_g.learning_rate_schedule(3e-3, *bad)


@pytest.mark.parametrize("name", ["pate_g", "supervised", "vat"])
@pytest.mark.parametrize("field, value, match", [
    ("learning_rate", float("nan"), "^learning_rate must be finite; got nan"),
    ("learning_rate", float("inf"), "^learning_rate must be finite; got inf"),
    ("b1", 1.5, r"^b1 must lie in \[0, 1\); got 1.5"),
    ("b1", float("nan"), "^b1 must be finite; got nan"),
    ("ema_decay", -0.5, r"^ema_decay must lie in \[0, 1\]; got -0.5"),
    ("ema_decay", float("nan"), "^ema_decay must be finite; got nan"),
])
def test_a_student_refuses_optimizer_settings_it_would_train_garbage_with(name, field, value,
                                                                          match):
  """A NaN rate, Adam's b1 of 1.5 or an average's decay of -0.5 trained without an error
  (after the labels were paid for) and evaluated garbage: refused when it is built."""
  with pytest.raises(ValueError, match=match):
    students.build_student(name, 10, (8, 8, 1), **{field: value})


@pytest.mark.slow
def test_gan_steps_scale_with_the_scheduled_rate():
  # Two steps from one state: the first at the full rate (the decays start at step 0),
  # the second at rate r. Both players' second move must be r / 3e-3 of the constant
  # rate's, and nothing may move at the decay's end (rate 0).
  data, _ = _toy_data()
  moves = []
  for decay_end in (None, 2, 1):
    # The constant rate is _tiny_gan()'s default: its init and step programs are the other
    # tests'.
    st = _tiny_gan() if decay_end is None else _tiny_gan(decay_start=0, decay_end=decay_end)
    step = jax.jit(st.step)
    state = students.init_state(st, jnp.asarray(data.pool), jax.random.key(0))
    state, _ = step(state, jax.random.key(1), _batch(data), jnp.asarray(0))
    new, _ = step(state, jax.random.key(2), _batch(data), jnp.asarray(1))
    state, new = jax.device_get((state, new))
    moves.append([max(np.abs(a - b).max() for a, b in zip(jax.tree.leaves(new[k]),
                                                          jax.tree.leaves(state[k])))
                  for k in ("d_params", "g_params")])
  constant, half, zero = np.asarray(moves)
  assert (constant > 1e-4).all()
  np.testing.assert_allclose(half, constant / 2, rtol=1e-3)
  np.testing.assert_array_equal(zero, 0.0)


def _shifted(image, dy, dx):
  """``image [H, W, C]`` moved down ``dy`` and right ``dx`` pixels, zeros where uncovered."""
  out = np.zeros_like(image)
  h, w = image.shape[:2]
  out[max(dy, 0):h + min(dy, 0), max(dx, 0):w + min(dx, 0)] = \
      image[max(-dy, 0):h - max(dy, 0), max(-dx, 0):w - max(dx, 0)]
  return out


def test_random_translate_shifts_each_image_by_its_own_offset_within_range():
  images = np.random.RandomState(0).uniform(0.1, 1, (300, 7, 6, 1)).astype(np.float32)
  out = np.asarray(_pate_g.random_shift(jax.random.key(0), jnp.asarray(images), 2))
  found = []
  for x, y in zip(images, out):
    hits = [(dy, dx) for dy in range(-2, 3) for dx in range(-2, 3)
            if np.array_equal(_shifted(x, dy, dx), y)]
    assert len(hits) == 1, "not a translation of its own image by at most 2 pixels"
    found.append(hits[0])
  assert len(set(found)) == 25  # every offset of the 5 x 5 occurs among 300 draws


@pytest.mark.slow
def test_generator_gradient_comes_only_through_feature_matching(monkeypatch):
  data, _ = _toy_data()
  state = students.init_state(_tiny_gan(), jnp.asarray(data.pool), jax.random.key(0))
  # With the feature-matching loss replaced by a constant, nothing moves the generator:
  # the discriminator's losses do not reach its parameters. (_jit traces the step anew,
  # with the patch.)
  monkeypatch.setattr(_pate_g, "feature_matching_loss", lambda real, fake: jnp.sum(real) * 0.0)
  new, _ = _jit(_tiny_gan().step)(state, jax.random.key(1), _batch(data), jnp.asarray(0))
  assert not _changed(state["g_params"], new["g_params"])
  assert _changed(state["d_params"], new["d_params"])


@pytest.mark.slow
def test_apply_parts_equals_one_application_per_part(float32_matmuls):
  disc = models.GanDiscriminator(C, (16, 8))
  rs = np.random.RandomState(0)
  parts = [jnp.asarray(rs.uniform(size=(n, *SHAPE)), jnp.float32) for n in (3, 5, 2)]
  variables = disc.init(jax.random.key(0), parts[0])
  apply = lambda x: disc.apply(variables, x)  # noqa: E731  (train=False: no noise)
  stacked = _pate_g.apply_parts(apply, parts)
  assert len(stacked) == 3
  for part, (logits, features) in zip(parts, stacked):
    want_logits, want_features = apply(part)
    np.testing.assert_allclose(logits, want_logits, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(features, want_features, rtol=1e-5, atol=1e-6)


@pytest.mark.slow
def test_a_step_on_stacked_minibatches_equals_one_pass_per_minibatch(monkeypatch,
                                                                    float32_matmuls):
  # Without D's noise, one GAN step must not depend on how D's passes are grouped.
  data, _ = _toy_data()
  st = _tiny_gan(input_noise=0.0, hidden_noise=0.0)
  state = _jit(st.init)(jax.random.key(0), jnp.asarray(data.pool[:20]))
  stacked, _ = _jit(st.step)(state, jax.random.key(1), _batch(data), jnp.asarray(0))
  calls = []

  def separately(apply, parts):
    calls.append(len(parts))
    return [apply(p) for p in parts]

  monkeypatch.setattr(_pate_g, "apply_parts", separately)
  separate, _ = _jit(st.step)(state, jax.random.key(1), _batch(data), jnp.asarray(0))
  assert calls == [3, 2]  # traced anew: D's and G's losses, each part applied alone
  for got, want in zip(jax.tree.leaves(stacked), jax.tree.leaves(separate)):
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-6)
  assert _changed(state["d_params"], stacked["d_params"])


def test_discriminator_losses_match_their_definition():
  rs = np.random.RandomState(0)
  lab, unl, fake = (jnp.asarray(rs.normal(size=(5, C))) for _ in range(3))
  y = jnp.asarray([0, 1, 2, 1, 0])
  loss_lab, loss_unl = students.discriminator_losses(lab, y, unl, fake)
  p = jax.nn.softmax(lab)
  np.testing.assert_allclose(loss_lab, -np.mean(np.log(p[np.arange(5), y])), rtol=1e-5)
  z_unl, z_fake = np.exp(unl).sum(1), np.exp(fake).sum(1)
  d_unl, d_fake = z_unl / (z_unl + 1), z_fake / (z_fake + 1)  # D(x) = Z / (Z + 1)
  expected = -0.5 * np.mean(np.log(d_unl)) - 0.5 * np.mean(np.log(1 - d_fake))
  np.testing.assert_allclose(loss_unl, expected, rtol=1e-5)


def test_feature_matching_compares_the_batches_mean_features():
  """Salimans et al.'s feature matching: ‖mean_x f(x) − mean_z f(G(z))‖² (here averaged over
  the features), zero for batches of equal means whatever their rows."""
  rs = np.random.RandomState(1)
  real = rs.normal(size=(6, 4))
  fake = rs.normal(size=(6, 4))
  fake = fake - fake.mean(0) + real.mean(0)  # other rows, the same mean
  loss = _pate_g.feature_matching_loss(jnp.asarray(real), jnp.asarray(fake))
  np.testing.assert_allclose(loss, 0.0, atol=1e-6)
  other = rs.normal(size=(3, 4))  # batches of unequal sizes
  np.testing.assert_allclose(
      _pate_g.feature_matching_loss(jnp.asarray(real), jnp.asarray(other)),
      np.mean((real.mean(0) - other.mean(0))**2), rtol=1e-5)


def test_weight_norm_data_init_normalises_preactivations(float32_matmuls):
  x = jax.random.uniform(jax.random.key(0), (200, 4, 4, 1))
  disc = models.GanDiscriminator(num_classes=C, hidden=(16, 8), input_noise=0.0,
                                 hidden_noise=0.0)
  v = disc.init({"params": jax.random.key(1)}, x[:2], train=True)
  _, v = disc.apply(v, x, train=True, data_init=True, mutable=["params", "weight_scale"])
  logits, _ = disc.apply(v, x, train=False)
  np.testing.assert_allclose(logits.mean(0), 0.0, atol=1e-4)
  np.testing.assert_allclose(logits.std(0), 1.0, rtol=1e-4)


def test_vat_power_iteration_runs_at_float32_precision():
  """A GPU's default TF32 products would round x + 1e-6·d back to x: the adversarial
  direction's products (forward and backward) ask for float32 on every backend."""
  w = jax.random.normal(jax.random.key(0), (4, 3))
  jaxpr = jax.make_jaxpr(lambda x: students.virtual_adversarial_perturbation(
      lambda x: x @ w, x, jax.random.key(1), epsilon=0.1))(jnp.ones((2, 4)))
  precisions = {e.params["precision"] for e in jaxpr.eqns if e.primitive.name == "dot_general"}
  assert precisions == {(jax.lax.Precision.HIGHEST, jax.lax.Precision.HIGHEST)}


def _products(student, data):
  """The precision of every matrix product of ``student``'s compiled programs: the
  initialisation, one training segment (forward and backward) and the evaluation."""
  from pate_jax.students import _loop  # pylint: disable=g-import-not-at-top
  key, pool = jax.random.key(0), jnp.asarray(data.pool)
  state = jax.eval_shape(lambda k, x: _loop._init(student, k, x, 8), key, pool)
  texts = [_loop._init.lower(student, key, pool, 8).as_text(),
           _loop._segment.lower(student, 6, 2, state, key, jnp.asarray(0), pool,
                                jnp.asarray(data.labelled_index, jnp.int32),
                                jnp.asarray(data.labels)).as_text(),
           _loop._probabilities.lower(student, state, pool).as_text()]
  lines = [l for t in texts for l in t.splitlines() if "stablehlo.dot_general" in l]
  assert len(lines) > 10
  return {"HIGHEST" if "precision = [HIGHEST, HIGHEST]" in l else "other" for l in lines}


def test_students_compute_float32_products_on_every_backend():
  """A GPU's default rounds float32 operands to TF32: the loop runs a student's products
  at float32 unless its ``matmul_precision`` says otherwise."""
  data, _ = _toy_data()
  gan = students.build_student("pate_g", C, SHAPE, noise_dim=5, generator_hidden=(8,),
                               discriminator_hidden=(16, 8))
  assert gan.matmul_precision == "float32" and _products(gan, data) == {"HIGHEST"}
  backend = students.build_student("pate_g", C, SHAPE, noise_dim=5, generator_hidden=(8,),
                                   discriminator_hidden=(16, 8), matmul_precision="default")
  assert backend.matmul_precision is None and _products(backend, data) == {"other"}
  with pytest.raises(ValueError, match="student.matmul_precision"):
    students.build_student("pate_g", C, SHAPE, matmul_precision="fast")


@pytest.mark.slow
def test_vat_perturbation_increases_kl_more_than_random():
  net = students.classifier("gan_discriminator", C, hidden=(16, 8), input_noise=0.0,
                            hidden_noise=0.0)
  data, _ = _toy_data()
  variables = net.init(jax.random.key(0), jnp.asarray(data.pool[:20]))
  fn = lambda x: net.logits(variables, x, False)  # pylint: disable=unnecessary-lambda-assignment
  x = jnp.asarray(data.pool[:32])
  eps = 0.05
  r_adv = students.virtual_adversarial_perturbation(fn, x, jax.random.key(1), epsilon=eps,
                                                    power_iterations=2)
  norms = jnp.sqrt(jnp.sum(r_adv.reshape(32, -1) ** 2, axis=1))
  np.testing.assert_allclose(norms, eps, rtol=1e-4)
  kl_adv = students.kl_divergence(fn(x), fn(x + r_adv))
  assert kl_adv > 0
  # No random direction of the same norm moves the prediction as much.
  for i in range(20):
    r = jax.random.normal(jax.random.key(10 + i), x.shape)
    r = eps * r / jnp.sqrt(jnp.sum(r.reshape(32, -1) ** 2, 1)).reshape(32, 1, 1, 1)
    assert kl_adv > students.kl_divergence(fn(x), fn(x + r))


@pytest.mark.slow
def test_vat_step_trains():
  data, _ = _toy_data()
  net = students.classifier("gan_discriminator", C, hidden=(16, 8), input_noise=0.0,
                            hidden_noise=0.0)
  st = students.vat(net, epsilon=0.5)
  res = students.fit(st, data, jax.random.key(0), num_steps=60, batch_size=8,
                     segment_steps=30, log=None)
  assert all(np.isfinite(h["loss_vat"]) for h in res.history)
  assert res.eval_accuracy > 0.8


@pytest.mark.slow
@pytest.mark.parametrize("make", [
    lambda net: students.supervised(net),
    lambda net: students.vat(net, epsilon=0.3, entropy_weight=0.0, learning_rate=3e-3)],
    ids=["supervised", "vat"])
def test_batch_norm_students_train_their_statistics_and_learn(make):
  data, _ = _toy_data()
  st = make(students.classifier("bn_mlp", C, hidden=(16,)))
  key = jax.random.key(0)
  start = students.init_state(st, jnp.asarray(data.pool), key)
  res = students.fit(st, data, key, num_steps=60, batch_size=8, segment_steps=60, log=None)
  # The running statistics that evaluation uses are trained, not left at their init.
  assert _changed(start["fixed"]["batch_stats"], res.state["fixed"]["batch_stats"])
  assert res.eval_accuracy > 0.8


@pytest.mark.slow
def test_supervised_and_pate_g_learn_a_separable_problem():
  data, _ = _toy_data()
  sup = students.supervised(students.classifier("gan_discriminator", C, hidden=(16, 8)))
  assert students.fit(sup, data, jax.random.key(0), num_steps=60, batch_size=8,
                      segment_steps=60, log=None).eval_accuracy > 0.8
  # Segments of 5, the program the other tests train this student with (a run does not
  # depend on its segment size: test_a_segments_batches_are_its_steps_batches).
  res = students.fit(_tiny_gan(), data, jax.random.key(0), num_steps=60, batch_size=8,
                     segment_steps=5, log=None)
  assert res.eval_accuracy > 0.8


def test_distillation_loss_reduces_to_cross_entropy_on_one_hot_targets():
  logits = jnp.asarray(np.random.RandomState(0).normal(size=(6, C)))
  y = jnp.asarray([0, 1, 2, 2, 1, 0])
  np.testing.assert_allclose(students.class_loss(logits, jax.nn.one_hot(y, C)),
                             students.class_loss(logits, y), rtol=1e-6)
  # At temperature T the loss is T² × the cross-entropy of logits / T.
  soft = jax.nn.softmax(logits[::-1])
  np.testing.assert_allclose(students.class_loss(logits, soft, temperature=5.0),
                             25.0 * students.class_loss(logits / 5.0, soft), rtol=1e-6)


def test_epoch_batches_cover_every_row_once_per_epoch():
  key = jax.random.key(3)
  rows = np.concatenate([np.asarray(students.epoch_batch(key, s, 10, 4)) for s in range(5)])
  np.testing.assert_array_equal(np.sort(rows[:10]), np.arange(10))
  np.testing.assert_array_equal(np.sort(rows[10:20]), np.arange(10))
  big = np.asarray(students.epoch_batch(key, 1, 3, 7))  # a batch larger than the data
  assert big.shape == (7,) and set(big) == {0, 1, 2}


@pytest.mark.parametrize("start, num_steps, num, batch_size", [
    (0, 7, 10, 4), (3, 5, 10, 4), (2, 6, 3, 7), (11, 9, 100, 100), (5, 4, 9, 9)])
def test_a_segments_batches_are_its_steps_batches(start, num_steps, num, batch_size):
  # The loop draws a whole segment's rows at once (each epoch's permutation once); they
  # must be the rows each step draws alone, or a run would depend on its segment size.
  key = jax.random.key(5)
  whole = np.asarray(students.epoch_batches(key, jnp.asarray(start), num_steps, num,
                                            batch_size))
  alone = np.stack([np.asarray(students.epoch_batch(key, jnp.asarray(start + i), num,
                                                    batch_size)) for i in range(num_steps)])
  np.testing.assert_array_equal(whole, alone)
  # ... and each step's rows are slices of the epochs laid end to end.
  epochs = np.concatenate([np.asarray(jax.random.permutation(jax.random.fold_in(key, e), num))
                           for e in range((start + num_steps) * batch_size // num + 1)])
  np.testing.assert_array_equal(
      alone.ravel(), epochs[start * batch_size:(start + num_steps) * batch_size])


@pytest.mark.slow
def test_fit_resumes_bit_identically(tmp_path):
  data, _ = _toy_data()
  st = _tiny_gan()
  # Segments of 5: the program of the other tests that train this student.
  kw = {"batch_size": 8, "segment_steps": 5, "log": None}
  full = students.fit(st, data, jax.random.key(0), num_steps=20, **kw)
  ckpt = str(tmp_path / "ckpt")
  students.fit(st, data, jax.random.key(0), num_steps=10, checkpoint_dir=ckpt, **kw)
  resumed = students.fit(st, data, jax.random.key(0), num_steps=20, checkpoint_dir=ckpt, **kw)
  assert resumed.resumed_from == 10
  for a, b in zip(jax.tree.leaves(full.state), jax.tree.leaves(resumed.state)):
    np.testing.assert_array_equal(a, b)


@pytest.mark.slow
def test_fit_refuses_to_resume_another_run(tmp_path):
  data, pool_y = _toy_data()
  st = _tiny_supervised()
  kw = {"batch_size": 8, "segment_steps": 5, "log": None,
        "checkpoint_dir": str(tmp_path / "ckpt")}
  students.fit(st, data, jax.random.key(0), num_steps=5, fingerprint={"lr": 1}, **kw)
  other_labels = students.with_labels(data, np.arange(13), pool_y[:13])
  for args, field in [((data, jax.random.key(1)), "key"),
                      ((other_labels, jax.random.key(0)), "data_sha256")]:
    with pytest.raises(ResumeMismatchError, match=field):
      students.fit(st, *args, num_steps=10, fingerprint={"lr": 1}, **kw)
  with pytest.raises(ResumeMismatchError, match="lr"):
    students.fit(st, data, jax.random.key(0), num_steps=10, fingerprint={"lr": 2}, **kw)
  # The message names the flag of the script that runs the student (the main job's nests it).
  with pytest.raises(ResumeMismatchError, match=r"--config\.student\.restart=True"):
    students.fit(st, data, jax.random.key(0), num_steps=10, fingerprint={"lr": 2},
                 restart_hint="--config.student.restart=True", **kw)
  with pytest.raises(ValueError, match="num_steps"):
    students.fit(st, data, jax.random.key(0), num_steps=3, fingerprint={"lr": 1}, **kw)
  res = students.fit(st, data, jax.random.key(1), num_steps=10, restart=True, **kw)
  assert res.resumed_from == 0 and res.history[-1]["step"] == 10


def test_init_sample_and_initialisation_use_unrelated_keys(monkeypatch):
  # Which pool rows the data-dependent initialisation sees must not share a key with
  # the initialisation itself (split(k, 2) is a prefix of split(k, 4): one key used
  # for both would reuse randomness).
  seen = {}
  real = jax.random.permutation

  def spy(key, *args, **kwargs):
    seen["rows"] = key
    return real(key, *args, **kwargs)

  def init(key, sample):
    return {"n": sample.shape[0], "key": key}

  monkeypatch.setattr(jax.random, "permutation", spy)
  with jax.disable_jit():  # init_state's program run op by op: the spy sees the key itself
    state = students.init_state(students.Student(init, None, None), jnp.zeros((20, 3)),
                                jax.random.key(0), init_examples=5)
  assert int(state["n"]) == 5
  seen["init"] = state["key"]

  def family(key):
    keys = [key, *jax.random.split(key, 8), *jax.random.split(key, 2)]
    return {tuple(np.asarray(jax.random.key_data(k)).tolist()) for k in keys}

  assert not family(seen["rows"]) & family(seen["init"])


@pytest.mark.parametrize("index, labels, match", [
    (np.arange(3), np.array([0, 1, 3]), "label 3 at position 2 is outside"),
    (np.arange(3), np.array([0, -1, 2]), "label -1"),
    (np.arange(61), np.zeros(61, np.int64), "61 labels for a pool of 60"),
    (np.array([0, 60]), np.array([0, 1]), "held-out evaluation split"),
    (np.array([0, 0]), np.array([0, 1]), "labelled twice"),
    (np.arange(3), np.array([0.5, 1.0, 2.0]), "must be integer classes"),
])
def test_student_data_rejects_bad_labels(index, labels, match):
  data, _ = _toy_data()
  with pytest.raises(ValueError, match=match):
    students.make_student_data(data.pool, index, labels, data.eval_images, data.eval_labels, C)


@pytest.mark.slow
def test_active_learner_never_exceeds_its_budget(tmp_path):
  # pylint: disable-next=g-import-not-at-top
  from pate_jax import budget as budget_lib, rng, votes as votes_lib
  data, pool_y = _toy_data(num_pool=60)
  votes = np.zeros((60, C), np.int32)
  votes[np.arange(60), pool_y] = 40  # 50 teachers, 40 agree on the true class
  votes[np.arange(60), (pool_y + 1) % C] += 10
  votes_lib.save_votes(tmp_path / "votes.npz", votes, pool_y, dataset="toy")
  eps_max = 2.0  # about 30 data-independent GNMax answers at sigma 20
  budget = budget_lib.TeachersBudget(tmp_path, votes_lib.load_votes(tmp_path),
                                     rng.noise_key("aggregation"), mechanism="gnmax",
                                     params={"sigma": 20.0}, epsilon_max=eps_max, delta=1e-5,
                                     data_dependent=False, chunk_size=16)
  st = students.supervised(students.classifier("gan_discriminator", C, hidden=(16, 8)))
  out = students.active_learning(st, data, budget, jax.random.key(1),
                                 # Two rounds (each one more compiled fit): the
                                 # budget (43 answers) stops the second.
                                 round_sizes=[30, 20],
                                 fit_kwargs={"num_steps": 10, "batch_size": 8,
                                             "segment_steps": 10}, log=None)
  assert out.stopped_by_budget and len(out.rounds) == 2
  assert budget.epsilon <= eps_max
  assert 0 < out.labelled_index.size < 50
  assert all(r["budget_epsilon"] <= eps_max for r in out.rounds)
  assert np.unique(out.labelled_index).size == out.labelled_index.size


def test_least_confident_picks_smallest_max_probability():
  probs = np.array([[0.9, 0.1], [0.5, 0.5], [0.6, 0.4], [0.55, 0.45]])
  np.testing.assert_array_equal(students.least_confident(probs, np.array([0, 2, 3]), 2),
                                [3, 2])


@pytest.mark.slow
def test_a_resumed_fit_reports_every_segment(tmp_path):
  data, _ = _toy_data()
  st = _tiny_supervised()
  kw = {"batch_size": 8, "segment_steps": 5, "log": None,
        "checkpoint_dir": str(tmp_path / "ckpt")}
  whole = students.fit(st, data, jax.random.key(0), num_steps=15,
                       checkpoint_dir=str(tmp_path / "whole"), **{
                           k: x for k, x in kw.items() if k != "checkpoint_dir"})
  students.fit(st, data, jax.random.key(0), num_steps=10, **kw)   # killed after step 10
  resumed = students.fit(st, data, jax.random.key(0), num_steps=15, **kw)
  again = students.fit(st, data, jax.random.key(0), num_steps=15, **kw)  # nothing to train
  assert resumed.resumed_from == 10 and again.resumed_from == 15
  for res in (resumed, again):
    assert [h["step"] for h in res.history] == [5, 10, 15]
    assert res.history == whole.history and res.eval_accuracy == whole.eval_accuracy


def test_judge_reads_the_first_record_at_or_after_the_step():
  check = students.GameCheck(step=20, metric="loss_gen", max_value=40.0)
  history = [{"step": 10, "loss_gen": 99.0}, {"step": 30, "loss_gen": 39.0},
             {"step": 40, "loss_gen": 99.0}]
  students.judge(check, history)           # step 30 decides: 39 ≤ 40; later entries do not
  students.judge(check, history[:1])       # nothing at or after step 20 yet
  students.judge(None, history)
  with pytest.raises(students.GameFailed, match="loss_gen = 41 at step 30") as e:
    students.judge(check, [{"step": 30, "loss_gen": 41.0}])
  assert (e.value.step, e.value.value, e.value.max_value) == (30, 41.0, 40.0)
  with pytest.raises(students.GameFailed):  # a NaN loss is a failed game too
    students.judge(check, [{"step": 20, "loss_gen": float("nan")}])
  with pytest.raises(ValueError, match="'loss_gen' is not a training metric"):
    students.judge(check, [{"step": 20, "loss": 1.0}])
  # A metric the student has not is refused at its first record, long before the step.
  with pytest.raises(ValueError, match="'loss_gen' is not a training metric"):
    students.judge(check, [{"step": 10, "loss": 1.0}])


@pytest.mark.slow
def test_training_refuses_a_check_of_a_metric_the_student_has_not_after_one_segment():
  """A supervised student has no loss_gen: fit and fit_seeds stop at the first segment's
  record (step 5 here), not at the check's step (20) or at the end."""
  data, _ = _toy_data()
  sup = _tiny_supervised()
  check = students.GameCheck(step=20, metric="loss_gen", max_value=40.0)
  lines = []
  with pytest.raises(ValueError, match="'loss_gen' is not a training metric"):
    students.fit(sup, data, jax.random.key(0), num_steps=20, batch_size=8, segment_steps=5,
                 log=lines.append, check=check)
  assert len(lines) == 1 and lines[0].startswith("step=5 "), lines
  with pytest.raises(ValueError, match="'loss_gen' is not a training metric"):
    students.fit_seeds(sup, data, jax.random.split(jax.random.key(0), 2), num_steps=20,
                       batch_size=8, segment_steps=5, log=lines.append, check=check)
  assert len(lines) == 1, lines  # refused before the seeds' first line


@pytest.mark.parametrize("name", ["student_supervised", "student_vat", "student_distillation",
                                  "student_active", "student_pate_g",
                                  "student_confident_gnmax"])
@pytest.mark.parametrize("variant", [None, "cpu"])
def test_a_student_config_checks_the_game_only_of_a_gan_student(name, variant):
  """The game check watches the generator's loss: a config of another student has it off
  (on, the supervised student's 9,000-step run failed at step 3,600, and every rerun)."""
  config = experiment.load_script(REPO / "configs" / f"{name}.py").get_config(variant)
  gan = config.student.name == "pate_g"
  assert bool(config.game_check.max_restarts) == gan, config.student.name


def test_judge_holds_every_later_record_to_the_late_bound():
  check = students.GameCheck(step=20, metric="loss_gen", max_value=10.0, late_max_value=50.0)
  history = [{"step": 10, "loss_gen": 99.0}, {"step": 20, "loss_gen": 9.0},
             {"step": 30, "loss_gen": 49.0}, {"step": 40, "loss_gen": 5.0}]
  students.judge(check, history)      # 9 ≤ 10 first, then 49 and 5 ≤ 50
  with pytest.raises(students.GameFailed, match="loss_gen = 51 at step 40 exceeds 50") as e:
    students.judge(check, [*history[:3], {"step": 40, "loss_gen": 51.0}])
  assert (e.value.step, e.value.max_value) == (40, 50.0)
  with pytest.raises(students.GameFailed, match="at step 20 exceeds 10"):  # first: 10
    students.judge(check, [{"step": 20, "loss_gen": 11.0}, {"step": 30, "loss_gen": 1.0}])
  with pytest.raises(students.GameFailed, match="at step 40"):  # NaN fails later too
    students.judge(check, [*history[:3], {"step": 40, "loss_gen": float("nan")}])
  students.judge(check._replace(late_max_value=None),  # no later bound
                 [*history[:3], {"step": 40, "loss_gen": 1e9}])


def _counter_student():
  """A student whose only metric, ``loss_gen``, is its step index (mean over a segment)."""
  return students.Student(
      lambda key, sample: {"w": jnp.zeros(())},
      lambda state, key, batch, step: (state, {"loss_gen": step.astype(jnp.float32)}),
      lambda state, images: jnp.zeros((images.shape[0], 3)), None)


def test_fit_judges_each_segment_against_its_bound():
  """The first record at or after the check's step against ``max_value``, every later one
  against ``late_max_value``, as each segment ends (records: steps 5, 10, 15, 20; mean
  ``loss_gen`` 2, 7, 12, 17)."""
  data, _ = _toy_data()
  kw = {"num_steps": 20, "batch_size": 4, "segment_steps": 5, "log": None}
  st = _counter_student()
  check = students.GameCheck(step=8, metric="loss_gen", max_value=7.0, late_max_value=17.0)
  assert [e["step"] for e in students.fit(st, data, jax.random.key(0), check=check,
                                          **kw).history] == [5, 10, 15, 20]
  with pytest.raises(students.GameFailed, match="loss_gen = 17 at step 20 exceeds 16.5"):
    students.fit(st, data, jax.random.key(0), check=check._replace(late_max_value=16.5), **kw)
  with pytest.raises(students.GameFailed, match="loss_gen = 7 at step 10 exceeds 6.5"):
    students.fit(st, data, jax.random.key(0), check=check._replace(max_value=6.5), **kw)
  students.fit(st, data, jax.random.key(0), check=check._replace(late_max_value=None), **kw)


def _gan_histories(node, where=""):
  """Every student training history (records with ``loss_gen``) inside a results tree."""
  if isinstance(node, dict):
    h = node.get("history")
    if isinstance(h, list) and h and isinstance(h[0], dict) and "loss_gen" in h[0]:
      yield where, h
    for k, v in node.items():
      yield from _gan_histories(v, f"{where}/{k}")
  elif isinstance(node, list):
    for v in node:
      yield from _gan_histories(v, where)


def test_the_configured_game_check_separates_the_committed_games():
  """configs/student_pate_g.py's check passes every committed PATE-G game but the one that
  failed (pate_g_cgn seed 1), including a spike that recovered (pate_g_true seed 1: 44.2 at
  step 7,200, 13.3 at 8,000), and fails the GPU main job's failed game and a game that
  failed late."""
  from conftest import REPO
  from pate_jax.experiment import load_script
  gc = load_script(REPO / "configs" / "student_pate_g.py").get_config().game_check
  check = students.GameCheck(int(gc.step), str(gc.metric), float(gc.max_value),
                             float(gc.late_max_value))
  judged = {}
  for path in sorted((REPO / "results" / "runs").glob("**/results.json")):
    for where, history in _gan_histories(json.loads(path.read_text())):
      if history[-1]["step"] < check.step:
        continue
      try:
        students.judge(check, history)
        judged[f"{path.parent.relative_to(REPO)}:{where}"] = "passed"
      except students.GameFailed:
        judged[f"{path.parent.relative_to(REPO)}:{where}"] = "failed"
  failed = [k for k, v in judged.items() if v == "failed"]
  assert failed == ["results/runs/pate_g_cgn/seed_1:/results"], failed
  assert len(judged) >= 30
  # The GPU acceptance's main job (configs/pate_mnist.py, stage 1): loss_gen at steps
  # 900-3,600 of the game that ended at 89.4 % held-out (its history is not published).
  gpu_main_job = [{"step": 900 * (i + 1), "loss_gen": v}
                  for i, v in enumerate((13.07, 19.41, 32.49, 28.86))]
  with pytest.raises(students.GameFailed):
    students.judge(check, gpu_main_job)
  # The authors' PATE-G on true labels, float32, seed 0 (README, Students): the game held at
  # step 3,600 and failed later (held-out 90.6 % at step 8,100, 82.7 % at 10,800).
  late = [{"step": s, "loss_gen": v} for s, v in ((3_600, 2.7), (6_300, 15.6), (7_200, 105.0),
                                                    (10_800, 186.0))]
  with pytest.raises(students.GameFailed, match="at step 7200"):
    students.judge(check, late)
  students.judge(check._replace(late_max_value=None), late)  # the step-3,600 check alone


@pytest.mark.slow
def test_fit_stops_at_a_failed_check_and_a_resume_fails_it_again(tmp_path):
  data, _ = _toy_data()
  st = _tiny_gan()
  kw = {"batch_size": 8, "segment_steps": 5, "log": None,
        "checkpoint_dir": str(tmp_path / "ckpt")}
  never = students.GameCheck(step=7, metric="loss_gen", max_value=-1.0)  # losses are ≥ 0
  with pytest.raises(students.GameFailed, match="at step 10"):
    students.fit(st, data, jax.random.key(0), num_steps=20, check=never, **kw)
  # The failed segment's checkpoint is kept, and a resume judges its history again,
  # without training a step.
  with pytest.raises(students.GameFailed, match="at step 10"):
    students.fit(st, data, jax.random.key(0), num_steps=20, check=never, **kw)
  passed = students.fit(st, data, jax.random.key(0), num_steps=20,
                        check=never._replace(max_value=1e9), **kw)
  assert passed.resumed_from == 10 and [e["step"] for e in passed.history] == [5, 10, 15, 20]


def test_gather_batch_gathers_each_minibatch_from_its_rows():
  rs = np.random.RandomState(0)
  pool = jnp.asarray(rs.uniform(size=(30, *SHAPE)), jnp.float32)
  labelled_index, labels = jnp.asarray([4, 9, 17, 22]), jnp.asarray([1, 0, 2, 1])
  rows = {"lab": jnp.asarray([3, 0, 2]), "unl": jnp.asarray([5, 6, 29, 0, 1]),
          "unl2": jnp.asarray([7, 7, 8, 28, 2])}
  b = students._loop.gather_batch(rows, pool, labelled_index, labels)
  np.testing.assert_array_equal(b["x_lab"], pool[jnp.asarray([22, 4, 17])])
  np.testing.assert_array_equal(b["y_lab"], [1, 1, 2])
  np.testing.assert_array_equal(b["x_unl"], pool[rows["unl"]])
  np.testing.assert_array_equal(b["x_unl2"], pool[rows["unl2"]])


@pytest.mark.slow
def test_fit_seeds_trains_each_seed_as_fit_does_and_resumes_bit_identically(
    tmp_path, float32_matmuls):
  """One vmapped program for two keys gives each key's :func:`students.fit` (the same states
  and records, up to the rounding of batched products); killed after a segment, it resumes
  to the uninterrupted run's states bit for bit, and refuses another run's checkpoints."""
  data, _ = _toy_data()
  st = _tiny_gan()
  kw = {"batch_size": 8, "segment_steps": 5, "log": None}
  keys = jax.random.split(jax.random.key(3), 2)
  together = students.fit_seeds(st, data, keys, num_steps=10, **kw)
  assert together.failed == [None] * 2 and len(together.history) == 2
  for i in range(2):
    alone = students.fit(st, data, keys[i], num_steps=10, **kw)
    for a, b in zip(jax.tree.leaves(alone.state), jax.tree.leaves(together.state)):
      np.testing.assert_allclose(b[i], a, rtol=1e-4, atol=1e-5)
    assert [e["step"] for e in together.history[i]] == [e["step"] for e in alone.history]
    for mine, theirs in zip(together.history[i], alone.history):
      assert mine.keys() == theirs.keys()
      np.testing.assert_allclose([mine[k] for k in sorted(mine)],
                                 [theirs[k] for k in sorted(theirs)], rtol=1e-4, atol=1e-5)
    assert together.eval_accuracy[i] == together.history[i][-1]["eval_accuracy"]
  ckpt = str(tmp_path / "ckpt")
  students.fit_seeds(st, data, keys, num_steps=5, checkpoint_dir=ckpt, **kw)
  resumed = students.fit_seeds(st, data, keys, num_steps=10, checkpoint_dir=ckpt, **kw)
  assert resumed.resumed_from == 5 and [len(h) for h in resumed.history] == [2, 2]
  for a, b in zip(jax.tree.leaves(together.state), jax.tree.leaves(resumed.state)):
    np.testing.assert_array_equal(a, b)
  with pytest.raises(ResumeMismatchError, match="keys"):
    students.fit_seeds(st, data, keys[::-1], num_steps=10, checkpoint_dir=ckpt, **kw)


def test_fit_seeds_judges_each_seed_on_its_own_records():
  """A student whose ``loss_gen`` is a number drawn from its key: the seeds whose number
  exceeds the bound fail, each as :func:`students.fit` with that key fails, and the others
  pass; nobody stops training."""
  data, _ = _toy_data()
  st = students.Student(
      lambda key, sample: {"w": jax.random.uniform(key)},
      lambda state, key, batch, step: (state, {"loss_gen": state["w"] * 10}),
      lambda state, images: jnp.zeros((images.shape[0], C)), None)
  kw = {"num_steps": 10, "batch_size": 4, "segment_steps": 5, "log": None}
  check = students.GameCheck(step=5, metric="loss_gen", max_value=5.0)
  keys = jax.random.split(jax.random.key(1), 8)
  out = students.fit_seeds(st, data, keys, check=check, **kw)
  expected = []
  for key in keys:
    try:
      students.fit(st, data, key, check=check, **kw)
      expected.append(None)
    except students.GameFailed as e:
      expected.append((e.step, e.value))
  assert 0 < sum(e is not None for e in expected) < len(keys)  # both kinds among the keys
  assert [None if f is None else (f.step, f.value) for f in out.failed] == expected
  assert all(h[-1]["step"] == 10 for h in out.history)


@pytest.mark.parametrize("keys", [jax.random.key(0), jax.random.split(jax.random.key(0), 0)])
def test_fit_seeds_refuses_a_key_array_that_is_not_a_list_of_keys(keys):
  data, _ = _toy_data()
  with pytest.raises(ValueError, match="keys: a one-dimensional array"):
    students.fit_seeds(_tiny_gan(), data, keys, num_steps=2, batch_size=4, segment_steps=1,
                       log=None)


@pytest.mark.slow
def test_active_learner_goes_on_past_queries_confident_gnmax_did_not_answer(tmp_path):
  """A query whose threshold check failed is charged, not refused: the rounds go on, and
  the rows charged (what the ε is of) include it."""
  # pylint: disable-next=g-import-not-at-top
  from pate_jax import budget as budget_lib, rng, votes as votes_lib
  data, pool_y = _toy_data(num_pool=60)
  votes = np.zeros((60, C), np.int32)
  strong = np.arange(60) % 2 == 0  # 50 teachers: 48 agree on even rows, 26 on odd ones
  votes[np.arange(60), pool_y] = np.where(strong, 48, 26)
  votes[np.arange(60), (pool_y + 1) % C] += np.where(strong, 2, 24)
  votes_lib.save_votes(tmp_path / "votes.npz", votes, pool_y, dataset="toy")
  budget = budget_lib.TeachersBudget(
      tmp_path, votes_lib.load_votes(tmp_path), rng.noise_key("aggregation"),
      mechanism="confident_gnmax",
      params={"threshold": 40.0, "sigma_threshold": 2.0, "sigma": 4.0},
      epsilon_max=1e3, delta=1e-5, data_dependent=False, chunk_size=16)
  st = _tiny_supervised()
  out = students.active_learning(st, data, budget, jax.random.key(1),
                                 round_sizes=[10, 10, 10],
                                 fit_kwargs={"num_steps": 5, "batch_size": 8,
                                             "segment_steps": 5}, log=None)
  assert not out.stopped_by_budget and len(out.rounds) == 3
  assert out.charged_index.size == 30 and np.unique(out.charged_index).size == 30
  assert 0 < out.charged_answered.sum() == out.labelled_index.size < 30
  np.testing.assert_array_equal(out.charged_index[out.charged_answered], out.labelled_index)
  assert [r["charged"] for r in out.rounds] == [10, 10, 10]


@pytest.mark.slow
def test_vat_step_losses_are_their_definitions():
  """The step's VAT loss is KL(p(.|x) || p(.|x + r_adv)), the clean distribution first,
  and its entropy H(p(.|x)) >= 0, recomputed from the step's own key split."""
  data, _ = _toy_data()
  net = students.classifier("gan_discriminator", C, hidden=(16, 8), input_noise=0.0,
                            hidden_noise=0.0)
  # xi = 1e-3, not the default 1e-6: at 1e-6 the float32 power iteration's direction is
  # partly rounding (x + xi·d), which the jitted step and this eager recomputation round
  # differently (3 % apart in the loss on one CPU, within 2 % on another); at 1e-3 they
  # agree to 1e-5, and the reversed KL (about 1.4 against 10.8 here) is far outside.
  st = students.vat(net, epsilon=2.0, entropy_weight=1.0, xi=1e-3)
  state = students.init_state(st, jnp.asarray(data.pool), jax.random.key(0))
  batch, key = _batch(data), jax.random.key(1)
  _, m = jax.jit(st.step)(state, key, batch, jnp.asarray(0))
  _, k_unl, k_adv = jax.random.split(key, 3)
  fn = lambda x: net.logits({"params": state["params"], **state["fixed"]}, x, True, k_unl)
  x = batch["x_unl"]
  r = students.virtual_adversarial_perturbation(fn, x, k_adv, epsilon=2.0, xi=1e-3)
  logp = jax.nn.log_softmax(fn(x))
  # KL(p(.|x) || p(.|x + r_adv)), clean distribution first; entropy H(p(.|x)) >= 0.
  np.testing.assert_allclose(m["loss_vat"], students.kl_divergence(fn(x), fn(x + r)), rtol=1e-4)
  assert float(m["entropy"]) > 0.0
  np.testing.assert_allclose(m["entropy"], -jnp.mean(jnp.sum(jnp.exp(logp) * logp, -1)),
                             rtol=1e-5)


def test_least_confident_breaks_ties_by_lower_row():
  probs = np.array([[0.5, 0.5], [0.9, 0.1], [0.5, 0.5], [0.6, 0.4]])
  np.testing.assert_array_equal(students.least_confident(probs, np.array([0, 1, 2, 3]), 1), [0])
  np.testing.assert_array_equal(students.least_confident(probs, np.array([1, 2, 3, 0]), 3),
                                [0, 2, 3])


def test_fit_holds_the_record_after_one_at_the_checks_step_to_the_late_bound():
  """Check step 10 is a record's step: that record (mean loss_gen 7) is the first; the
  record at 15 (12) is a later one, judged against late_max_value, not max_value."""
  data, _ = _toy_data()
  kw = {"num_steps": 20, "batch_size": 4, "segment_steps": 5, "log": None}
  check = students.GameCheck(step=10, metric="loss_gen", max_value=7.0, late_max_value=17.0)
  out = students.fit(_counter_student(), data, jax.random.key(0), check=check, **kw)
  assert [e["step"] for e in out.history] == [5, 10, 15, 20]


def _fixed_student():
  """A student whose probabilities are the softmax of its input's first three pixels (ten
  times), whatever it trains on, and whose state is the key data of its ``init`` key."""
  return students.Student(
      lambda key, sample: {"k": jax.random.key_data(key)},
      lambda state, key, batch, step: (state, {"loss": jnp.zeros(())}),
      lambda state, images: 10.0 * images.reshape(images.shape[0], -1)[:, :C], None)


class _ScriptedBudget:
  """Answers pool rows with ``labels``, fails the threshold check of the rows in ``unsure``
  (charged, no label) and refuses every row after ``limit`` charged ones."""

  def __init__(self, labels, limit, unsure=()):
    self.labels, self.limit, self.unsure = labels, limit, set(unsure)
    self.asked, self.epsilon = [], 0.0

  def answer(self, rows):
    self.asked.append(np.asarray(rows).copy())
    status = []
    for r in rows:
      if self.epsilon >= self.limit:
        status.append(Status.REFUSED_BUDGET)
      else:
        self.epsilon += 1.0
        status.append(Status.NOT_CONFIDENT if int(r) in self.unsure else Status.ANSWERED)
    status = np.array(status, np.int32)
    labels = np.where(status == Status.ANSWERED, self.labels[rows], -1)
    return types.SimpleNamespace(status=status, labels=labels)


def test_active_rounds_ask_the_least_confident_rows_and_stop_at_the_first_refusal():
  """Round 0 asks the first rows; round r the least confident rows not asked yet (smallest
  maximum probability, ties by lower row); a failed threshold check is charged and goes
  on; a refusal ends the rounds after that round's training, on fold_in(key, r)."""
  data, pool_y = _toy_data()
  st, key = _fixed_student(), jax.random.key(4)
  fit_kwargs = {"num_steps": 1, "batch_size": 4, "segment_steps": 1}
  budget = _ScriptedBudget(pool_y, limit=18, unsure=(1, 3))
  out = students.active_learning(st, data, budget, key, round_sizes=[6, 8, 8, 8],
                                 fit_kwargs=fit_kwargs, log=None)
  x = data.pool.reshape(len(data.pool), -1)[:, :C].astype(np.float64)
  conf = np.exp(10 * x).max(1) / np.exp(10 * x).sum(1)
  expected, asked = [np.arange(6)], np.zeros(len(conf), bool)
  asked[:6] = True
  for size in (8, 8):
    rest = np.flatnonzero(~asked)
    rows = rest[np.lexsort((rest, conf[rest]))[:size]]
    expected.append(rows)
    asked[rows] = True
  assert len(budget.asked) == 3 and out.stopped_by_budget and len(out.rounds) == 3
  for got, want in zip(budget.asked, expected):
    np.testing.assert_array_equal(got, want)
  charged = np.concatenate(expected)[:18]
  np.testing.assert_array_equal(out.charged_index, charged)
  np.testing.assert_array_equal(out.charged_answered, ~np.isin(charged, [1, 3]))
  np.testing.assert_array_equal(out.labelled_index, charged[~np.isin(charged, [1, 3])])
  np.testing.assert_array_equal(out.labels, pool_y[out.labelled_index])
  assert [r["charged"] for r in out.rounds] == [6, 8, 4]
  assert [r["answered"] for r in out.rounds] == [4, 8, 4]
  last = students.fit(st, students.with_labels(data, out.labelled_index, out.labels),
                      jax.random.fold_in(key, 2), log=None, **fit_kwargs)
  np.testing.assert_array_equal(out.fit.state["k"], last.state["k"])


def test_active_learner_says_why_a_round_left_it_no_label():
  """Every first query failing the threshold check (charged, not answered) leaves no label
  with the budget still open: the error says so, not that the budget ran out; a refusal of
  every first query says the budget."""
  data, pool_y = _toy_data()
  kw = dict(round_sizes=[6, 6], fit_kwargs={"num_steps": 1, "batch_size": 4,
                                            "segment_steps": 1}, log=None)
  with pytest.raises(ValueError, match="no query of round 0 was answered: each failed the "
                                       "threshold check"):
    students.active_learning(_fixed_student(), data,
                             _ScriptedBudget(pool_y, limit=100, unsure=range(6)),
                             jax.random.key(0), **kw)
  with pytest.raises(ValueError, match="answered no query within epsilon_max"):
    students.active_learning(_fixed_student(), data, _ScriptedBudget(pool_y, limit=0),
                             jax.random.key(0), **kw)


def test_active_round_sizes_may_use_the_whole_pool_but_not_an_empty_round():
  data, pool_y = _toy_data(num_pool=24)
  st, fit_kwargs = _fixed_student(), {"num_steps": 1, "batch_size": 4, "segment_steps": 1}
  out = students.active_learning(st, data, _ScriptedBudget(pool_y, limit=100),
                                 jax.random.key(0), round_sizes=[12, 12],
                                 fit_kwargs=fit_kwargs, log=None)
  np.testing.assert_array_equal(np.sort(out.labelled_index), np.arange(24))
  assert not out.stopped_by_budget
  for sizes in ([4, 0], [25]):
    with pytest.raises(ValueError, match="round_sizes"):
      students.active_learning(st, data, _ScriptedBudget(pool_y, limit=100),
                               jax.random.key(0), round_sizes=sizes, fit_kwargs=fit_kwargs,
                               log=None)


def test_kl_divergence_is_the_batch_mean_of_each_rows_kl():
  rs = np.random.RandomState(0)
  p, q = rs.normal(size=(5, 4)), 2.0 * rs.normal(size=(5, 4))
  sp = np.exp(p) / np.exp(p).sum(1, keepdims=True)
  sq = np.exp(q) / np.exp(q).sum(1, keepdims=True)
  want = np.mean(np.sum(sp * np.log(sp / sq), axis=1))
  np.testing.assert_allclose(students.kl_divergence(jnp.asarray(p, jnp.float32),
                                                    jnp.asarray(q, jnp.float32)), want,
                             rtol=1e-5)


def _softmax(z):
  e = np.exp(z - z.max(axis=1, keepdims=True))
  return e / e.sum(axis=1, keepdims=True)


def test_vat_perturbation_is_the_normalised_kl_gradient_at_the_probe():
  """One power iteration on a linear softmax model, by hand: with z = (x + r) W, the
  gradient of KL(p(.|x) || softmax(z)) in r is (softmax(z) - p) W^T; r_adv is epsilon times
  its per-example normalisation at the probe r = xi d/||d||, d the key's N(0, I) draw (a
  large xi, where the probe's norm matters)."""
  rs = np.random.RandomState(1)
  w, x = rs.normal(size=(6, C)), rs.normal(size=(4, 2, 3))
  fn = lambda v: v.reshape(v.shape[0], -1) @ jnp.asarray(w, jnp.float32)
  key, xi, eps = jax.random.key(3), 0.5, 0.7
  perturb = jax.jit(lambda v: students.virtual_adversarial_perturbation(fn, v, key,
                                                                        epsilon=eps, xi=xi))
  r = perturb(jnp.asarray(x, jnp.float32))
  d = np.asarray(jax.random.normal(key, x.shape, jnp.float32), np.float64).reshape(4, -1)
  flat = x.reshape(4, -1)
  probe = xi * d / np.linalg.norm(d, axis=1, keepdims=True)
  grad = (_softmax((flat + probe) @ w) - _softmax(flat @ w)) @ w.T
  want = eps * grad / np.linalg.norm(grad, axis=1, keepdims=True)
  np.testing.assert_allclose(np.asarray(r).reshape(4, -1), want, rtol=1e-4, atol=1e-5)
  np.testing.assert_allclose(np.linalg.norm(np.asarray(r).reshape(4, -1), axis=1), eps,
                             rtol=1e-5)


class _NoisyLinear:
  """A classifier (``students.Classifier``'s calls) of linear logits; in training, plus
  N(0, 0.3^2) noise drawn from the call's key."""

  def init(self, key, sample):
    w = 0.5 * jax.random.normal(key, (sample[0].size, C))
    return {"params": {"w": w, "b": jnp.zeros(C)}}

  def apply(self, variables, x, train, key=None):
    p = variables["params"]
    logits = x.reshape(x.shape[0], -1) @ p["w"] + p["b"]
    if train:
      logits = logits + 0.3 * jax.random.normal(key, logits.shape)
    return logits, {}

  def logits(self, variables, x, train, key=None):
    return self.apply(variables, x, train, key)[0]


def test_vat_step_descends_its_loss(monkeypatch):
  """With plain gradient descent (step 1) in place of Adam, one VAT step moves the
  parameters by -grad of CE(x_lab) + alpha KL(p(.|x) || p(.|x + r_adv)) + beta H(p(.|x)),
  p(.|x) held constant in the KL, every pool pass with the pool key's noise draw; the
  step's metrics are the three terms."""
  monkeypatch.setattr(optax, "adam", lambda learning_rate, b1: optax.sgd(1.0))
  data, _ = _toy_data()
  net, alpha, beta = _NoisyLinear(), 0.7, 0.4
  st = students.vat(net, epsilon=1.5, xi=1e-3, alpha=alpha, entropy_weight=beta)
  state = st.init(jax.random.key(0), jnp.asarray(data.pool[:8]))
  batch, key = _batch(data), jax.random.key(1)
  new, m = jax.jit(st.step)(state, key, batch, jnp.asarray(0))
  k_lab, k_unl, k_adv = jax.random.split(key, 3)
  logits = lambda p, x, k: net.logits({"params": p}, x, True, k)
  x = batch["x_unl"]
  r = jax.jit(lambda p: students.virtual_adversarial_perturbation(
      lambda v: logits(p, v, k_unl), x, k_adv, epsilon=1.5, xi=1e-3))(state["params"])

  def terms(p):
    lab = jax.nn.log_softmax(logits(p, batch["x_lab"], k_lab))
    ce = -jnp.mean(jnp.take_along_axis(lab, batch["y_lab"][:, None], axis=1))
    clean = jax.nn.log_softmax(logits(p, x, k_unl))
    held = jax.lax.stop_gradient(clean)
    kl = jnp.mean(jnp.sum(jnp.exp(held) * (held - jax.nn.log_softmax(logits(p, x + r, k_unl))),
                          axis=1))
    ent = -jnp.mean(jnp.sum(jnp.exp(clean) * clean, axis=1))
    return ce + alpha * kl + beta * ent, (ce, kl, ent)

  grads, (ce, kl, ent) = jax.jit(jax.grad(terms, has_aux=True))(state["params"])
  np.testing.assert_allclose(m["loss_lab"], ce, rtol=1e-5)
  np.testing.assert_allclose(m["loss_vat"], kl, rtol=1e-4)
  np.testing.assert_allclose(m["entropy"], ent, rtol=1e-5)
  assert float(kl) > 1e-3 and float(ent) > 0.1
  for a, b, g in zip(jax.tree.leaves(new["params"]), jax.tree.leaves(state["params"]),
                     jax.tree.leaves(grads)):
    np.testing.assert_allclose(a, b - g, rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize("name", ["vat", "supervised"])
def test_a_step_updates_batch_statistics_by_its_clean_passes_and_the_average(name):
  """A batch norm on linear logits z = x W (momentum m): one step's running mean and
  variance are those of its clean training passes in order (the labelled minibatch, then
  for VAT the pool minibatch), each ``m · old + (1 − m) · batch``, never of VAT's perturbed
  passes; the parameter average is ``d · ema + (1 − d) · new`` with the warm-up's
  ``d = 1/10`` at step 0."""
  data, _ = _toy_data()
  net = students.classifier("bn_mlp", C, hidden=(), momentum=0.9)
  st = (students.vat(net, epsilon=1.0, xi=1e-3) if name == "vat"
        else students.supervised(net))
  state = jax.jit(st.init)(jax.random.key(0), jnp.asarray(data.pool[:8]))
  batch = _batch(data)
  new, _ = jax.jit(st.step)(state, jax.random.key(1), batch, jnp.asarray(0))
  w = np.asarray(state["params"]["Dense_0"]["kernel"], np.float64)
  stats = state["fixed"]["batch_stats"]["BatchNorm_0"]
  mean, var = np.asarray(stats["mean"], np.float64), np.asarray(stats["var"], np.float64)
  for x in (batch["x_lab"], batch["x_unl"])[:2 if name == "vat" else 1]:
    z = np.asarray(x, np.float64).reshape(len(x), -1) @ w
    mean, var = 0.9 * mean + 0.1 * z.mean(0), 0.9 * var + 0.1 * z.var(0)
  got = new["fixed"]["batch_stats"]["BatchNorm_0"]
  np.testing.assert_allclose(got["mean"], mean, rtol=1e-4, atol=1e-6)
  np.testing.assert_allclose(got["var"], var, rtol=1e-4, atol=1e-6)
  for e, p0, p1 in zip(jax.tree.leaves(new["ema"]), jax.tree.leaves(state["params"]),
                       jax.tree.leaves(new["params"])):
    np.testing.assert_allclose(e, 0.1 * np.asarray(p0) + 0.9 * np.asarray(p1), rtol=1e-5,
                               atol=1e-7)
  assert _changed(state["params"], new["params"])


def test_gan_step_moves_d_by_its_weighted_loss_then_g_by_feature_matching_on_the_new_d(
    monkeypatch):
  """With plain gradient descent (step 1) in place of Adam and D's noise off, one PATE-G
  step moves D by -grad of L_lab + w L_unl on the fake batch G(z) of ``z`` from the step's
  first key, then G by -grad of feature matching between the second pool minibatch and a
  new fake batch, through the *updated* D; ``loss_gen`` is that feature-matching loss and
  ``train_err`` D's error on the labelled minibatch before its update."""
  monkeypatch.setattr(optax, "adam", lambda *args, **kwargs: optax.sgd(1.0))
  data, _ = _toy_data()
  w = 0.3
  st = students.pate_g(C, SHAPE, noise_dim=5, generator_hidden=(8,), discriminator_hidden=(8,),
                      input_noise=0.0, hidden_noise=0.0, unlabelled_weight=w)
  state = _jit(st.init)(jax.random.key(0), jnp.asarray(data.pool[:20]))
  batch, key = _batch(data), jax.random.key(1)
  new, m = _jit(st.step)(state, key, batch, jnp.asarray(0))
  disc = models.GanDiscriminator(C, (8,), 0.0, 0.0)
  gen = models.GanGenerator(SHAPE, (8,), 5)
  k_fake, _, k_fake2, _ = jax.random.split(key, 4)

  def d_out(p, x):
    return disc.apply({"params": p, "weight_scale": state["weight_scale"]}, x, train=True,
                      rngs={"noise": jax.random.key(9)})

  def fake(g, k):
    z = jax.random.uniform(k, (6, 5))
    return gen.apply({"params": g, "batch_stats": state["batch_stats"]}, z, train=True,
                     mutable=["batch_stats"])[0]

  def d_loss(p):
    lab, unl, fk = (d_out(p, x)[0] for x in (batch["x_lab"], batch["x_unl"],
                                              fake(state["g_params"], k_fake)))
    loss_lab, loss_unl = students.discriminator_losses(lab, batch["y_lab"], unl, fk)
    return loss_lab + w * loss_unl

  def g_loss(g, d):
    return _pate_g.feature_matching_loss(d_out(d, batch["x_unl2"])[1],
                                         d_out(d, fake(g, k_fake2))[1])

  @jax.jit
  def reference(d, g):
    d_new = jax.tree.map(lambda p, q: p - q, d, jax.grad(d_loss)(d))
    err = jnp.mean(jnp.argmax(d_out(d, batch["x_lab"])[0], -1) != batch["y_lab"])
    return (d_new, *jax.value_and_grad(g_loss)(g, d_new), err)

  d_new, fm, g_grads, err = reference(state["d_params"], state["g_params"])
  for got, want in zip(jax.tree.leaves(new["d_params"]), jax.tree.leaves(d_new)):
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-6)
  np.testing.assert_allclose(m["loss_gen"], fm, rtol=1e-4)
  assert float(m["train_err"]) == float(err)
  for got, p, g in zip(jax.tree.leaves(new["g_params"]), jax.tree.leaves(state["g_params"]),
                       jax.tree.leaves(g_grads)):
    np.testing.assert_allclose(got, p - g, rtol=1e-4, atol=1e-6)
  assert _changed(state["g_params"], new["g_params"])


def test_ema_update_is_the_warmed_up_average_of_its_definition():
  """``d · average + (1 − d) · params`` with ``d = min(decay, (1 + t)/(10 + t))``: 0.1 at
  step 0 (the new parameters dominate), (1 + t)/(10 + t) while that is below the decay,
  then the decay itself."""
  a = {"w": jnp.asarray([1.0, -2.0]), "b": jnp.asarray(3.0)}
  p = {"w": jnp.asarray([5.0, 0.0]), "b": jnp.asarray(-1.0)}
  for step, d in ((0, 0.1), (5, 6 / 15), (90, 91 / 100), (10_000, 0.999)):
    out = students.ema_update(a, p, 0.999, jnp.asarray(step, jnp.float32))
    for got, x, y in zip(jax.tree.leaves(out), jax.tree.leaves(a), jax.tree.leaves(p)):
      np.testing.assert_allclose(got, d * np.asarray(x) + (1 - d) * np.asarray(y), rtol=1e-6)


def _key_recording_student(num_steps):
  """A student whose state records, per step, a uniform draw of its step key and the sum of
  its two pool minibatches' first pixels."""
  def step(state, key, batch, step):
    u = jax.random.uniform(key)
    pools = jnp.stack([batch["x_unl"][:, 0, 0, 0].sum(), batch["x_unl2"][:, 0, 0, 0].sum()])
    return ({"u": state["u"].at[step].set(u), "pools": state["pools"].at[step].set(pools)},
            {"loss": jnp.zeros(())})
  return students.Student(
      lambda key, sample: {"u": jnp.zeros(num_steps), "pools": jnp.zeros((num_steps, 2))},
      step, lambda state, images: jnp.zeros((images.shape[0], C)), None)


def test_each_step_draws_from_its_own_key_and_two_independent_pool_minibatches():
  """Step t's key is a function of t, not of its place in a segment: segments of 2 and of 4
  steps give the same draws, all different; the two pool minibatches of a step come from
  two streams (not the same rows)."""
  data, _ = _toy_data()
  st = _key_recording_student(4)
  args = (jnp.asarray(data.pool), jnp.asarray(data.labelled_index), jnp.asarray(data.labels))
  segment = jax.jit(students._loop._segment_steps, static_argnums=(0, 1, 2))
  key, state = jax.random.key(0), st.init(None, None)
  halves = segment(st, 6, 2, state, key, jnp.asarray(0), *args)[0]
  halves = segment(st, 6, 2, halves, key, jnp.asarray(2), *args)[0]
  runs = [halves, segment(st, 6, 4, state, key, jnp.asarray(0), *args)[0]]
  np.testing.assert_array_equal(runs[0]["u"], runs[1]["u"])
  assert len(set(np.asarray(runs[0]["u"]).tolist())) == 4
  pools = np.asarray(runs[0]["pools"])
  assert not np.allclose(pools[:, 0], pools[:, 1])
