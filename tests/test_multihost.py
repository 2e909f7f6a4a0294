"""The teacher axis sharded across 2 processes gives the same votes as 1 process.

Two processes on localhost (CPU, gloo collectives, 4 host devices each) join
one ``jax.distributed`` run through :func:`pate_jax.distributed.initialize`;
a third runs alone with 8 host devices. All three train the same 10 teachers
on the same 8-device mesh shape, so the vote histograms must be identical.
XLA fixes the device count at start-up, hence the subprocesses.
"""

from __future__ import annotations

import json
import os
import pathlib
import socket
import subprocess
import sys
import textwrap
import time

import jax
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
import numpy as np
import pytest

from pate_jax import distributed, rng

REPO = pathlib.Path(__file__).resolve().parent.parent
TIMEOUT_S = 180

_CHILD = textwrap.dedent("""
    import json, sys
    from pate_jax import distributed
    distributed.initialize(initialization_timeout=60)  # before any JAX computation

    import jax, numpy as np, optax
    from jax.sharding import NamedSharding, PartitionSpec as P
    from pate_jax import data, models, teachers, votes

    T = 10  # not a multiple of 8: exercises padding of the teacher axis
    ds = data.load_image_dataset("digits")
    x, y, _ = data.partition(jax.random.key(0), ds.train_images, ds.train_labels, T)
    x = data.to_float(x)  # numpy: every process holds all shards and places only its own
    x_test = data.to_float(ds.test_images)
    init_keys = jax.random.split(jax.random.key(2), T)
    train_keys = jax.random.split(jax.random.key(1), T)
    fns = teachers.TeacherFns(models.get_model("mlp", 10, hidden=(32,)), optax.adam(1e-2), 32, 1)
    ens = teachers.Ensemble(fns, "vmap", mesh=teachers.teacher_mesh(jax.devices()))

    sample = x[0]
    train_keys, x, y = ens.prepare((train_keys, x, y))  # each process places its teachers
    images = x
    state = ens.init(init_keys, sample)
    state, _ = ens.train(state, train_keys, x, y, 0, 30)
    hist = ens.votes(state["params"], x_test, 10, T)   # reduced over every process's devices

    hist = distributed.to_host(hist)  # collectives: every process calls them
    agreed = distributed.process_min(100 + jax.process_index())
    out = {
        "process_index": jax.process_index(),
        "process_count": jax.process_count(),
        "devices_used": len(images.sharding.device_set),
        "processes_used": sorted({d.process_index for d in images.sharding.device_set}),
        "addressable_shards": len(images.addressable_shards),
        "process_min": agreed,
    }
    if distributed.is_main_process():
      out["votes"] = hist.tolist()
    with open(sys.argv[1], "w") as f:  # not stdout, where gloo's threads write too
      json.dump(out, f)
""")


def _free_port() -> int:
  with socket.socket() as s:
    s.bind(("localhost", 0))
    return s.getsockname()[1]


def _spawn(workdir: pathlib.Path, name: str, devices: int, **pate_env: str
           ) -> subprocess.Popen:
  """Starts the child; it writes ``{name}.json``, its output goes to ``{name}.log``."""
  env = {k: v for k, v in os.environ.items() if not k.startswith("PATE_JAX_")
         or k in ("PATE_JAX_DATA_DIR", "PATE_JAX_OFFLINE")}
  # Optimisation level 0: XLA's CPU backend compiles the tiny vmapped programs ~8x
  # faster; all three processes use it, so their votes stay comparable.
  env.update(XLA_FLAGS=f"--xla_force_host_platform_device_count={devices} "
                       "--xla_backend_optimization_level=0",
             JAX_PLATFORMS="cpu", PATE_JAX_OFFLINE="1", **pate_env)
  with open(workdir / f"{name}.log", "w") as log:  # a file: a full pipe would block
    return subprocess.Popen([sys.executable, "-c", _CHILD, str(workdir / f"{name}.json")],
                            env=env, cwd=REPO, stdout=log, stderr=subprocess.STDOUT)


def _wait(workdir: pathlib.Path, procs: dict[str, subprocess.Popen]) -> dict[str, dict]:
  """Every child's result; fails at the first child that fails (a surviving peer would
  wait in a collective until its heartbeat timeout) or after ``TIMEOUT_S``."""
  def fail(name: str, why: str):
    log = (workdir / f"{name}.log").read_text(errors="replace")
    pytest.fail(f"{name} {why}\n--- its output (last 4000 characters)\n{log[-4000:]}")
  deadline = time.monotonic() + TIMEOUT_S
  while True:
    for name, proc in procs.items():
      if proc.poll() not in (None, 0):
        fail(name, f"exited with {proc.returncode}")
    if all(proc.poll() == 0 for proc in procs.values()):
      break
    if time.monotonic() > deadline:
      fail(next(n for n, p in procs.items() if p.poll() is None),
           f"still running after {TIMEOUT_S} s")
    time.sleep(0.2)
  return {name: json.loads((workdir / f"{name}.json").read_text()) for name in procs}


@pytest.mark.slow
def test_two_processes_same_votes_as_one(tmp_path):
  coordinator = f"localhost:{_free_port()}"
  procs = {}
  try:
    for i in range(2):
      procs[f"process {i}"] = _spawn(tmp_path, f"process {i}", 4,
                                     PATE_JAX_COORDINATOR=coordinator,
                                     PATE_JAX_NUM_PROCESSES="2", PATE_JAX_PROCESS_ID=str(i))
    # The reference runs alongside: the 3 processes share the CPU cores.
    procs["single process"] = _spawn(tmp_path, "single process", 8)
    out = _wait(tmp_path, procs)
  finally:
    for proc in procs.values():
      if proc.poll() is None:
        proc.kill()
        proc.wait()

  two = [out["process 0"], out["process 1"]]
  assert [o["process_index"] for o in two] == [0, 1]
  for o in two:  # the teachers are spread over both processes' devices
    assert o["process_count"] == 2
    assert o["devices_used"] == 8 and o["processes_used"] == [0, 1]
    assert o["addressable_shards"] == 4
    assert o["process_min"] == 100
  one = out["single process"]
  assert one["process_count"] == 1 and one["devices_used"] == 8
  assert one["addressable_shards"] == 8
  assert "votes" not in out["process 1"]  # only the main process reports
  assert out["process 0"]["votes"] == one["votes"]
  assert len(one["votes"]) == 500 and all(sum(row) == 10 for row in one["votes"])


# ------------------------------------------------------------- the helpers, one process


def test_initialize_single_process_is_a_no_op(monkeypatch):
  for name in (distributed.ENV_AUTO, distributed.ENV_COORDINATOR,
               distributed.ENV_NUM_PROCESSES, distributed.ENV_PROCESS_ID):
    monkeypatch.delenv(name, raising=False)
  assert distributed.initialize() is False
  monkeypatch.setenv(distributed.ENV_NUM_PROCESSES, "1")
  assert distributed.initialize() is False
  assert distributed.is_main_process()
  assert distributed.process_min(7) == 7


@pytest.mark.parametrize("env, match", [
    ({"PATE_JAX_NUM_PROCESSES": "2", "PATE_JAX_PROCESS_ID": "2",
      "PATE_JAX_COORDINATOR": "localhost:1234"}, "PATE_JAX_PROCESS_ID=2 must be smaller"),
    ({"PATE_JAX_NUM_PROCESSES": "2", "PATE_JAX_COORDINATOR": "localhost:1234"},
     "PATE_JAX_PROCESS_ID is required"),
    ({"PATE_JAX_NUM_PROCESSES": "2", "PATE_JAX_PROCESS_ID": "0"},
     "PATE_JAX_COORDINATOR .* is required"),
    ({"PATE_JAX_NUM_PROCESSES": "2", "PATE_JAX_PROCESS_ID": "0",
      "PATE_JAX_COORDINATOR": "localhost"}, "PATE_JAX_COORDINATOR must be 'host:port'"),
    ({"PATE_JAX_NUM_PROCESSES": "two"}, "PATE_JAX_NUM_PROCESSES must be an integer"),
    ({"PATE_JAX_NUM_PROCESSES": "0"}, "PATE_JAX_NUM_PROCESSES must be at least 1"),
    ({"PATE_JAX_PROCESS_ID": "0"}, "PATE_JAX_NUM_PROCESSES is required"),
    ({"PATE_JAX_DISTRIBUTED": "yes"}, "PATE_JAX_DISTRIBUTED must be 'auto'"),
])
def test_initialize_rejects_inconsistent_env(monkeypatch, env, match):
  for name in (distributed.ENV_AUTO, distributed.ENV_COORDINATOR,
               distributed.ENV_NUM_PROCESSES, distributed.ENV_PROCESS_ID):
    monkeypatch.delenv(name, raising=False)
  for name, value in env.items():
    monkeypatch.setenv(name, value)
  with pytest.raises(ValueError, match=match):
    distributed.initialize()


def test_initialize_names_the_argument():
  with pytest.raises(ValueError, match="process_id=3 must be smaller than num_processes=2"):
    distributed.initialize("localhost:1234", 2, 3)


def test_put_teacher_axis_and_to_host_single_process():
  mesh = Mesh(np.asarray(jax.devices()), ("teachers",))
  sharding = NamedSharding(mesh, P("teachers"))
  n = len(jax.devices())
  tree = {"x": np.arange(n * 6, dtype=np.float32).reshape(n * 2, 3),
          "keys": jax.random.split(jax.random.key(0), n * 2),
          "secret_keys": jax.random.split(jax.random.key(0, impl=rng.SECRET_IMPL), n * 2)}
  out = distributed.put_teacher_axis(tree, sharding)
  assert out["x"].sharding == sharding and out["keys"].sharding == sharding
  np.testing.assert_array_equal(distributed.to_host(out["x"]), tree["x"])
  for name in ("keys", "secret_keys"):  # threefry's 2 words, the secret impl's 4
    assert out[name].dtype == tree[name].dtype and out[name].sharding == sharding
    np.testing.assert_array_equal(jax.random.key_data(out[name]),
                                  jax.random.key_data(tree[name]))
  if n > 1:
    with pytest.raises(ValueError, match=r"leaf \['x'\]"):
      distributed.put_teacher_axis({"x": np.zeros((n + 1, 2))}, sharding)
