"""Shared fixtures: offline data directory and quiet, offline defaults."""

from __future__ import annotations

import os
import pathlib

import pytest

# Tests never wait on tensorflow-datasets' download retries.
os.environ.setdefault("PATE_JAX_OFFLINE", "1")
os.environ.setdefault("PATE_JAX_NO_PROGRESS", "1")

REPO = pathlib.Path(__file__).resolve().parent.parent


def _shared_data() -> pathlib.Path | None:
  for candidate in (os.environ.get("PATE_JAX_DATA_DIR"), REPO.parent / "shared" / "data"):
    if candidate and (pathlib.Path(candidate) / "mnist" / "train.npz").exists():
      return pathlib.Path(candidate)
  return None


@pytest.fixture(scope="session")
def data_dir() -> pathlib.Path:
  """The offline data directory with real MNIST/Adult (CI: ../shared/data)."""
  path = _shared_data()
  if path is None:
    if os.environ.get("PATE_JAX_REQUIRE_DATA") == "1":  # CI: a missing directory is a failure.
      pytest.fail("PATE_JAX_REQUIRE_DATA=1 but no real data under $PATE_JAX_DATA_DIR")
    pytest.skip("real data not available: set PATE_JAX_DATA_DIR (CI sets ../shared/data)")
  return path
