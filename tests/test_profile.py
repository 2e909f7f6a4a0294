"""The profiler summary (pate_jax.experiment._profile) and the teachers benchmark's profile."""

from __future__ import annotations

import gzip
import json

import jax
import jax.numpy as jnp
import pytest

from pate_jax import experiment
from pate_jax.experiment import load_script
from pate_jax.stages.bench import teachers as bench_teachers


def _write_trace(root, events):
  d = root / "plugins" / "profile" / "run1"
  d.mkdir(parents=True)
  with gzip.open(d / "perfetto_trace.json.gz", "wt") as f:
    json.dump({"traceEvents": events}, f)


def _meta(pid, tid, kind, name):
  return {"ph": "M", "pid": pid, "tid": tid, "name": kind, "args": {"name": name}}


def test_device_timelines_are_summed_per_thread_and_the_host_is_left_out(tmp_path):
  events = [
      _meta(1, None, "process_name", "/device:GPU:0"),
      _meta(1, 7, "thread_name", "Stream #13(Compute)"),
      _meta(1, 8, "thread_name", "XLA Ops"),
      _meta(2, None, "process_name", "/host:CPU"),
      _meta(2, 3, "thread_name", "python"),
      {"ph": "X", "pid": 1, "tid": 7, "name": "conv_kernel", "ts": 0, "dur": 600.0},
      {"ph": "X", "pid": 1, "tid": 7, "name": "conv_kernel", "ts": 700, "dur": 300.0},
      {"ph": "X", "pid": 1, "tid": 7, "name": "fusion.1", "ts": 1000, "dur": 100.0},
      {"ph": "X", "pid": 1, "tid": 8, "name": "convolution.3", "ts": 0, "dur": 950.0},
      {"ph": "X", "pid": 2, "tid": 3, "name": "host_only", "ts": 0, "dur": 5000.0},
      {"ph": "i", "pid": 1, "tid": 7, "name": "instant", "ts": 5},
  ]
  _write_trace(tmp_path, events)
  s = experiment.trace_summary(tmp_path, top=1)
  assert s["source"] == "device"
  assert set(s["timelines"]) == {"/device:GPU:0 Stream #13(Compute)", "/device:GPU:0 XLA Ops"}
  stream = s["timelines"]["/device:GPU:0 Stream #13(Compute)"]
  assert stream["busy_ms"] == pytest.approx(1.0) and stream["events"] == 3
  assert stream["top"] == [{"name": "conv_kernel", "ms": pytest.approx(0.9), "count": 2,
                            "share": pytest.approx(0.9)}]


def test_without_a_device_process_the_host_threads_count_but_not_pythons(tmp_path):
  events = [
      _meta(2, None, "process_name", "/host:CPU"),
      _meta(2, 3, "thread_name", "python"),
      _meta(2, 4, "thread_name", "tf_XLAEigen/-123"),
      _meta(2, 5, "thread_name", "tf_XLAEigen/-456"),
      _meta(2, 6, "thread_name", "main"),
      {"ph": "X", "pid": 2, "tid": 3, "name": "anything", "ts": 0, "dur": 50.0},
      {"ph": "X", "pid": 2, "tid": 6, "name": "$profiler.py:307 trace", "ts": 0, "dur": 70.0},
      {"ph": "X", "pid": 2, "tid": 4, "name": "dot.1", "ts": 0, "dur": 30.0},
      {"ph": "X", "pid": 2, "tid": 5, "name": "dot.1", "ts": 0, "dur": 10.0},
  ]
  _write_trace(tmp_path, events)
  s = experiment.trace_summary(tmp_path)
  assert s["source"] == "host"
  assert list(s["timelines"]) == ["/host:CPU tf_XLAEigen"]  # both workers, one timeline
  assert s["timelines"]["/host:CPU tf_XLAEigen"]["top"][0]["ms"] == pytest.approx(0.04)


def test_no_trace_is_an_error_naming_the_directory(tmp_path):
  with pytest.raises(FileNotFoundError, match="trace_dir: no perfetto_trace.json.gz"):
    experiment.trace_summary(tmp_path)


def test_profile_call_summarises_a_real_trace_and_removes_it(tmp_path):
  f = jax.jit(lambda x: jnp.tanh(x @ x))
  x = jnp.ones((256, 256))
  f(x).block_until_ready()
  s = experiment.profile_call(lambda: f(x), tmp_path / "p")
  on_cpu = jax.default_backend() == "cpu"  # an accelerator's trace has device timelines
  assert s["wall_ms"] > 0 and s["source"] == ("host" if on_cpu else "device") and s["timelines"]
  for line in s["timelines"].values():
    assert line["busy_ms"] >= 0 and 0 <= sum(e["share"] for e in line["top"]) <= 1 + 1e-9
  assert not (tmp_path / "p").exists()
  experiment.profile_call(lambda: f(x), tmp_path / "kept", keep_trace=True)
  assert list((tmp_path / "kept").glob("**/perfetto_trace.json.gz"))


@pytest.mark.slow
def test_the_benchmark_profiles_the_strategies_it_is_asked_to(tmp_path):
  from conftest import REPO
  script = load_script(REPO / "configs" / "bench_teachers.py")
  c = script.get_config()
  assert script.get_config("cnn").profile_strategies == ("vmap",)
  c.num_teachers, c.examples_per_teacher, c.steps_per_call, c.repeats = 2, 8, 1, 1
  c.model.kwargs.hidden, c.peak_tflops = (8,), 1.0
  c.strategies, c.profile_strategies = ("vmap", "loop"), ("vmap",)
  r = bench_teachers.run(c, str(tmp_path))
  assert r["strategies"]["vmap"]["profile"]["timelines"]
  assert "profile" not in r["strategies"]["loop"]
  assert not list(tmp_path.glob("profile_*"))  # the trace is not kept
