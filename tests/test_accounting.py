"""pate_jax.accounting public API: validation and float64 handling.

Extreme inputs are tested per accountant (test_accounting_{lnmax,gnmax,sampled_gaussian}.py)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from pate_jax import accounting as acc

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
      ("votes", lambda: acc.calibrate_noise(1.0, 1e-5, votes=np.array([[1, 2.5]]))),
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
      ("delta", lambda: acc.calibrate_noise(1.0, 1.0, num_queries=10)),
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
