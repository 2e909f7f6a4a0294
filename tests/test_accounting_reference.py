"""The per-query scalar reference agrees with the vectorised accountants."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from pate_jax import accounting as acc
from pate_jax.stages.bench.reference_loops import loop_accounting, synthetic_votes


def test_scalar_loop_matches_vectorised_accountants():
  votes = synthetic_votes(0, 50, 250, 10)
  np.testing.assert_array_equal(votes.sum(1), 250)
  orders = np.array([1.5, 2.0, 5.0, 20.0, 100.0])
  alpha, rdp = loop_accounting(votes, 0.05, 40.0, 200.0, 150.0, orders, max_moment=8)
  with jax.enable_x64(True):
    want_alpha = np.asarray(acc.lnmax_log_moments(votes, 0.05, np.arange(1.0, 9.0)).sum(0))
    want_rdp = np.asarray(jnp.sum(acc.confident_gnmax_rdp(votes, 200.0, 150.0, 40.0, orders),
                                  axis=0))
  np.testing.assert_allclose(alpha, want_alpha, rtol=1e-10)
  np.testing.assert_allclose(rdp, want_rdp, rtol=1e-10)
