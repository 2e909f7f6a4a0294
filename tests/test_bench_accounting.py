"""The accounting benchmark's account of where the host-votes path's time goes
(pate_jax.stages.bench.accounting): the fields it adds to results.json. Timings themselves
are not tested (a benchmark measures them); their arithmetic and counts are."""

from __future__ import annotations

import jax
import numpy as np
import pytest

from pate_jax.stages.bench import accounting as bench


def test_host_votes_breakdown_subtracts_the_transfers_and_copies():
  costs = {"device_put_seconds": 0.012, "copy_seconds": 0.004, "transfers": 2, "copies": 2}
  r = bench.host_votes_breakdown(costs, public_host=0.0588, jax_time=0.0029)
  assert r["host_votes_device_put_seconds_median"] == 0.012
  assert r["host_votes_numpy_copy_seconds_median"] == 0.004
  assert r["public_api_host_votes_transfers"] == 2 and r["public_api_host_votes_numpy_copies"] == 2
  assert r["public_api_over_kernel_host_votes_less_transfers"] == pytest.approx(
      (0.0588 - 0.024) / 0.0029)
  assert r["public_api_over_kernel_host_votes_less_transfers_and_copies"] == pytest.approx(
      (0.0588 - 0.024 - 0.008) / 0.0029)


@pytest.mark.parametrize("num_queries,transfers", [(100, 4), (40_000, 2)])
def test_host_votes_costs_count_one_transfer_and_copy_per_public_function(num_queries,
                                                                          transfers):
  # Small votes: copied, then read by the check and the core of each of the 2 functions;
  # large ones (1.6 MB): copied (on CPU; not on a device with memory of its own) and put
  # on the device once per function.
  votes = np.full((num_queries, 10), 25, np.int32)
  costs = bench.host_votes_costs(votes, repeats=2)
  on_cpu = jax.devices()[0].platform == "cpu"
  assert costs["transfers"] == transfers
  assert costs["copies"] == (2 if on_cpu or num_queries == 100 else 0)
  assert costs["device_put_seconds"] >= 0 and costs["copy_seconds"] > 0
