"""pate_jax.accounting public API: validation and float64 handling.

Extreme inputs are tested per accountant (test_accounting_{lnmax,gnmax,sampled_gaussian}.py)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from pate_jax import accounting as acc
from pate_jax import mechanisms
from pate_jax._checks import _votes as checks_votes

ORDERS = np.array([1.5, 2.0, 3.0, 5.0, 8.0, 12.0, 20.0, 32.0, 64.0, 128.0])
GOOD = np.array([[8, 1, 1], [5, 3, 2]], np.int32)


def _cases():
  uneven = np.array([[8, 1, 1], [5, 3, 1]])
  return [
      # votes
      ("votes", lambda: acc.gnmax_rdp(np.array([[3, -1, 2]]), 1.0, ORDERS)),
      ("votes", lambda: acc.gnmax_rdp(np.array([[3.0, np.nan, 2.0]]), 1.0, ORDERS)),
      ("votes", lambda: acc.lnmax_log_moments(np.array([[3.0, 1.5, 2.0]]), 0.1, [1, 2])),
      ("votes", lambda: acc.lnmax_moments_epsilon(np.array([[10], [10]]), 0.1, 1e-5)),
      ("votes", lambda: acc.gnmax_rdp(np.zeros((0, 10), np.int32), 1.0, ORDERS)),
      ("votes", lambda: acc.gnmax_log_q(np.array([3, 1, 2]), 1.0)),
      ("votes", lambda: acc.confident_gnmax_rdp(uneven, 5.0, 2.0, 1.0, ORDERS)),
      ("votes", lambda: acc.confident_threshold_rdp(uneven, 5.0, 2.0, ORDERS)),
      ("votes", lambda: acc.calibrate_noise(1.0, 1e-5, mechanism=mechanisms.GNMAX,
                                                 votes=np.array([[1, 2.5]]))),
      # noise scales
      ("gamma", lambda: acc.lnmax_moments_epsilon(GOOD, 0.0, 1e-5)),
      ("gamma", lambda: acc.lnmax_log_q(GOOD, -1.0)),
      ("gamma", lambda: acc.strong_composition_epsilon(10, -0.1, 1e-5)),
      ("sigma", lambda: acc.gnmax_rdp(GOOD, 0.0, ORDERS)),
      ("sigma", lambda: acc.gnmax_rdp(GOOD, -2.0, ORDERS)),
      ("sigma", lambda: acc.gnmax_rdp(GOOD, np.nan, ORDERS)),
      ("sigma", lambda: acc.confident_gnmax_rdp(GOOD, 5.0, 1.0, 0.0, ORDERS)),
      ("sigma_threshold", lambda: acc.confident_gnmax_rdp(GOOD, 5.0, 0.0, 1.0, ORDERS)),
      ("sigma_threshold", lambda: acc.confident_log_pr_answered(GOOD, 5.0, -1.0)),
      ("noise_multiplier", lambda: acc.sampled_gaussian_rdp(0.1, 0.0, ORDERS)),
      # delta
      ("delta", lambda: acc.lnmax_moments_epsilon(GOOD, 0.1, 0.0)),
      ("delta", lambda: acc.lnmax_moments_epsilon(GOOD, 0.1, 1.0)),
      ("delta", lambda: acc.rdp_to_epsilon(ORDERS, ORDERS, 1.5)),
      ("delta", lambda: acc.rdp_to_epsilon(ORDERS, ORDERS, -1e-5)),
      ("delta", lambda: acc.strong_composition_epsilon(10, 0.1, 0.0)),
      ("delta", lambda: acc.calibrate_noise(1.0, 1.0, mechanism=mechanisms.GNMAX,
                                                num_queries=10)),
      # orders
      ("orders", lambda: acc.gnmax_rdp(GOOD, 1.0, [2.0, 1.0])),
      ("orders", lambda: acc.gnmax_rdp(GOOD, 1.0, [0.5])),
      ("orders", lambda: acc.sampled_gaussian_rdp(0.1, 1.0, [1.0, 2.0])),
      ("orders", lambda: acc.rdp_to_epsilon([0.1], [1.0], 1e-5)),
      ("orders", lambda: acc.confident_gnmax_rdp(GOOD, 5.0, 1.0, 1.0, [])),
      ("moments", lambda: acc.lnmax_log_moments(GOOD, 0.1, [0.0, 1.0])),
      # sampling rate
      ("q", lambda: acc.sampled_gaussian_rdp(-0.1, 1.0, ORDERS)),
      ("q", lambda: acc.sampled_gaussian_rdp(1.1, 1.0, ORDERS)),
      # others
      ("conversion", lambda: acc.rdp_to_epsilon(ORDERS, ORDERS, 1e-5, conversion="tight")),
      ("max_moment", lambda: acc.lnmax_moments_epsilon(GOOD, 0.1, 1e-5, max_moment=0)),
      ("log_q", lambda: acc.gaussian_rdp_from_log_q(np.array([0.5]), 1.0, ORDERS)),
      ("rdp", lambda: acc.rdp_to_epsilon(np.full(ORDERS.size, np.nan), ORDERS, 1e-5)),
      ("threshold", lambda: acc.confident_gnmax_rdp(GOOD, np.inf, 1.0, 1.0, ORDERS)),
  ]


@pytest.mark.parametrize("name,call", _cases())
def test_bad_input_raises_value_error_naming_the_argument(name, call):
  with pytest.raises(ValueError, match=name):
    call()


def test_results_are_float64_without_enabling_x64_globally():
  votes = np.tile(np.array([[200, 30, 20, 0, 0, 0, 0, 0, 0, 0]], np.int32), (32, 1))
  with jax.enable_x64(False):
    out = acc.gnmax_rdp(votes, 2.0, ORDERS)
    eps, _ = acc.lnmax_moments_epsilon(votes, 0.05, 1e-5)
    assert out.dtype == jnp.float64 and eps.dtype == jnp.float64
    assert not jax.config.jax_enable_x64
    # Under a grad traced in 32-bit mode the accountants still compute in float64 (the
    # gradient comes back in the primal's float32).
    g = jax.grad(lambda g: acc.lnmax_moments_epsilon(votes, g, 1e-5)[0])(0.05)
    h = 1e-6
    fd = (float(acc.lnmax_moments_epsilon(votes, 0.05 + h, 1e-5)[0])
          - float(acc.lnmax_moments_epsilon(votes, 0.05 - h, 1e-5)[0])) / (2 * h)
    assert float(g) == pytest.approx(fd, rel=1e-5)
  assert not jax.config.jax_enable_x64


@pytest.mark.parametrize("bad,message", [
    (np.array([[3, -1, 2]], np.int32), r"non-negative vote counts; found -1\.0 at \(0, 1\)"),
    (np.array([[3.0, 2.0], [np.inf, 1.0]]), r"finite vote counts; found inf at \(1, 0\)"),
    (np.array([[3.0, 1.5, 2.0]], np.float32), r"integer vote counts; found 1\.5 at \(0, 1\)"),
    (np.array([[True, False]]), "integer vote counts; got dtype bool"),
])
@pytest.mark.parametrize("on_device", [False, True])
def test_device_resident_votes_are_validated_like_host_votes(bad, message, on_device):
  with jax.enable_x64(True):
    votes = jnp.asarray(bad) if on_device else bad
    with pytest.raises(ValueError, match=message):
      acc.gnmax_log_q(votes, 1.0)


@pytest.mark.parametrize("where", ["host", "large_host", "device"])
def test_concrete_votes_are_checked_inside_a_callers_jit(where):
  """Concrete votes, another argument traced by the caller's jit: the check's flag is traced
  there, so the host pass checks the votes; the result is the eager one. Large host votes
  (above _DEVICE_PUT_BYTES) are put on the device inside that trace: the host pass reads
  the caller's numpy array."""
  votes = np.array([[200, 30, 20, 0], [120, 0, 0, 130], [60, 60, 60, 70]])
  if where == "large_host":
    votes = np.tile(votes, (12_000, 1))
    assert votes.nbytes > checks_votes._DEVICE_PUT_BYTES  # pylint: disable=protected-access
  bad = votes.copy()
  bad[1, 2] = -1
  with jax.enable_x64(True):
    data, bad = (jnp.asarray(votes), jnp.asarray(bad)) if where == "device" else (votes, bad)
    got = jax.jit(lambda s: acc.gnmax_rdp(data, s, ORDERS))(20.0)
    np.testing.assert_array_equal(np.asarray(got), np.asarray(acc.gnmax_rdp(data, 20.0, ORDERS)))
    with pytest.raises(ValueError, match=r"non-negative vote counts; found -1\.0 at \(1, 2\)"):
      jax.jit(lambda s: acc.gnmax_rdp(bad, s, ORDERS))(20.0)


@pytest.mark.slow
def test_a_release_of_traced_answers_inside_a_callers_jit_is_the_eager_one():
  votes = np.array([[200, 30, 20, 0], [120, 0, 0, 130], [60, 60, 60, 70]])
  answered = np.array([True, False, True])
  kw = dict(num_teachers=250, threshold=150.0, sigma_threshold=40.0, sigma=20.0, order=8.0,
            delta=1e-5)
  with jax.enable_x64(True):
    released = jax.jit(lambda a: acc.smooth_sensitivity_release(votes, answered=a, **kw))(
        jnp.asarray(answered))
    eager = acc.smooth_sensitivity_release(votes, answered=answered, **kw)
    for name, x in eager._asdict().items():
      np.testing.assert_allclose(getattr(released, name), x, rtol=1e-13, err_msg=name)


@pytest.mark.slow
@pytest.mark.parametrize("dtype", [np.uint8, np.int32, np.int64, np.float32, np.float64])
@pytest.mark.parametrize("on_device", [False, True])
def test_votes_of_any_real_dtype_give_the_float64_result(dtype, on_device):
  votes = np.array([[200, 30, 20, 0], [120, 0, 0, 130], [60, 60, 60, 70]])
  with jax.enable_x64(True):
    ref = np.asarray(acc.confident_gnmax_rdp(votes.astype(np.float64), 150.0, 40.0, 20.0, ORDERS))
    data = jnp.asarray(votes.astype(dtype)) if on_device else votes.astype(dtype)
    got = acc.confident_gnmax_rdp(data, 150.0, 40.0, 20.0, ORDERS)
    assert got.dtype == jnp.float64
    np.testing.assert_array_equal(np.asarray(got), ref)
    uneven = votes.astype(dtype)
    uneven[0, 0] += 1
    uneven = jnp.asarray(uneven) if on_device else uneven
    with pytest.raises(ValueError, match="row 0 sums to 251 but row 1 sums to 250"):
      acc.confident_gnmax_rdp(uneven, 150.0, 40.0, 20.0, ORDERS)


def test_repeated_public_calls_do_not_retrace():
  from pate_jax._checks import _votes  # noqa: PLC0415
  from pate_jax.accounting import _gnmax, _lnmax  # noqa: PLC0415
  votes = np.tile(np.array([[200, 30, 20, 0]], np.int32), (8, 1))
  jitted = (_lnmax.lnmax_moments_epsilon_core, _gnmax.confident_gnmax_rdp_core,
            _votes._votes_flags)
  def calls():
    acc.lnmax_moments_epsilon(votes, 0.05, 1e-5)
    acc.confident_gnmax_rdp(votes, 150.0, 40.0, 20.0, ORDERS)
  calls()
  sizes = [f._cache_size() for f in jitted]
  calls()
  calls()
  assert [f._cache_size() for f in jitted] == sizes


@pytest.mark.parametrize("num_queries", [4, 200_000])  # below and above the device_put size
def test_host_votes_are_copied_not_aliased(num_queries):
  from pate_jax import _checks  # noqa: PLC0415
  # A 64-byte-aligned host buffer, which XLA:CPU would otherwise use in place.
  buf = np.empty(num_queries * 10 * 4 + 64, np.uint8)
  start = -buf.ctypes.data % 64
  votes = buf[start:start + num_queries * 40].view(np.int32).reshape(num_queries, 10)
  votes[...] = 25
  with jax.enable_x64(True):
    arr = _checks.votes(votes)
    votes[0, 0] = 1000
    assert int(np.asarray(arr)[0, 0]) == 25


def _aligned_votes(num_queries, fill=25):
  """``[Q, 10]`` int32 votes in a 64-byte-aligned buffer (XLA:CPU would alias it)."""
  buf = np.empty(num_queries * 40 + 64, np.uint8)
  start = -buf.ctypes.data % 64
  votes = buf[start:start + num_queries * 40].view(np.int32).reshape(num_queries, 10)
  votes[...] = fill
  return votes


def _spy_host_votes(monkeypatch, votes):
  """Records, during the test, the numpy copies of ``votes`` and every ``jax.device_put``
  argument (the calls themselves go through)."""
  seen = {"copies": 0, "device_put": []}
  real_array, real_put = np.array, jax.device_put
  def array(obj, *args, **kwargs):
    seen["copies"] += obj is votes
    return real_array(obj, *args, **kwargs)
  def device_put(x, *args, **kwargs):
    seen["device_put"].append(x)
    return real_put(x, *args, **kwargs)
  monkeypatch.setattr(np, "array", array)
  monkeypatch.setattr(jax, "device_put", device_put)
  return seen


@pytest.mark.parametrize("num_queries", [4, 200_000])  # below and above the device_put size
def test_host_votes_traffic_is_what_votes_does(monkeypatch, num_queries):
  """host_votes_traffic counts the copies and puts votes() makes, on this platform; on a
  CPU (no memory of its own) every host array is copied first."""
  from pate_jax._checks import _votes  # noqa: PLC0415
  votes = _aligned_votes(num_queries)
  seen = _spy_host_votes(monkeypatch, votes)
  with jax.enable_x64(True):
    arr = _votes.votes(votes)
  copies, transfers = _votes.host_votes_traffic(votes.nbytes)
  assert seen["copies"] == copies
  assert len(seen["device_put"]) == (num_queries == 200_000)
  assert all((x is votes) == (copies == 0) for x in seen["device_put"])
  if jax.devices()[0].platform == "cpu":
    assert copies == 1 and transfers == (1 if num_queries == 200_000 else 2)
  assert not np.shares_memory(np.asarray(arr), votes)


def test_large_host_votes_go_to_an_accelerator_without_a_host_copy(monkeypatch):
  """Where the default device has its own memory, large host votes are put there as they
  are (device_put copies them; votes() waits for the check that reads the copy)."""
  from pate_jax._checks import _votes  # noqa: PLC0415
  votes = _aligned_votes(200_000)
  votes[::7, 3], votes[::7, 4] = 40, 10  # rows differ (a mix-up would show), same totals
  with jax.enable_x64(True):
    on_cpu = acc.confident_gnmax_rdp(votes, 200.0, 150.0, 40.0, ORDERS)
  monkeypatch.setattr(_votes, "default_platform", lambda: "gpu")
  seen = _spy_host_votes(monkeypatch, votes)
  with jax.enable_x64(True):
    arr = _votes.votes(votes)
    assert isinstance(arr, jax.Array) and seen["copies"] == 0
    assert len(seen["device_put"]) == 1 and seen["device_put"][0] is votes
    assert _votes.host_votes_traffic(votes.nbytes) == (0, 1)
    np.testing.assert_array_equal(np.asarray(arr), votes)
    got = acc.confident_gnmax_rdp(votes, 200.0, 150.0, 40.0, ORDERS)
    np.testing.assert_array_equal(np.asarray(got), np.asarray(on_cpu))
    votes[5, 2] = -3  # the values are still checked, on the device copy
    with pytest.raises(ValueError, match=r"non-negative vote counts; found -3\.0 at \(5, 2\)"):
      acc.confident_gnmax_rdp(votes, 200.0, 150.0, 40.0, ORDERS)


def test_small_host_votes_are_copied_on_an_accelerator_too(monkeypatch):
  """Small votes go on as numpy arrays, read by each later jitted call: they stay copied."""
  from pate_jax._checks import _votes  # noqa: PLC0415
  votes = _aligned_votes(4)
  monkeypatch.setattr(_votes, "default_platform", lambda: "tpu")
  seen = _spy_host_votes(monkeypatch, votes)
  with jax.enable_x64(True):
    arr = _votes.votes(votes)
  assert isinstance(arr, np.ndarray) and seen["copies"] == 1 and not seen["device_put"]
  assert not np.shares_memory(arr, votes) and _votes.host_votes_traffic(votes.nbytes) == (1, 2)


def test_mutating_host_votes_after_a_public_call_leaves_its_result():
  votes = _aligned_votes(200_000)
  with jax.enable_x64(True):
    ref = np.asarray(acc.confident_gnmax_rdp(votes.copy(), 200.0, 150.0, 40.0, ORDERS))
    got = acc.confident_gnmax_rdp(votes, 200.0, 150.0, 40.0, ORDERS)  # may still be running
    votes[:, 0], votes[:, 1] = 250, 0
    np.testing.assert_array_equal(np.asarray(got), ref)


def test_default_platform_is_where_device_put_puts_host_arrays():
  from pate_jax._checks import _votes  # noqa: PLC0415
  cpu = jax.devices("cpu")[0]
  for where in (None, cpu, "cpu"):
    with jax.default_device(where):
      put = jax.device_put(np.zeros(3, np.int32))
      assert _votes.default_platform() == next(iter(put.devices())).platform


def test_light_jit_compiles_lightly_where_the_call_runs_on_a_cpu(monkeypatch):
  """The cheaper XLA:CPU compile follows the default device (an accounting stage runs on
  the host under jax.default_device on a GPU machine), not the default backend."""
  from pate_jax import _compile  # noqa: PLC0415
  f = _compile.light_jit(lambda x: x + 1)
  calls = []
  monkeypatch.setattr(f, "_light", lambda *a: calls.append("light"))
  monkeypatch.setattr(f, "_plain", lambda *a: calls.append("plain"))
  with jax.default_device(jax.devices("cpu")[0]):  # the host, also on a GPU machine
    f(1.0)
  monkeypatch.setattr(_compile, "default_platform", lambda: "gpu")
  f(1.0)
  assert calls == ["light", "plain"]


# ----------------------------------------------------------------------------- under a 32-bit jit

VOTES3 = np.array([[200, 30, 20, 0], [120, 0, 0, 130], [60, 60, 60, 70]], np.int32)  # T = 250
MOMENTS = np.array([1.0, 2.0, 4.0, 8.0])
KEY = jax.random.key(0)


def _release(v):
  return acc.smooth_sensitivity_release(v, num_teachers=250, threshold=150.0,
                                        sigma_threshold=40.0, sigma=20.0, delta=1e-5)


# name -> (fn, array arguments): every array input is an argument of the jit (concrete
# votes closed over are validated with a device round trip, which a jit cannot do).
_UNDER_JIT = {
    "gnmax_log_q": (lambda v: acc.gnmax_log_q(v, 40.0), (VOTES3,)),
    "gnmax_rdp": (lambda v, s: acc.gnmax_rdp(v, s, ORDERS), (VOTES3, 40.0)),
    "gaussian_rdp_from_log_q": (lambda lq: acc.gaussian_rdp_from_log_q(lq, 40.0, ORDERS),
                                (np.array([-1e3, -30.0, -2.0, -0.1]),)),
    "confident_log_pr_answered": (lambda v: acc.confident_log_pr_answered(v, 150.0, 40.0),
                                  (VOTES3,)),
    "confident_threshold_rdp": (lambda v: acc.confident_threshold_rdp(v, 150.0, 40.0, ORDERS),
                                (VOTES3,)),
    "confident_gnmax_rdp": (lambda v, s: acc.confident_gnmax_rdp(v, 150.0, 40.0, s, ORDERS),
                            (VOTES3, 20.0)),
    "lnmax_log_q": (lambda v: acc.lnmax_log_q(v, 0.05), (VOTES3,)),
    "lnmax_log_moments": (lambda v, g: acc.lnmax_log_moments(v, g, MOMENTS), (VOTES3, 0.05)),
    "lnmax_moments_epsilon": (lambda v: acc.lnmax_moments_epsilon(v, 0.05, 1e-5), (VOTES3,)),
    "moments_to_epsilon": (lambda a: acc.moments_to_epsilon(a, MOMENTS, 1e-5),
                           (np.array([0.3, 1.0, 3.0, 9.0]),)),
    "strong_composition_epsilon": (lambda g: acc.strong_composition_epsilon(100, g, 1e-5),
                                   (0.05,)),
    "rdp_to_epsilon": (lambda r: acc.rdp_to_epsilon(r, ORDERS, 1e-5), (0.01 * ORDERS,)),
    "sampled_gaussian_rdp": (lambda q, s: acc.sampled_gaussian_rdp(q, s, ORDERS), (0.01, 1.1)),
    # The accountant pytree: the default orders, composition and ε.
    "rdp_accountant,compose,epsilon": (
        lambda v: acc.rdp_accountant().compose(acc.gnmax_rdp(v, 40.0, acc.DEFAULT_ORDERS))
        .epsilon(1e-5), (VOTES3,)),
    "moments_accountant,make_accountant": (
        lambda c: acc.moments_accountant(4).compose(c, np.array([True, False])).epsilon(1e-5)
        + acc.make_accountant("rdp", ORDERS, cost=0.01 * ORDERS).epsilon(1e-5),
        (np.full((2, 4), 0.1),)),
    "calibrate_noise": (lambda e: acc.calibrate_noise(e, 1e-5, mechanism=mechanisms.GNMAX,
                                                                num_queries=100), (2.0,)),
    "gnmax_local_sensitivity": (lambda v: acc.gnmax_local_sensitivity(v, 250, 40.0, 8.0),
                                (VOTES3,)),
    "threshold_local_sensitivity": (
        lambda v: acc.threshold_local_sensitivity(v, 250, 150.0, 40.0, 8.0), (VOTES3,)),
    "smooth_sensitivity": (lambda ls, b: acc.smooth_sensitivity(ls, b),
                           (np.array([[0.1, 0.3, 0.2, 0.0], [1.0, 0.5, 2.0, 4.0]]), 0.05)),
    "gnss_rdp": (lambda b: acc.gnss_rdp(b, 10.0, 8.0), (0.05,)),
    "smooth_sensitivity_release": (_release, (VOTES3,)),  # default orders: λ chosen among them
    # Checks of settings (σ, classes, orders), concrete and closed over: they compute eagerly
    # inside the caller's trace (conditions C5 and C6 of 2018's App. B.4.2).
    "smooth_sensitivity_conditions,smooth_sensitivity_condition_margins,valid_release_orders,"
    "check_release_order": (
        lambda s: (s * acc.smooth_sensitivity_condition_margins(40.0, 10, ORDERS)[1],
                   acc.smooth_sensitivity_conditions(40.0, 10, ORDERS),
                   s * acc.valid_release_orders(40.0, 10, ORDERS),
                   acc.check_release_order(40.0, 10, 8.0)), (1.0,)),
    "on_release_grid": (lambda x: acc.on_release_grid(x), (1.2345,)),
}
# Every public function on arrays runs under a 32-bit jit; accountant_kind looks a kind up
# by its name (a string, not an array); release_epsilon draws noise that protects data, and
# refuses a 32-bit trace (its noise would be float32: test below).
_NOT_UNDER_JIT = {"accountant_kind", "release_epsilon"}
_SLOW_UNDER_JIT = {"gnmax_local_sensitivity", "sampled_gaussian_rdp",
                   "smooth_sensitivity_release"}  # compiles of 3 s and more


def test_every_public_function_is_run_under_a_32_bit_jit():
  public = {n for n in acc.__all__ if callable(getattr(acc, n)) and n[0].islower()}
  covered = {n for key in _UNDER_JIT for n in key.split(",")}
  assert covered | _NOT_UNDER_JIT == public


def test_the_release_refuses_a_32_bit_jit_and_draws_float64_under_x64():
  """Under a caller's 32-bit jit the release's N(0, 1) would be float32 (2^23 values, none
  beyond 5.4 std): refused. The same jit under 64-bit mode gives the eager draw."""
  release = acc.Release(*[np.float64(x) for x in (8.0, 0.05, 0.3, 6.0, 1.8, 1.0, 0.2, 1.5,
                                                  1.7, 5.0, 10.0, 0.0, 0.0)])
  with jax.enable_x64(False):
    with pytest.raises(RuntimeError, match="float64"):
      jax.jit(acc.release_epsilon)(KEY, release)
  eager = float(acc.release_epsilon(KEY, release))
  with jax.enable_x64(True):
    assert float(jax.jit(acc.release_epsilon)(KEY, release)) == eager
  assert eager != 1.7 and eager / acc.RELEASE_GRID == round(eager / acc.RELEASE_GRID)


@pytest.mark.parametrize("name", [
    pytest.param(n, marks=pytest.mark.slow) if n in _SLOW_UNDER_JIT else n for n in _UNDER_JIT])
def test_public_functions_work_under_jit_with_x64_off(name):
  """A user's jit in JAX's default 32-bit mode computes in float32 (a float64 value cannot
  live in that program), and matches the eager float64 result to float32 accuracy."""
  fn, args = _UNDER_JIT[name]
  with jax.enable_x64(False):
    assert not jax.config.jax_enable_x64
    got = jax.jit(fn)(*args)
    # Then eagerly (float64) with the same array objects: the jit did not leave them,
    # or DEFAULT_ORDERS, as float32 in JAX's canonicalisation cache.
    want = fn(*args)  # the eager result (64-bit locally)
    assert not jax.config.jax_enable_x64
  for g, w in zip(jax.tree.leaves(got), jax.tree.leaves(want), strict=True):
    if jnp.issubdtype(g.dtype, jnp.floating):
      assert g.dtype == jnp.float32 and np.asarray(w).dtype == np.float64
      w = np.asarray(w)
      np.testing.assert_allclose(np.asarray(g, np.float64), w, rtol=5e-4,
                                 atol=1e-6 * np.max(np.abs(w), initial=1e-30))
    else:
      np.testing.assert_array_equal(g, w)


@pytest.mark.slow
def test_gradients_under_jit_with_x64_off_match_the_eager_float64_ones():
  def eps(sigma, gamma, votes):
    return (acc.rdp_accountant(ORDERS).compose(acc.gnmax_rdp(votes, sigma, ORDERS))
            .epsilon(1e-5)[0] + acc.lnmax_moments_epsilon(votes, gamma, 1e-5)[0])

  grad = jax.grad(eps, argnums=(0, 1))
  with jax.enable_x64(False):
    got = jax.jit(grad)(2.0, 0.05, GOOD)
    want = grad(2.0, 0.05, GOOD)
  assert all(g.dtype == jnp.float32 for g in got)
  np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-4)
