"""Conditions C5 and C6 of the smooth-sensitivity analysis (Papernot et al. 2018, App. B.4.2).

The verdicts of :func:`pate_jax.accounting.smooth_sensitivity_conditions` against
tf-privacy's, the audit's numbers, and that no release path accepts an order where either
condition fails.
"""

from __future__ import annotations

import jax
import ml_collections
import numpy as np
import pytest

from pate_jax import accounting as acc
from pate_jax import budget as budget_lib
from pate_jax import mechanisms
from pate_jax.stages import aggregate

# tf-privacy's verdicts (research/pate_2018, smooth_sensitivity.check_conditions(sigma, m,
# order), which minimises the symbolic derivative with scipy's bounded scalar minimiser),
# run on every sigma in {20, 30, 40, 100, 150}, m in {2, 10, 100} classes and integer order
# 2..60: 885 cells. C5 held on all of them; C6 failed on a contiguous run of orders from the
# one listed here up to 60 (None: it held up to 60), and held below it.
ORDERS = np.arange(2.0, 61.0)
FIRST_C6_FAILURE = {
    (20.0, 2): 17, (20.0, 10): 19, (20.0, 100): 20,
    (30.0, 2): 25, (30.0, 10): 28, (30.0, 100): 30,
    (40.0, 2): 33, (40.0, 10): 37, (40.0, 100): 39,
    (100.0, 2): None, (100.0, 10): None, (100.0, 100): None,
    (150.0, 2): None, (150.0, 10): None, (150.0, 100): None,
}
# More cells of the same function: orders below 2 and between integers, small sigma.
# (sigma, m, order): (c5, c6).
MORE_CELLS = {
    (40.0, 10, 1.25): (True, True), (40.0, 10, 1.5): (True, True),
    (40.0, 10, 1.75): (True, True), (40.0, 10, 18.5): (True, True),
    (40.0, 10, 36.5): (True, True), (40.0, 10, 36.9): (True, False),
    (150.0, 10, 2.0): (True, True), (5.0, 10, 2.0): (True, True),
    (5.0, 10, 3.0): (True, True), (5.0, 10, 5.0): (True, True),
    (5.0, 10, 8.0): (True, False), (2.0, 10, 2.0): (True, True),
    (2.0, 10, 4.0): (True, False), (2.0, 10, 20.0): (True, False),
    (1.0, 10, 3.0): (True, False), (0.5, 10, 2.0): (True, True),
    (0.5, 10, 3.0): (True, False), (4.0, 5, 3.0): (True, True),
    (4.0, 5, 8.0): (True, False), (4.0, 5, 30.0): (True, False),
    (3.0, 5, 6.0): (True, False), (3.0, 5, 8.0): (True, False),
    (10.0, 5, 20.0): (True, False), (1.0, 3, 2.0): (True, True),
    (1.0, 3, 4.0): (True, False),
}


@pytest.mark.slow
def test_verdicts_equal_tf_privacys_on_the_grid():
  cells = 0
  for (sigma, m), first in FIRST_C6_FAILURE.items():
    c5, c6 = acc.smooth_sensitivity_conditions(sigma, m, ORDERS)
    want_c6 = ORDERS < (np.inf if first is None else first)
    assert c5.all(), (sigma, m, ORDERS[~c5])
    np.testing.assert_array_equal(c6, want_c6, err_msg=f"sigma {sigma}, {m} classes")
    cells += ORDERS.size
  assert cells == 885
  for (sigma, m, order), want in MORE_CELLS.items():
    got = acc.smooth_sensitivity_conditions(sigma, m, order)
    assert (bool(got[0]), bool(got[1])) == want, (sigma, m, order)


@pytest.mark.slow
def test_the_audit_numbers():
  """σ = 40, 10 classes: C5 holds for orders 2-60 and C6 fails from 37 on (the audit said
  38; tf-privacy's own check fails at 37 too, by -6e-5), with the derivative's minimum
  -0.0012 at 40 and -0.031 at 60; σ = 30 and 20 fail at 30 and 20 (from 28 and 19 on);
  σ = 100 holds up to 60."""
  c5, c6 = acc.smooth_sensitivity_conditions(40.0, 10, ORDERS)
  assert c5.all()
  np.testing.assert_array_equal(ORDERS[~c6], np.arange(37.0, 61.0))
  m5, m6 = acc.smooth_sensitivity_condition_margins(40.0, 10, np.array([36.0, 37.0, 40.0, 60.0]))
  assert (m5 > 0).all()
  # tf-privacy's minimiser: 3.38e-4, -5.97e-5, -1.156e-3, -3.135e-2 (it stops just short of
  # the interval's upper end, where the minimum is; the grid includes that end).
  np.testing.assert_allclose(m6, [3.38e-4, -5.97e-5, -1.156e-3, -3.135e-2], rtol=0.02)
  assert not acc.smooth_sensitivity_conditions(30.0, 10, 30.0)[1]
  assert not acc.smooth_sensitivity_conditions(20.0, 10, 20.0)[1]
  assert acc.smooth_sensitivity_conditions(30.0, 10, 27.0)[1]
  assert acc.smooth_sensitivity_conditions(20.0, 10, 18.0)[1]
  both = acc.smooth_sensitivity_conditions(100.0, 10, ORDERS)
  assert both[0].all() and both[1].all()
  np.testing.assert_array_equal(acc.valid_release_orders(40.0, 10, acc.DEFAULT_ORDERS),
                                acc.DEFAULT_ORDERS[acc.DEFAULT_ORDERS <= 32.0])


def test_margins_are_concrete_and_the_same_inside_a_callers_trace():
  """The settings are constants: inside a caller's jit the margins are computed, not staged
  (one compiled program, called ahead of the trace), and equal the ones outside."""
  acc._conditions._margins_cached.cache_clear()  # computed inside the trace, not recalled
  seen = []

  def inside(x):
    seen.append(acc.smooth_sensitivity_condition_margins(41.5, 7, np.array([3.0, 20.0])))
    return x

  jax.jit(inside)(0.0)
  acc._conditions._margins_cached.cache_clear()
  outside = acc.smooth_sensitivity_condition_margins(41.5, 7, np.array([3.0, 20.0]))
  for got, want in zip(seen[0], outside):
    assert isinstance(got, np.ndarray)
    np.testing.assert_array_equal(got, want)


def test_check_release_order_says_what_fails():
  acc.check_release_order(40.0, 10, 36.0)
  acc.check_release_order(40.0, 10, np.array([2.0, 20.0, 36.0]))
  with pytest.raises(ValueError, match=r"^order 38 with sigma 40 and 10 classes: condition C6 "):
    acc.check_release_order(40.0, 10, 38.0)
  with pytest.raises(ValueError, match=r"^order 37 .*C6"):
    acc.check_release_order(40.0, 10, np.array([20.0, 37.0, 50.0]))
  # No q0 in float64's range: nothing can be checked, so both fail.
  with pytest.raises(ValueError, match="C5 and C6"):
    acc.check_release_order(0.5, 10, 40.0)


@pytest.mark.parametrize("name,call", [
    ("sigma", lambda: acc.smooth_sensitivity_conditions(0.0, 10, 2.0)),
    ("num_classes", lambda: acc.smooth_sensitivity_conditions(40.0, 1, 2.0)),
    ("num_classes", lambda: acc.smooth_sensitivity_conditions(40.0, 2.5, 2.0)),
    ("order", lambda: acc.smooth_sensitivity_conditions(40.0, 10, 1.0)),
    ("order", lambda: acc.smooth_sensitivity_conditions(40.0, 10, np.ones((2, 2)) * 3)),
    ("traced", lambda: jax.jit(lambda s: acc.smooth_sensitivity_conditions(s, 10, 2.0)[0])(
        40.0)),
])
def test_bad_input_names_the_argument(name, call):
  with pytest.raises(ValueError, match=name):
    call()


def test_release_refuses_an_order_where_a_condition_fails():
  votes = np.array([[240, 5, 5] + [0] * 7, [120, 100, 30] + [0] * 7])
  kw = dict(threshold=200.0, sigma_threshold=150.0, sigma=40.0, delta=1e-5)
  for order in (38.0, np.array([8.0, 20.0, 40.0])):
    with pytest.raises(ValueError, match=r"order (38|40) with sigma 40 and 10 classes.*C6"):
      acc.smooth_sensitivity_release(votes, order=order, **kw)
  with pytest.raises(ValueError, match=r"order 4 with sigma 3 and 10 classes"):
    acc.smooth_sensitivity_release(votes, sigma=3.0, order=4.0, delta=1e-5)


@pytest.mark.slow
def test_release_with_order_none_chooses_a_valid_order():
  """Unanimous votes: the smallest data-dependent ε is at a large order, past C6's limit."""
  votes = np.array([[250] + [0] * 9] * 5)
  kw = dict(threshold=200.0, sigma_threshold=150.0, sigma=40.0, delta=1e-5)
  rdp = acc.rdp_accountant(acc.DEFAULT_ORDERS, conversion="classic").compose(
      acc.confident_gnmax_rdp(votes, 200.0, 150.0, 40.0, acc.DEFAULT_ORDERS))
  assert float(rdp.epsilon(1e-5)[1]) > 36.0  # unrestricted, the choice would be invalid
  chosen = acc.smooth_sensitivity_release(votes, **kw)
  assert float(chosen.order) in acc.valid_release_orders(40.0, 10, acc.DEFAULT_ORDERS)


def test_default_release_order_chooses_only_valid_orders():
  for sigma, m in ((20.0, 2), (40.0, 10), (40.0, 100)):
    valid = acc.valid_release_orders(sigma, m, acc.DEFAULT_ORDERS)
    for n in (1, 10, 100, 1000, 10_000):
      order = budget_lib.default_release_order(mechanisms.GNMAX, {"sigma": sigma}, n, 1e-5,
                                               num_classes=m)
      assert order in valid, (sigma, m, n, order)
  # One answer at σ = 40 costs least at a large order: the rule takes the best valid one.
  assert budget_lib.default_release_order(mechanisms.GNMAX, {"sigma": 40.0}, 1, 1e-5,
                                          num_classes=10) == 32.0
  with pytest.raises(ValueError, match=r"^orders: .*sigma 40 and 10 classes"):
    budget_lib.default_release_order(mechanisms.GNMAX, {"sigma": 40.0}, 1, 1e-5,
                                     np.array([40.0, 64.0]), num_classes=10)


def test_default_release_orders_of_any_sigma_share_their_compiled_programs():
  # The rule composes on the whole grid, the orders where C5 or C6 fails at +inf: its
  # programs do not depend on how many orders are valid (19, 23, 27 of 37 here).
  from pate_jax.accounting import _conversion, _gnmax  # pylint: disable=g-import-not-at-top
  rule = lambda sigma, n: budget_lib.default_release_order(
      mechanisms.GNMAX, {"sigma": sigma}, n, 1e-5, num_classes=10)
  rule(20.0, 100)
  jitted = (_gnmax.gnmax_rdp_core, _conversion.rdp_to_epsilon_core)
  sizes = [f._cache_size() for f in jitted]  # pylint: disable=protected-access
  settings = [(sigma, n) for sigma in (40.0, 80.0) for n in (1, 100, 10_000)]
  got = [rule(sigma, n) for sigma, n in settings]
  assert [f._cache_size() for f in jitted] == sizes  # pylint: disable=protected-access
  for (sigma, n), order in zip(settings, got):
    valid = acc.valid_release_orders(sigma, 10, acc.DEFAULT_ORDERS)
    # The best valid order of the composed data-independent cost nλ/σ².
    assert order == float(acc.rdp_to_epsilon(n * valid / sigma**2, valid, 1e-5)[1])


@pytest.mark.parametrize("field, value, match", [
    ("sigma_threshold", -1.0, r"^sigma_threshold must be > 0; got -1.0$"),
    ("sigma_threshold", 0.0, r"^sigma_threshold must be > 0; got 0.0$"),
    ("sigma_threshold", float("nan"), r"^sigma_threshold must be finite; got nan$"),
    ("threshold", float("inf"), r"^threshold must be finite; got inf$"),
])
def test_the_release_rule_names_the_confident_gnmax_parameter_it_refuses(field, value, match):
  """The rule's order (a config's ``release.order`` None, the aggregate stage's default)
  is chosen before the budget checks the parameters: σ_T was refused as the σ of its
  √2·σ_T cost ("sigma must be > 0; got -1.414..."), naming another field and value."""
  params = {"threshold": 200.0, "sigma_threshold": 150.0, "sigma": 40.0, field: value}
  release = ml_collections.ConfigDict({"order": None, "beta": None, "sigma_ss": 10.0})
  with pytest.raises(ValueError, match=match):
    aggregate.fixed_release(release, mechanisms.CONFIDENT_GNMAX, params, 100, 1e-5, None,
                            "improved", 10)


def test_fixed_release_refuses_a_config_order_where_a_condition_fails():
  release = ml_collections.ConfigDict({"order": 38.0, "beta": None, "sigma_ss": 10.0})
  args = (mechanisms.GNMAX, {"sigma": 40.0}, 100, 1e-5, None, "improved")
  with pytest.raises(ValueError, match=r"^config.release.order 38 with sigma 40 and 10 "
                     r"classes: condition C6"):
    aggregate.fixed_release(release, *args, 10)
  # The same order is valid with σ = 100; the rule's order (None) is valid with any classes.
  assert aggregate.fixed_release(release, mechanisms.GNMAX, {"sigma": 100.0}, 100, 1e-5,
                                 None, "improved", 10).order == 38.0
  release.order = None
  for m in (2, 10, 100):
    spec = aggregate.fixed_release(release, *args, m)
    assert all(acc.smooth_sensitivity_conditions(40.0, m, spec.order))


def test_the_teachers_budget_refuses_a_release_order_where_a_condition_fails(tmp_path):
  from pate_jax import rng  # pylint: disable=import-outside-toplevel
  from pate_jax import votes as votes_lib  # pylint: disable=import-outside-toplevel
  r = np.random.default_rng(0)
  votes = np.stack([r.multinomial(250, p) for p in r.dirichlet(np.ones(10), 8)]).astype(np.int32)
  votes_lib.save_votes(tmp_path / "votes.npz", votes, votes.argmax(1), num_pool=8)
  data = votes_lib.load_votes(tmp_path)
  make = lambda order: budget_lib.TeachersBudget(  # noqa: E731
      tmp_path, data, rng.noise_key("aggregation"), mechanism=mechanisms.GNMAX,
      params={"sigma": 40.0}, epsilon_max=4.0, delta=1e-5,
      release=budget_lib.ReleaseSpec.make(order, 10.0), release_key=rng.noise_key("epsilon_release"))
  with pytest.raises(ValueError, match=r"^release\.order 38 with sigma 40 .*C6"):
    make(38.0)
  make(18.5)  # valid at σ = 40 with 10 classes
