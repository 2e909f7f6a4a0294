"""The teacher axis sharded over 8 (host) devices gives the same votes as 1 device.

XLA fixes the device count at start-up, so the check runs in a subprocess with
``XLA_FLAGS=--xla_force_host_platform_device_count=8``.
"""

from __future__ import annotations

import textwrap

import pytest

from tests._scripts import run_result

_SCRIPT = textwrap.dedent("""
    import json
    import jax, jax.numpy as jnp, numpy as np, optax
    from pate_jax import data, models, teachers, votes

    assert jax.device_count() == 8, jax.devices()
    T = 10  # not a multiple of 8: exercises padding of the teacher axis
    ds = data.load_image_dataset("digits")
    x, y, _ = data.partition(jax.random.key(0), ds.train_images, ds.train_labels, T)
    x, y = jnp.asarray(data.to_float(x)), jnp.asarray(y)
    fns = teachers.TeacherFns(models.get_model("mlp", 10, hidden=(32,)), optax.adam(1e-2), 32, 1)
    keys = jax.random.split(jax.random.key(1), T)
    x_test = jnp.asarray(data.to_float(ds.test_images))
    out = {}
    for name, devices, strategy in (("one", jax.devices()[:1], "vmap"),
                                    ("eight", jax.devices(), "vmap"),
                                    ("eight_chunked", jax.devices(), "chunked")):
      # chunked: 16 padded teachers, 2 per device, trained and predicted 1 at a time
      ens = teachers.Ensemble(fns, strategy, chunk_size=1, mesh=teachers.teacher_mesh(devices))
      state = ens.init(jax.random.split(jax.random.key(2), T), x[0])
      sharded = ens.prepare((keys, x, y))
      out[name + "_devices_used"] = len(sharded[1].sharding.device_set)
      state, _ = ens.train(state, keys, x, y, 0, 30)
      v = ens.votes(state["params"], x_test, 10, T)   # reduced on the devices
      preds = ens.predict(ens.trim(state["params"], T), x_test)
      np.testing.assert_array_equal(np.asarray(votes.histogram(preds, 10)), np.asarray(v))
      out[name] = np.asarray(v).tolist()
      # The distillation targets from the same pass: the padding's teachers left out.
      _, counts = ens.predict_with_soft_counts(state["params"], x_test, (1.0, 4.0), T)
      want = teachers.soft_counts(fns, ens.trim(state["params"], T), x_test, (1.0, 4.0), T)
      out[name + "_counts_error"] = int(np.abs(np.asarray(counts) - np.asarray(want)).max())
      if strategy == "chunked":
        assert ens.plan_predict(ens.prepare(state["params"]), x_test).teachers == 1
    print("RESULT" + json.dumps(out))
""")


@pytest.mark.slow
def test_eight_devices_same_votes_as_one():
  out = run_result(_SCRIPT, timeout=600, XLA_FLAGS="--xla_force_host_platform_device_count=8")
  assert out["one_devices_used"] == 1 and out["eight_devices_used"] == 8
  assert out["one"] == out["eight"] == out["eight_chunked"]
  assert all(sum(row) == 10 for row in out["eight"])
  # Integer sums: at most a unit per teacher apart (a float's last bit at a floor's edge).
  assert max(out[n + "_counts_error"] for n in ("one", "eight", "eight_chunked")) <= 10


_SHARE_SCRIPT = textwrap.dedent("""
    import json
    import jax
    from pate_jax import memory
    print("RESULT" + json.dumps({"host": memory.host_memory_bytes(),
                                 "devices": [memory.device_memory_bytes(d) for d in jax.devices()]}))
""")


def test_cpu_devices_share_the_hosts_memory():
  # Four forced host devices: each plans with a quarter of the RAM they all use.
  out = run_result(_SHARE_SCRIPT, XLA_FLAGS="--xla_force_host_platform_device_count=4")
  assert out["devices"] == [out["host"] // 4] * 4
