"""The FLOP counter (pate_jax/flops.py): closed forms for a matrix product, convolutions
(padded, strided, grouped, vmapped and their gradients, where ``feature_group_count`` and
``batch_group_count`` appear), the control flow it follows, and agreement with XLA:CPU's
own cost analysis -- exact on programs of convolutions and products, a few per cent below
it on the paper CNN's training step, where XLA also counts the elementwise ops, the pooling
and the optimiser."""

from __future__ import annotations

import jax
import jax.extend.core as jex_core
import jax.numpy as jnp
import optax
import pytest
from jax import lax

from pate_jax import flops, models, teachers

NHWC = ("NHWC", "HWIO", "NHWC")


def _sds(*shape, dtype=jnp.float32):
  return jax.ShapeDtypeStruct(shape, dtype)


def _xla_flops(fn, *args) -> float:
  cost = jax.jit(fn).lower(*args).cost_analysis()
  cost = cost[0] if isinstance(cost, (list, tuple)) else cost
  if not cost or "flops" not in cost:
    pytest.skip("this backend's cost analysis reports no FLOPs")
  return float(cost["flops"])


def _conv(padding="SAME", strides=(1, 1), groups=1, rhs_dilation=(1, 1)):
  return lambda x, w: lax.conv_general_dilated(
      x, w, strides, padding, rhs_dilation=rhs_dilation, dimension_numbers=NHWC,
      feature_group_count=groups)


def _primitives(fn, *args) -> list:
  """Every equation of ``fn``'s jaxpr, sub-jaxprs included."""
  out = []
  def walk(jaxpr):
    for e in jaxpr.eqns:
      out.append(e)
      for p in e.params.values():
        for j in p if isinstance(p, (tuple, list)) else (p,):
          if isinstance(j, jex_core.ClosedJaxpr):
            walk(j.jaxpr)
          elif isinstance(j, jex_core.Jaxpr):
            walk(j)
  walk(jax.make_jaxpr(fn)(*args).jaxpr)
  return out


def test_matmul_and_batched_dot_general_closed_forms():
  assert flops.jaxpr_flops(jnp.dot, _sds(64, 128), _sds(128, 32)) == 2 * 64 * 128 * 32
  bmm = lambda a, b: jnp.einsum("bij,bjk->bik", a, b)  # noqa: E731
  assert flops.jaxpr_flops(bmm, _sds(4, 64, 128), _sds(4, 128, 32)) == 2 * 4 * 64 * 128 * 32
  # Two contracting dimensions and a free one on each side.
  two = lambda a, b: jnp.einsum("icj,jck->ik", a, b)  # noqa: E731
  assert flops.jaxpr_flops(two, _sds(5, 3, 7), _sds(7, 3, 11)) == 2 * 5 * 3 * 7 * 11
  assert flops.dot_general_flops((4, 6, 8), (4, 8, 2), (((2,), (1,)), ((0,), (0,)))) == (
      2 * 4 * 6 * 2 * 8)


def test_conv_closed_forms_valid_same_and_dense():
  x, w = _sds(8, 28, 28, 3), _sds(5, 5, 3, 16)
  # VALID: every tap reads the image, 2 · N · 24² · O · 5² · C.
  assert flops.jaxpr_flops(_conv("VALID"), x, w) == 2 * 8 * 24 * 24 * 16 * 25 * 3
  # SAME, 5×5 on 28: per dimension 28 · 5 taps less the 2 + 1 at each border in the padding.
  assert flops.conv_taps(28, 5, 28, padding=(2, 2)) == 28 * 5 - 6
  assert flops.jaxpr_flops(_conv("SAME"), x, w) == 2 * 8 * 16 * 134**2 * 3
  assert flops.jaxpr_flops(_conv("SAME"), x, w, count_padding=True) == (
      2 * 8 * 28 * 28 * 16 * 25 * 3)


def test_grouped_conv_reads_its_group_of_input_features():
  x, w = _sds(2, 10, 10, 12), _sds(3, 3, 4, 24)  # 3 groups of 4 input features
  assert flops.jaxpr_flops(_conv("VALID", groups=3), x, w) == 2 * 2 * 8 * 8 * 24 * 9 * 4


def test_vmapped_conv_and_its_gradient_count_each_teacher_once():
  t, x, w = 3, _sds(3, 8, 12, 12, 2), _sds(3, 5, 5, 2, 4)
  single = flops.jaxpr_flops(_conv(), _sds(8, 12, 12, 2), _sds(5, 5, 2, 4))
  vconv = jax.vmap(_conv())
  assert any(e.params.get("feature_group_count") == t for e in _primitives(vconv, x, w))
  assert flops.jaxpr_flops(vconv, x, w) == t * single
  # grad of the vmapped (grouped) conv: its kernel gradient has batch_group_count = T.
  grad = jax.grad(lambda x, w: (vconv(x, w) ** 2).sum(), argnums=(0, 1))
  eqns = [e for e in _primitives(grad, x, w) if e.primitive.name == "conv_general_dilated"]
  assert [e.params["batch_group_count"] for e in eqns].count(t) == 1
  # Forward, input gradient, kernel gradient: the same taps (stride 1, SAME) three times;
  # the gradient of a plain sum does not read the forward conv (dead code, not counted).
  assert flops.jaxpr_flops(grad, x, w) == 3 * t * single
  kernel_grad = jax.grad(lambda x, w: vconv(x, w).sum(), argnums=1)
  assert flops.jaxpr_flops(kernel_grad, x, w) == t * single
  # vmap of the single teacher's gradient (the teachers' order) gives the same count.
  vgrad = jax.vmap(jax.grad(lambda x, w: (_conv()(x, w) ** 2).sum(), argnums=(0, 1)))
  assert flops.jaxpr_flops(vgrad, x, w) == 3 * t * single


def test_control_flow_scan_cond_remat_custom_jvp_jit_shard_map():
  a = _sds(16, 16)
  mm = 2 * 16**3
  scanned = lambda x: lax.scan(lambda c, _: (c @ x, None), x, None, length=5)[0]  # noqa: E731
  assert flops.jaxpr_flops(scanned, a) == 5 * mm
  fori = lambda x: lax.fori_loop(0, 4, lambda i, c: c @ x, x)  # noqa: E731  # a scan
  assert flops.jaxpr_flops(fori, a) == 4 * mm
  branchy = lambda x: lax.cond(x[0, 0] > 0, lambda y: y @ y @ y, lambda y: y, x)  # noqa: E731
  assert flops.jaxpr_flops(branchy, a) == 2 * mm  # the costlier branch
  nested = jax.jit(jax.checkpoint(lambda x: jax.nn.relu(jax.jit(jnp.dot)(x, x)) @ x))
  assert flops.jaxpr_flops(nested, a) == 2 * mm

  @jax.custom_jvp
  def f(x):
    return x @ x
  f.defjvp(lambda p, t: (f(p[0]), t[0] @ p[0] + p[0] @ t[0]))
  assert flops.jaxpr_flops(f, a) == mm
  # The gradient of a sum needs the JVP's two products, not the primal's (dead code).
  assert flops.jaxpr_flops(jax.grad(lambda x: f(x).sum()), a) == 2 * mm
  assert flops.jaxpr_flops(jax.grad(lambda x: (f(x) ** 2).sum()), a) == 3 * mm
  mesh, P = jax.sharding.AbstractMesh((4,), ("x",)), jax.sharding.PartitionSpec
  rows = jax.ShapeDtypeStruct((64, 16), jnp.float32,
                              sharding=jax.sharding.NamedSharding(mesh, P("x")))
  whole = jax.ShapeDtypeStruct((16, 16), jnp.float32,
                               sharding=jax.sharding.NamedSharding(mesh, P()))
  sharded = jax.shard_map(jnp.dot, mesh=mesh, in_specs=(P("x"), P()), out_specs=P("x"))
  assert flops.jaxpr_flops(sharded, rows, whole) == 2 * 64 * 16 * 16  # 4 × each shard
  with pytest.raises(ValueError, match="while loop"):
    flops.jaxpr_flops(lambda x, n: lax.fori_loop(0, n, lambda i, c: c @ x, x), a, 3)


_PROGRAMS = {
    "matmul": (jnp.dot, (_sds(64, 96), _sds(96, 40))),
    "conv_same": (_conv(), (_sds(4, 28, 28, 3), _sds(5, 5, 3, 16))),
    "conv_valid": (_conv("VALID"), (_sds(4, 28, 28, 3), _sds(5, 5, 3, 16))),
    "conv_stride2": (_conv(strides=(2, 2)), (_sds(4, 28, 28, 3), _sds(5, 5, 3, 16))),
    "conv_dilated": (_conv(rhs_dilation=(2, 2)), (_sds(4, 20, 20, 3), _sds(3, 3, 3, 8))),
    "conv_grouped": (_conv(groups=3), (_sds(2, 14, 14, 12), _sds(5, 5, 4, 24))),
    "vmapped_conv": (jax.vmap(_conv()), (_sds(3, 4, 14, 14, 2), _sds(3, 5, 5, 2, 8))),
}


@pytest.mark.parametrize("name", sorted(_PROGRAMS))
def test_equals_xla_cost_analysis_on_convolutions_and_products(name):
  fn, args = _PROGRAMS[name]
  assert flops.jaxpr_flops(fn, *args) == pytest.approx(_xla_flops(fn, *args), rel=1e-9)
  # Their gradients (input gradients of a strided conv dilate the input: lhs_dilation) add
  # one reduction of the output, which XLA counts as FLOPs too: within 1 %.
  grad = jax.grad(lambda *a: fn(*a).sum(), argnums=(0, 1))
  assert flops.jaxpr_flops(grad, *args) == pytest.approx(_xla_flops(grad, *args), rel=0.01)


def _teacher_step(fns):
  return lambda s, k, x, y: jax.vmap(lambda *a: fns.train_segment(*a, jnp.int32(0), 1))(
      s, k, x, y)


def test_paper_cnn_teacher_step_closed_form_and_xla():
  t, n, batch = 3, 16, 8
  fns = teachers.TeacherFns(models.get_model("mnist_cnn", 10, compute_dtype="bfloat16"),
                            optax.adamw(1e-3, weight_decay=1e-2), batch, 2)
  keys = jax.random.split(jax.random.key(0), t)
  images, labels = _sds(t, n, 28, 28, 1), _sds(t, n, dtype=jnp.int32)
  state = jax.eval_shape(jax.vmap(fns.init, in_axes=(0, None)), keys, _sds(n, 28, 28, 1))
  step = _teacher_step(fns)
  counted = flops.jaxpr_flops(step, state, keys, images, labels)
  # Per example, forward MACs: conv 5×5 1→64 on 28² (134² taps with SAME padding), conv
  # 5×5 64→128 on 14² (64² taps), dense 6272→384, dense 384→10. The backward pass is the
  # forward twice (input and kernel gradients: the same taps at stride 1) less conv1's
  # input gradient (the images need none).
  conv1, conv2 = 134**2 * 64 * 1, 64**2 * 128 * 64
  forward = conv1 + conv2 + 7 * 7 * 128 * 384 + 384 * 10
  assert counted == 2 * (3 * forward - conv1) * t * batch
  # XLA counts the same products plus one FLOP per element of everything else (ReLU,
  # pooling windows, softmax, AdamW): a few per cent more, never less.
  xla = _xla_flops(step, state, keys, images, labels)
  assert 1.0 <= xla / counted <= 1.06
