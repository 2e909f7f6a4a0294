"""The vmapped / chunked / looped teacher ensemble."""

from __future__ import annotations

import pathlib

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from pate_jax import data, experiment, memory, models, teachers, votes
from tests._scripts import run_result

T, N = 6, 40


@pytest.fixture(scope="module")
def shards():
  ds = data.load_image_dataset("digits")
  x, y, _ = data.partition(jax.random.key(0), ds.train_images, ds.train_labels, T)
  return jnp.asarray(data.to_float(x[:, :N])), jnp.asarray(y[:, :N]), ds


def _fns(batch_size=None, max_shift=1):
  return teachers.TeacherFns(models.get_model("mlp", 10, hidden=(32,)), optax.adam(1e-2),
                             batch_size, max_shift)


def _train(ensemble, shards, segments, state=None):
  """``segments`` of steps from ``state`` (default: ``ensemble``'s initial state)."""
  x, y, _ = shards
  keys = jax.random.split(jax.random.key(1), T)
  if state is None:
    state = ensemble.init(jax.random.split(jax.random.key(2), T), x[0])
  start = 0
  for n in segments:
    state, loss = ensemble.train(state, keys, x, y, start, n)
    start += n
  return state, loss


def _max_diff(a, b):
  return max(float(jnp.abs(u - v).max()) for u, v in zip(jax.tree.leaves(a), jax.tree.leaves(b)))


@pytest.mark.slow
@pytest.mark.usefixtures("float32_matmuls")  # TF32 on a GPU: ~1e-3 relative per product
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


@pytest.mark.slow
def test_segments_do_not_change_results(shards):
  ens = teachers.Ensemble(_fns(batch_size=8), "vmap")
  one, _ = _train(ens, shards, [10])
  three, _ = _train(ens, shards, [4, 3, 3])
  assert _max_diff(one, three) == 0.0  # bit-identical: what makes resume exact


@pytest.mark.slow
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


@pytest.mark.slow
def test_unrolled_segments_take_the_same_steps(shards):
  # A CNN (where unrolling pays on a CPU), looped and unrolled, in segments of 3 and 2.
  model = models.get_model("mnist_cnn", 10, features=(4, 8), hidden=(16,))
  looped, unrolled = (teachers.TeacherFns(model, optax.adam(1e-2), 8, 1, unroll_segments=u)
                      for u in (False, True))
  ens_looped, ens_unrolled = (teachers.Ensemble(f, "loop") for f in (looped, unrolled))
  # One initial state for both (init does not depend on unrolling): one init program.
  init = ens_looped.init(jax.random.split(jax.random.key(2), T), shards[0][0])
  a, loss_a = _train(ens_looped, shards, [3, 2], init)
  b, loss_b = _train(ens_unrolled, shards, [3, 2], init)
  assert _max_diff(a, b) < 1e-5 and jnp.allclose(loss_a, loss_b, atol=1e-6)
  c, _ = _train(ens_unrolled, shards, [3], init)  # the 3-step program already compiled
  assert _max_diff(a, c) > 1e-3  # the comparison can tell 5 steps from 3
  one = jax.tree.map(lambda v: v[0], a)
  args = (one, jax.random.key(0), shards[0][0], shards[1][0], jnp.int32(0), 3)
  jaxprs = [str(jax.make_jaxpr(f.train_segment, static_argnums=5)(*args))
            for f in (looped, unrolled)]
  assert "unroll=1" in jaxprs[0] and "unroll=3" in jaxprs[1]  # all 3 steps: no loop left


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


@pytest.mark.parametrize("batch_size,max_shift,match", [
    (-2, 1, "batch_size"), (0, 1, "batch_size"), (None, -1, "max_shift"), (None, 1.5, "max_shift"),
])
def test_teacher_fns_reject_bad_arguments(batch_size, max_shift, match):
  with pytest.raises(ValueError, match=match):
    _fns(batch_size, max_shift)


def test_shift_larger_than_the_image_is_rejected():
  with pytest.raises(ValueError, match=r"max_shift must be smaller than the images \(5×5\)"):
    teachers.random_shift(jax.random.key(0), jnp.zeros((3, 5, 5, 1)), 5)


def test_train_and_predict_reject_bad_sizes(shards):
  x, y, _ = shards
  ens = teachers.Ensemble(_fns(), "loop")
  keys = jax.random.split(jax.random.key(1), T)
  state = {"params": None, "opt_state": None}  # checked before any use
  for steps in (0, -3):
    with pytest.raises(ValueError, match="num_steps"):
      ens.train(state, keys, x, y, 0, steps)
  with pytest.raises(ValueError, match="start"):
    ens.train(state, keys, x, y, -1, 1)
  for chunk in (0, -1):
    with pytest.raises(ValueError, match="query_chunk"):
      ens.predict(state["params"], x[0], query_chunk=chunk)
  with pytest.raises(ValueError, match="query_chunk"):
    teachers.soft_counts(ens.fns, state["params"], x[0], (1.0,), T, query_chunk=0)


def test_unknown_strategy():
  with pytest.raises(ValueError, match="strategy"):
    teachers.Ensemble(_fns(), "pmap")


def test_default_strategy():
  assert teachers.default_strategy("cpu") == "loop"
  assert teachers.default_strategy("gpu") == "vmap"
  assert teachers.default_strategy("tpu") == "vmap"


def test_build_ensemble_takes_plain_arguments():
  ens = teachers.build_ensemble("mlp", 10, model_kwargs={"hidden": (8,)}, learning_rate=1e-3,
                                weight_decay=0.0, batch_size=4, max_shift=1, strategy="loop")
  assert ens.strategy == "loop" and ens.mesh is None and ens.chunk_size is None
  assert (ens.fns.batch_size, ens.fns.max_shift, ens.fns.model.hidden) == (4, 1, (8,))
  auto = teachers.build_ensemble("mlp", 10, learning_rate=1e-3, weight_decay=0.0)
  assert auto.strategy == teachers.default_strategy() and auto.fns.batch_size is None
  with pytest.raises(ValueError, match="learning_rate must be > 0; got 0"):
    teachers.build_ensemble("mlp", 10, learning_rate=0.0, weight_decay=0.0)
  with pytest.raises(ValueError, match="weight_decay must be >= 0; got -1"):
    teachers.build_ensemble("mlp", 10, learning_rate=1e-3, weight_decay=-1.0)


def test_train_with_checkpoints_calls_after_save_after_each_save(shards):
  class _Saves:  # a checkpointer that only records what it is given
    def __init__(self):
      self.steps = []

    def save(self, step, state):
      del state
      self.steps.append(step)

    def restore_history(self, step, key):
      del step, key
      return []

    def save_history(self, entries):
      self.history = list(entries)

  x, y, _ = shards
  ens = teachers.Ensemble(_fns(), "loop")
  keys = jax.random.split(jax.random.key(1), 2)
  state = ens.init(jax.random.split(jax.random.key(2), 2), x[0])
  ckpt, seen = _Saves(), []
  _, loss = teachers.train_with_checkpoints(
      ens, state, keys, x[:2], y[:2], ckpt, step=1, num_steps=5, checkpoint_every=2,
      num_teachers=2, after_save=lambda step: seen.append((step, list(ckpt.steps))))
  assert ckpt.steps == [3, 5] and isinstance(loss, float)
  assert [e["step"] for e in ckpt.history] == [3, 5] and ckpt.history[-1]["mean_loss"] == loss
  assert seen == [(3, [3]), (5, [3, 5])]  # called once per save, after it


@pytest.mark.slow
def test_models_by_name():
  x = jnp.zeros((2, 32, 32, 3))
  for name in ("mnist_cnn", "svhn_cnn", "mlp"):
    model = models.get_model(name, 7)
    params = model.init(jax.random.key(0), x)
    assert model.apply(params, x).shape == (2, 7)
  with pytest.raises(ValueError, match="unknown model 'resnet'"):
    models.get_model("resnet", 10)


def test_stride_downsampling_keeps_the_map_sizes_without_pooling():
  """``downsample="stride"``: the same 28 → 14 → 7 maps as conv + max-pool (so the same
  dense layer), made by stride-2 convolutions, with no pooling in the computation."""
  x = jnp.zeros((2, 28, 28, 1))
  shapes = {}
  for down in ("max_pool", "stride"):
    model = models.get_model("mnist_cnn", 10, features=(4, 8), hidden=(16,), downsample=down)
    params = model.init(jax.random.key(0), x)
    assert model.apply(params, x).shape == (2, 10)
    shapes[down] = jax.tree_util.tree_map(jnp.shape, params)
    jaxpr = str(jax.make_jaxpr(model.apply)(params, x))
    assert ("reduce_window" in jaxpr or "max_pool" in jaxpr) == (down == "max_pool")
  assert shapes["stride"] == shapes["max_pool"]
  assert shapes["stride"]["params"]["Dense_0"]["kernel"] == (7 * 7 * 8, 16)
  with pytest.raises(ValueError, match="downsample must be"):
    bad = models.get_model("mnist_cnn", 10, downsample="avg")
    bad.init(jax.random.key(0), x)


_SMALL_CNN = {"features": (4, 8), "hidden": (16,)}


@pytest.fixture(scope="module")
def small_cnn():
  """4 images, a small default MnistCNN and 3 teachers' parameters of it."""
  x = jax.random.uniform(jax.random.key(0), (4, 28, 28, 1))
  base = models.get_model("mnist_cnn", 10, **_SMALL_CNN)
  params = jax.jit(jax.vmap(base.init, in_axes=(0, None)))(
      jax.random.split(jax.random.key(1), 3), x)
  return x, base, params


def _small_cnn_pair(small_cnn, **variant):
  """4 images and labels, a small default MnistCNN, the same CNN with ``variant``, and 3
  teachers' parameters of the default one (``small_cnn``)."""
  x, base, params = small_cnn
  other = models.get_model("mnist_cnn", 10, **variant, **_SMALL_CNN)
  return x, jnp.arange(4) % 10, base, other, params


def _vmapped_grad(model, x, y, with_value=True):
  """Per-teacher (value and) gradient of the mean cross-entropy of ``model`` on ``x, y``,
  vmapped over a leading teacher axis of the parameters."""
  def loss(p):
    return optax.softmax_cross_entropy_with_integer_labels(model.apply(p, x), y).mean()
  return jax.vmap(jax.value_and_grad(loss) if with_value else jax.grad(loss))


@pytest.mark.parametrize("shape,kernel,stride", [
    ((9, 9), (5, 5), 1), ((7, 10), (3, 5), 2),
    pytest.param((28, 28), (5, 5), 2, marks=pytest.mark.slow)])  # 6 s on the 2-core CPU
def test_patch_conv_is_nn_conv_same_padding(shape, kernel, stride, float32_matmuls):
  """PatchConv: nn.Conv's parameters (names, shapes, initial values) and its function and
  gradients, for SAME padding, odd and even sizes, strides 1 and 2."""
  from pate_jax.models._nets import PatchConv
  import flax.linen as nn
  x = jax.random.normal(jax.random.key(0), (2, *shape, 3))
  ref = nn.Conv(4, kernel, strides=stride, padding="SAME")
  ours = PatchConv(4, kernel, stride)
  params = ref.init(jax.random.key(1), x)
  assert jax.tree_util.tree_all(jax.tree_util.tree_map(
      np.array_equal, params, ours.init(jax.random.key(1), x)))
  np.testing.assert_allclose(ours.apply(params, x), ref.apply(params, x), atol=1e-5)
  loss = lambda m: lambda p, x: jnp.sum(jnp.sin(m.apply(p, x)))
  g_ref, g_ours = (jax.grad(loss(m), argnums=(0, 1))(params, x) for m in (ref, ours))
  jax.tree_util.tree_map(lambda a, b: np.testing.assert_allclose(a, b, atol=1e-4),
                         g_ours, g_ref)


def test_patch_conv_cnn_is_the_same_network_as_a_batched_matmul(small_cnn, float32_matmuls):
  """MnistCNN(conv="patches"): the same parameter tree and logits as the lax CNN; vmapped
  over teachers, its training step has no convolution, and its FLOP count is the lax
  step's counted densely (padding included, which the patches multiply by zero)."""
  from pate_jax import flops
  x, y, lax_cnn, patch_cnn, params = _small_cnn_pair(small_cnn, conv="patches")
  logits = {m: jax.jit(jax.vmap(m.apply, in_axes=(0, None)))(params, x)
            for m in (lax_cnn, patch_cnn)}
  np.testing.assert_allclose(logits[patch_cnn], logits[lax_cnn], atol=1e-5)

  step = lambda model: _vmapped_grad(model, x, y, with_value=False)
  assert "conv_general_dilated" not in str(jax.make_jaxpr(step(patch_cnn))(params))
  assert "conv_general_dilated" in str(jax.make_jaxpr(step(lax_cnn))(params))
  assert flops.jaxpr_flops(step(patch_cnn), params) == pytest.approx(
      flops.jaxpr_flops(step(lax_cnn), params, count_padding=True), rel=1e-6)
  with pytest.raises(ValueError, match=r"kwargs\.conv must be one of \('lax', 'patches'\)"):
    models.get_model("mnist_cnn", 10, conv="fft").init(jax.random.key(0), x)
  # The GPU bench's CNN names both knobs, so that --config.model.kwargs.conv=patches works.
  bench = experiment.load_script(
      pathlib.Path(__file__).parents[1] / "configs" / "bench_teachers.py").get_config("cnn")
  assert bench.model.kwargs.to_dict() == {"conv": "lax", "downsample": "max_pool",
                                          "pool": "views"}
  jax.eval_shape(models.get_model(bench.model.name, 10, **bench.model.kwargs).init,
                 jax.random.key(0), x)  # traced (where the kwargs are checked), not run


@pytest.mark.parametrize("shape", [(28, 28), (14, 14), (7, 10)])
def test_max_pool_views_is_nn_max_pool(shape):
  """max_pool_views: nn.max_pool's 3×3/2 SAME values on odd and even sizes, and the same
  gradient where the window's maximum is unique (random inputs), up to the order in which
  overlapping windows' gradients are summed."""
  from pate_jax.models._nets import max_pool_views
  import flax.linen as nn
  x = jax.random.normal(jax.random.key(0), (2, *shape, 3))
  ref = lambda x: nn.max_pool(x, (3, 3), strides=(2, 2), padding="SAME")
  np.testing.assert_array_equal(max_pool_views(x), ref(x))
  w = jax.random.normal(jax.random.key(1), ref(x).shape)
  grads = [jax.grad(lambda x: jnp.sum(w * f(x)))(x) for f in (max_pool_views, ref)]
  np.testing.assert_allclose(*grads, rtol=1e-6, atol=1e-6)


def test_views_pool_cnn_has_the_window_cnns_logits_and_gradients(small_cnn):
  """MnistCNN(pool="views"): the same logits and parameter gradients as the reduce_window
  CNN (ties after the ReLU are zeros, whose gradient the ReLU drops), with no
  select_and_scatter in its vmapped gradient."""
  x, y, window, views, params = _small_cnn_pair(small_cnn, pool="views")
  grad = lambda model: _vmapped_grad(model, x, y)
  (l_win, g_win), (l_views, g_views) = (jax.jit(grad(m))(params) for m in (window, views))
  np.testing.assert_allclose(l_views, l_win, rtol=1e-6)
  jax.tree_util.tree_map(lambda a, b: np.testing.assert_allclose(a, b, atol=1e-6),
                         g_views, g_win)
  assert "select_and_scatter" not in str(jax.make_jaxpr(grad(views))(params))
  assert "select_and_scatter" in str(jax.make_jaxpr(grad(window))(params))
  with pytest.raises(ValueError, match=r"kwargs\.pool must be one of \('window', 'views'\)"):
    models.get_model("mnist_cnn", 10, pool="avg").init(jax.random.key(0), x)


def _primitives(jaxpr) -> set[str]:
  """Every primitive of ``jaxpr`` and of the jaxprs nested in it (scan, jit, remat...)."""
  names = set()
  for e in jaxpr.eqns:
    names.add(e.primitive.name)
    for v in e.params.values():
      inner = getattr(v, "jaxpr", None)
      if inner is not None:
        names |= _primitives(getattr(inner, "jaxpr", inner))
  return names


@pytest.mark.slow
def test_teacher_loss_is_optax_cross_entropy_and_the_paper_step_has_no_scatter():
  """TeacherFns.loss: optax's integer-label cross-entropy (values and gradients) by a one-hot
  product; the paper config's vmapped training step (view pools) then holds no scatter and
  no select_and_scatter, the ops deterministic GPU kernels replace by slower forms."""
  cfg = experiment.load_script(pathlib.Path(__file__).parents[1] / "configs"
                               / "mnist_250.py").get_config()
  kwargs = {**cfg.model.kwargs, "features": (4, 8), "hidden": (16,)}
  ens = teachers.build_ensemble("mnist_cnn", 10, learning_rate=1e-3, weight_decay=1e-4,
                                model_kwargs=kwargs, batch_size=8, max_shift=2,
                                strategy="vmap", compute_dtype="bfloat16")
  x = jax.random.uniform(jax.random.key(0), (3, 20, 28, 28, 1))
  y = jax.random.randint(jax.random.key(1), (3, 20), 0, 10)
  keys = jax.random.split(jax.random.key(2), 3)
  state = jax.jit(jax.vmap(ens.fns.init, in_axes=(0, None)))(keys, x[0])

  def reference(params, images, labels):
    logits = ens.fns.model.apply(params, images)
    return optax.softmax_cross_entropy_with_integer_labels(logits, labels).mean()
  ours, ref = (jax.jit(jax.vmap(jax.value_and_grad(f)))(state["params"], x, y)
               for f in (ens.fns.loss, reference))
  jax.tree_util.tree_map(lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6),
                         ours, ref)
  step = jax.vmap(ens.fns.train_step, in_axes=(0, 0, 0, 0, None))
  names = _primitives(jax.make_jaxpr(step)(state, keys, x, y, jnp.int32(0)).jaxpr)
  assert "conv_general_dilated" in names and "dot_general" in names
  assert not {n for n in names if "scatter" in n}, names


def test_cpu_cnn_config_trains_the_stride_cnn_unrolled():
  config_file = experiment.load_script(
      pathlib.Path(__file__).parents[1] / "configs" / "mnist_250.py")
  cfg = config_file.get_config("cpu_cnn")
  assert cfg.model.name == "mnist_cnn" and cfg.model.kwargs.downsample == "stride"
  assert cfg.unroll_segments and cfg.compute_dtype == "float32" and cfg.batch_size == 0
  with pytest.raises(ValueError, match="cpu_cnn"):
    config_file.get_config("gpu")


_PEAK_SCRIPT = """
import json, os, sys
# Two cores, as memory.ANALYSIS_FACTORS was measured on: XLA:CPU's threads (and their
# scratch) follow the cores this process may use, more on a larger host.
os.sched_setaffinity(0, sorted(os.sched_getaffinity(0))[:2])
import jax, jax.numpy as jnp, optax
from pate_jax import models, teachers
what, t, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
fns = teachers.TeacherFns(models.get_model("mnist_cnn", 10, pool="views"), optax.adam(1e-3),
                          64, 0)
ens = teachers.Ensemble(fns, "vmap", memory_bytes=2**40)
x, y = jnp.zeros((t, 128, 28, 28, 1)), jnp.zeros((t, 128), jnp.int32)
state = ens.init(jax.random.split(jax.random.key(2), t), x[0])
keys = jax.random.split(jax.random.key(1), t)
if what == "predict":
  queries = jnp.zeros((n, 28, 28, 1))
  plan = ens.plan_predict(state["params"], queries)
  run = lambda: ens.predict(state["params"], queries, plan=plan)
else:
  plan = ens.plan_train(state, keys, x, y, num_steps=n)
  run = lambda: ens.train(state, keys, x, y, 0, n, plan=plan)
def kib(field):  # this process's VmRSS / VmHWM (its peak since the reset below)
  status = open("/proc/self/status").read().split(field + ":")[1]
  return int(status.split()[0])
jax.block_until_ready(state)
with open("/proc/self/clear_refs", "w") as f:
  f.write("5")  # the peak restarts from the resident size: earlier peaks do not hide this one
before = kib("VmRSS")
jax.block_until_ready(run())
grown = (kib("VmHWM") - before) * 1024
print("RESULT" + json.dumps({"estimate": plan.estimate_bytes, "grown": grown,
                             "whole": [plan.teachers, plan.queries]}))
"""


@pytest.mark.slow
@pytest.mark.parametrize("what,t,n", [("predict", 2, 256), ("train", 2, 1)])
def test_the_plans_estimate_bounds_the_processs_peak(what, t, n):
  """What the planner expects a vmapped CNN's prediction or training to take bounds what
  the process's peak memory grows by while it runs: on a CPU, where XLA's memory analysis
  leaves out the YNNPACK fusions' scratch (7x short for this prediction), through
  ``memory.analysis_factor``."""
  # One device, and XLA's default build: the memory of the programs a run compiles.
  out = run_result(_PEAK_SCRIPT, what, str(t), str(n), fast_compile=False, XLA_FLAGS="")
  assert out["whole"][0] == t, out  # one chunk: the estimate is the whole program's
  assert 0 < out["grown"] <= out["estimate"], out


def test_host_memory_is_the_control_groups_limit_where_lower(tmp_path, monkeypatch):
  unlimited, low = tmp_path / "v2", tmp_path / "v1"
  unlimited.write_text("max\n")
  low.write_text(f"{2**30}\n")
  monkeypatch.setattr(memory, "_CGROUP_LIMITS", (str(unlimited), str(tmp_path / "absent")))
  whole = memory.host_memory_bytes()
  assert whole >= 2**30  # the machine's RAM: "max" and a missing file set no limit
  monkeypatch.setattr(memory, "_CGROUP_LIMITS", (str(unlimited), str(low)))
  assert memory.host_memory_bytes() == 2**30
  assert memory.device_memory_bytes(jax.devices("cpu")[0]) == 2**30 // len(jax.devices("cpu"))


class _Device:
  def __init__(self, stats):
    self.stats = stats

  def memory_stats(self):
    return self.stats


def test_peak_bytes_reads_the_allocators_against_the_budget():
  gib = 2**30
  gpus = [_Device({"peak_bytes_in_use": 3 * gib, "bytes_limit": 60 * gib}),
          _Device({"peak_bytes_in_use": 5 * gib, "bytes_limit": 60 * gib})]
  assert memory.peak_bytes(4 * gib, gpus) == {
      "peak_bytes_in_use": 5 * gib, "bytes_limit": 60 * gib, "budget_bytes": 4 * gib,
      "peak_within_budget": False}
  assert memory.peak_bytes(6 * gib, gpus)["peak_within_budget"]
  assert memory.peak_bytes(None, gpus[:1]) == {"peak_bytes_in_use": 3 * gib,
                                               "bytes_limit": 60 * gib}
  assert memory.peak_bytes(gib, [gpus[0], _Device(None)]) is None
  assert memory.peak_bytes(gib, jax.devices("cpu")) is None  # no allocator statistics
  # The peak counts from the process's start: judged only where it grew since `before`.
  earlier = memory.peak_bytes(None, gpus)
  assert memory.peak_bytes(4 * gib, gpus, before=earlier) == {
      "peak_bytes_in_use": 5 * gib, "bytes_limit": 60 * gib, "peak_is_earlier": True,
      "budget_bytes": 4 * gib, "peak_within_budget": None}
  grown = [_Device({"peak_bytes_in_use": 7 * gib, "bytes_limit": 60 * gib})]
  assert memory.peak_bytes(6 * gib, grown, before=earlier)["peak_within_budget"] is False
  assert memory.peak_bytes(8 * gib, grown, before=earlier)["peak_is_earlier"] is False


@pytest.mark.slow
def test_memory_budget_forcing_chunks_gives_identical_votes(shards):
  """A budget too small for all teachers at once is met by chunking over teachers
  (training, prediction) and queries (prediction), with the same votes."""
  fns = _fns(batch_size=16)
  free = teachers.Ensemble(fns, "vmap", memory_bytes=2**40)
  x, y, ds = shards
  keys = jax.random.split(jax.random.key(1), T)
  state = free.init(jax.random.split(jax.random.key(2), T), x[0])
  x_test = jnp.asarray(data.to_float(ds.test_images))
  whole_train = free.plan_train(state, keys, x, y)
  whole_pred = free.plan_predict(state["params"], x_test)
  assert whole_train.teachers == T and whole_pred.teachers == T
  # Budget: the resident state and data plus room for about 2 teachers / 2×64 pairs.
  resident = memory.tree_bytes((state, x, y))
  per_teacher = whole_train.estimate_bytes / T
  tight = teachers.Ensemble(fns, "vmap", memory_bytes=int(resident + 2.5 * per_teacher))
  plan = tight.plan_train(state, keys, x, y)
  assert plan.teachers == 2, plan  # the largest divisor of 6 within the budget
  pred_budget = (memory.tree_bytes((state["params"], x_test))
                 + 2.5 * 64 * whole_pred.estimate_bytes / (T * whole_pred.queries))
  pred_plan = teachers.Ensemble(fns, "vmap", memory_bytes=int(pred_budget)).plan_predict(
      state["params"], x_test)
  assert pred_plan.teachers < T and pred_plan.queries == 64, pred_plan

  a, _ = free.train(jax.tree.map(jnp.copy, state), keys, x, y, 0, 8)
  b, _ = tight.train(jax.tree.map(jnp.copy, state), keys, x, y, 0, 8, plan=plan)
  assert _max_diff(a, b) < 1e-5
  votes_free = free.votes(a["params"], x_test, 10, T)
  votes_tight = tight.votes(a["params"], x_test, 10, T, query_chunk=None)
  votes_chunked = free.predict(a["params"], x_test, plan=pred_plan)
  np.testing.assert_array_equal(votes_free, votes_tight)
  np.testing.assert_array_equal(free.predict(a["params"], x_test), votes_chunked)


@pytest.mark.slow
def test_the_plan_is_the_training_program_itself_where_it_fits(shards, caplog):
  """With ``num_steps`` the planner compiles the program the training runs (every teacher
  in one vmap) and reads its memory analysis: where it fits, nothing else is compiled,
  not the probe, nor the training afterwards; where it does not, its bytes per teacher
  plan the chunks."""
  fns = _fns(batch_size=16)
  x, y, _ = shards
  keys = jax.random.split(jax.random.key(1), T)
  init_keys = jax.random.split(jax.random.key(2), T)

  def compiles(fn):
    caplog.clear()
    with jax.log_compiles(True), caplog.at_level("DEBUG"):
      out = fn()
    return out, [m.getMessage().split(" with ")[0] for m in caplog.records
                 if m.getMessage().startswith("Compiling")]

  free = teachers.Ensemble(fns, "vmap", memory_bytes=2**40)
  state = free.init(init_keys, x[0])
  plan, compiled = compiles(lambda: free.plan_train(state, keys, x, y, num_steps=3))
  assert [c for c in compiled if "jit(run)" in c or "<lambda>" in c] == ["Compiling jit(run)"]
  assert plan.teachers == T and plan.estimate_bytes > 0
  (_, loss), compiled = compiles(lambda: free.train(state, keys, x, y, 0, 3, plan=plan))
  assert "Compiling jit(run)" not in compiled and np.isfinite(np.asarray(loss)).all()
  # The probe's plan (no num_steps) chunks alike where both fit.
  assert free.plan_train(state, keys, x, y).teachers == T
  # A budget the whole program exceeds: its bytes per teacher plan chunks of fewer
  # teachers, with no probe compiled.
  resident = memory.tree_bytes((state, x, y))
  tight = teachers.Ensemble(fns, "vmap", memory_bytes=resident + plan.estimate_bytes // 2)
  state = tight.init(init_keys, x[0])
  small, compiled = compiles(lambda: tight.plan_train(state, keys, x, y, num_steps=3))
  assert [c for c in compiled if "jit(run)" in c or "<lambda>" in c] == ["Compiling jit(run)"]
  assert small.teachers < T and T % small.teachers == 0
  assert small.estimate_bytes <= small.budget_bytes


def test_planner_arithmetic():
  assert memory.largest_divisor_within(250, 30) == 25
  assert memory.plan_teacher_chunk(250, 1e9, 26e9) == 25
  with pytest.raises(MemoryError, match="one teacher needs"):
    memory.plan_teacher_chunk(250, 1e9, 0.5e9)
  # All 250 teachers fit with 100 queries; with a smaller budget the teachers are cut.
  assert memory.plan_predict_chunks(250, 10_000, 1e3, 250 * 100 * 1e3) == (250, 100)
  assert memory.plan_predict_chunks(250, 10_000, 1e3, 50 * 64 * 1e3) == (50, 64)
  with pytest.raises(ValueError, match="memory_fraction"):
    memory.memory_budget(1.5)


@pytest.mark.parametrize("strategy,chunk_size,query_chunk", [
    pytest.param("loop", None, 16, marks=pytest.mark.slow), ("vmap", None, None),
    ("vmap", 3, 16), pytest.param("chunked", 3, None, marks=pytest.mark.slow)])
def test_predictions_and_distillation_targets_come_from_one_pass(strategy, chunk_size,
                                                                 query_chunk, float32_matmuls):
  """predict_with_soft_counts gives predict's classes and soft_counts' integer sums (the
  last teachers left out), through overlapping teacher chunks and query chunks: each
  teacher counted once, so the sums agree to a unit per teacher (a float's last bit at
  a floor's edge) and are the averaged probabilities to 1/S."""
  fns = teachers.TeacherFns(models.get_model("mlp", 10, hidden=(16,)), optax.adam(1e-3), None)
  t, x = 7, jax.random.normal(jax.random.key(0), (37, 28, 28, 1))
  params = jax.vmap(lambda k: fns.init(k, x)["params"])(jax.random.split(jax.random.key(1), t))
  ens = teachers.Ensemble(fns, strategy, chunk_size=chunk_size,
                          mesh=None if strategy == "loop" else teachers.teacher_mesh())
  preds, counts = ens.predict_with_soft_counts(params, x, (1.0, 5.0), t - 2, query_chunk)
  want = teachers.soft_counts(fns, params, x, (1.0, 5.0), t - 2, query_chunk=8)
  assert counts.dtype == want.dtype == jnp.int32
  assert np.abs(np.asarray(counts) - np.asarray(want)).max() <= t - 2
  logits = jnp.stack([fns.model.apply(jax.tree.map(lambda a: a[i], params), x)
                      for i in range(t - 2)])
  for k, temp in enumerate((1.0, 5.0)):
    mean = np.asarray(jax.nn.softmax(logits / temp, axis=-1)).mean(0)
    np.testing.assert_allclose(np.asarray(counts[k]) / (votes.SOFT_COUNT_SCALE * (t - 2)),
                               mean, atol=2.0 / votes.SOFT_COUNT_SCALE)
  np.testing.assert_array_equal(preds, jnp.stack(
      [fns.predict(jax.tree.map(lambda a: a[i], params), x) for i in range(t)]))
  assert ens.predict_with_soft_counts(params, x, (), t, query_chunk)[1] is None
  with pytest.raises(ValueError, match="num_teachers"):
    ens.predict_with_soft_counts(params, x, (1.0,), t + 1)
  with pytest.raises(ValueError, match="temperatures must be positive"):
    ens.predict_with_soft_counts(params, x, (0.0,), t)
  with pytest.raises(ValueError, match="temperatures must be positive and finite"):
    ens.predict_with_soft_counts(params, x, (float("nan"),), t)  # NaN probabilities


@pytest.mark.slow
def test_soft_counts_sum_each_teachers_quantized_softmax(shards):
  fns = _fns(batch_size=16)
  ens = teachers.Ensemble(fns, "vmap")
  state, _ = _train(ens, shards, [5])
  x = jnp.asarray(data.to_float(shards[2].test_images[:70]))
  params = state["params"]
  got = teachers.soft_counts(fns, params, x, (1.0, 5.0), num_teachers=T - 1, query_chunk=32)
  logits = np.stack([np.asarray(fns.model.apply(jax.tree.map(lambda a: a[t], params), x))
                     for t in range(T - 1)])  # the last teacher is left out
  for i, temp in enumerate((1.0, 5.0)):
    want = np.asarray(votes.soft_counts(jax.nn.softmax(logits / temp, axis=-1))).sum(0)
    assert np.abs(np.asarray(got[i]) - want).max() <= T - 1  # a floor's edge per teacher
  s = votes.SOFT_COUNT_SCALE * (T - 1)
  assert int(got.min()) >= 0 and int(got.sum(-1).max()) <= s
  np.testing.assert_allclose(np.asarray(got.sum(-1)) / s, 1.0, atol=10 / votes.SOFT_COUNT_SCALE)
  with pytest.raises(ValueError, match="temperatures must be positive"):
    teachers.soft_counts(fns, params, x, (0.0,), num_teachers=T)
  with pytest.raises(ValueError, match="num_teachers"):
    teachers.soft_counts(fns, params, x, (1.0,), num_teachers=2**15)


def test_compute_votes_counts_only_the_first_num_teachers():
  fns = teachers.TeacherFns(models.get_model("mlp", 10, hidden=(16,)), optax.adam(1e-3), None)
  t, x = 5, jax.random.normal(jax.random.key(0), (11, 28, 28, 1))
  params = jax.vmap(lambda k: fns.init(k, x)["params"])(jax.random.split(jax.random.key(1), t))
  labels = np.zeros(11, np.int32)
  for strategy in ("loop", "vmap"):
    ens = teachers.Ensemble(fns, strategy)
    state = {"params": params, "opt_state": ()}
    got, acc, _, _ = teachers.compute_votes(ens, state, x, labels, num_classes=10,
                                            num_teachers=t - 2)
    assert np.all(np.asarray(got).sum(1) == t - 2)   # padding teachers cast no vote
    assert np.asarray(acc).shape == (t - 2,)


def test_query_set_is_the_pool_then_the_evaluation_rows():
  """The first ``num_pool`` query rows are the student split's public pool, the rest its
  evaluation rows: the queried pool holds no evaluation row."""
  import types  # pylint: disable=g-import-not-at-top
  ds = types.SimpleNamespace(name="mnist", test_labels=np.zeros(10_000, np.int64))
  rows, num_pool = teachers.query_set(ds)
  split = data.student_split("mnist", 10_000)
  assert num_pool == 9_000 and rows.shape == (10_000,)
  assert set(rows[:num_pool].tolist()) == set(split.pool_index.tolist())
  assert set(rows[num_pool:].tolist()) == set(split.eval_index.tolist())


def test_compute_votes_accuracy_and_predictions_are_the_real_teachers():
  """Each real teacher's accuracy is its share of correct answers, and the predictions
  returned are those of the real teachers only (padding excluded), by applying each alone."""
  fns = teachers.TeacherFns(models.get_model("mlp", 10, hidden=(16,)), optax.adam(1e-3), None)
  t, x = 5, jax.random.normal(jax.random.key(0), (11, 28, 28, 1))
  params = jax.vmap(lambda k: fns.init(k, x)["params"])(jax.random.split(jax.random.key(1), t))
  want = np.stack([np.argmax(fns.model.apply(jax.tree.map(lambda a: a[i], params), x), -1)
                   for i in range(t - 2)])  # [3, 11]
  labels = want[0].copy()
  labels[:4] = (labels[:4] + 1) % 10  # teacher 0 right on 7 of 11
  got, acc, _, _, preds = teachers.compute_votes(
      teachers.Ensemble(fns, "loop"), {"params": params, "opt_state": ()}, x, labels,
      num_classes=10, num_teachers=t - 2, return_predictions=True)
  np.testing.assert_array_equal(preds, want)
  np.testing.assert_allclose(np.asarray(acc), (want == labels).mean(1), atol=1e-6)
  assert float(acc[0]) == pytest.approx(7 / 11)
  np.testing.assert_array_equal(got, [np.bincount(want[:, q], minlength=10) for q in range(11)])


def test_largest_divisor_within_is_the_brute_force_maximum():
  """Every n up to 150 (perfect squares among them) and every limit at, between and around
  its divisors: the largest d | n with d <= limit, 0 below 1."""
  for n in range(1, 151):
    divs = [d for d in range(1, n + 1) if n % d == 0]
    for limit in sorted({0.5, *divs, *(d + 0.5 for d in divs), *(d - 0.5 for d in divs)}):
      want = max([d for d in divs if d <= limit], default=0)
      assert memory.largest_divisor_within(n, limit) == want, (n, limit)


def test_teacher_chunks_at_the_budgets_edge():
  assert memory.plan_teacher_chunk(36, 1e9, 6e9) == 6     # exactly 6 teachers' bytes
  assert memory.plan_teacher_chunk(36, 1e9, 5.99e9) == 4
  assert memory.plan_teacher_chunk(36, 0.0, 1.0) == 36     # no activation bytes: one chunk
  assert memory.plan_teacher_chunk(36, 1e9, 1e9) == 1


@pytest.mark.parametrize("num_local,num_queries,budget,want", [
    (4, 10, 1e9, (4, 10)),        # never more queries than asked
    (4, 5000, 1e9, (4, 1024)),    # nor more than max_queries
    (4, 5000, 4 * 100, (4, 100)),  # all teachers, as many queries as fit
    (4, 5000, 4 * 64, (4, 64)),
    (4, 5000, 2 * 64, (2, 64)),   # fewer teachers once min_queries no longer fit
    (4, 5000, 3 * 64, (2, 64)),   # (a divisor of the teachers)
    (4, 5000, 20, (1, 20)),       # one teacher, the queries that fit
    (4, 5000, 1, (1, 1)),
])
def test_predict_chunks_fit_the_budget_and_use_it(num_local, num_queries, budget, want):
  """One byte per (teacher, query) pair: the plan fits the budget, cuts the teachers
  (divisors) only where min_queries queries of all of them do not fit, and never asks for
  more queries per chunk than there are, nor than max_queries."""
  t, q = memory.plan_predict_chunks(num_local, num_queries, 1.0, budget)
  assert (t, q) == want
  assert num_local % t == 0 and t * q <= budget and q <= min(num_queries, 1024)


def test_predict_chunks_refuse_a_budget_below_one_pair():
  with pytest.raises(MemoryError, match="one teacher on one query"):
    memory.plan_predict_chunks(4, 5000, 1.0, 0.99)


class _FakeDevice:
  def __init__(self, stats, platform="gpu"):
    self.stats, self.platform = stats, platform

  def memory_stats(self):
    return self.stats


def test_device_memory_is_the_allocators_limit_or_a_cpus_share_of_the_host(monkeypatch):
  assert memory.device_memory_bytes(_FakeDevice({"bytes_limit": 5 * 2**30})) == 5 * 2**30
  cpus = [_FakeDevice(None, "cpu") for _ in range(4)]
  monkeypatch.setattr(jax, "local_devices", lambda backend=None: cpus)
  monkeypatch.setattr(memory, "host_memory_bytes", lambda: 10 * 2**30 + 3)
  assert memory.device_memory_bytes(cpus[0]) == (10 * 2**30 + 3) // 4
  assert memory.memory_budget(1.0, cpus[0]) == (10 * 2**30 + 3) // 4
  assert memory.memory_budget(0.5, cpus[0]) == int(0.5 * ((10 * 2**30 + 3) // 4))


def test_peak_bytes_at_the_budget_and_the_smallest_limit():
  gib = 2**30
  gpus = [_FakeDevice({"peak_bytes_in_use": 4 * gib, "bytes_limit": 60 * gib}),
          _FakeDevice({"peak_bytes_in_use": 2 * gib, "bytes_limit": 40 * gib})]
  out = memory.peak_bytes(4 * gib, gpus)
  assert out["peak_within_budget"] is True and out["bytes_limit"] == 40 * gib


def test_tree_bytes_counts_each_leafs_bytes():
  tree = {"a": np.zeros((3, 5), np.float32), "b": [jnp.zeros(7, jnp.int8),
                                                   jax.ShapeDtypeStruct((2, 2), jnp.float64)]}
  assert memory.tree_bytes(tree) == 3 * 5 * 4 + 7 + 2 * 2 * 8
