"""Shared fixtures: offline data directory and quiet, offline defaults."""

from __future__ import annotations

import os
import pathlib

import pytest

# Tests never wait on tensorflow-datasets' download retries.
os.environ.setdefault("PATE_JAX_OFFLINE", "1")
os.environ.setdefault("PATE_JAX_NO_PROGRESS", "1")

REPO = pathlib.Path(__file__).resolve().parent.parent


def shared_data(*required: str) -> pathlib.Path | None:
  """The one data-directory lookup of the tests: ``$PATE_JAX_DATA_DIR``, else
  ``../shared/data`` (where CI keeps it), whichever holds every ``required`` file."""
  required = required or ("mnist/train.npz",)
  for candidate in (os.environ.get("PATE_JAX_DATA_DIR"), REPO.parent / "shared" / "data"):
    if candidate and all((pathlib.Path(candidate) / r).exists() for r in required):
      return pathlib.Path(candidate)
  return None


def require_data(*required: str) -> pathlib.Path:
  """:func:`shared_data`, or a skip (a failure under ``PATE_JAX_REQUIRE_DATA=1``, as in CI)."""
  path = shared_data(*required)
  if path is None:
    what = ", ".join(required or ("mnist/train.npz",))
    if os.environ.get("PATE_JAX_REQUIRE_DATA") == "1":  # CI: a missing directory is a failure.
      pytest.fail(f"PATE_JAX_REQUIRE_DATA=1 but no {what} under $PATE_JAX_DATA_DIR or "
                  "../shared/data")
    pytest.skip(f"real data ({what}) not available: set PATE_JAX_DATA_DIR (CI sets "
                "../shared/data)")
  return path


@pytest.fixture(scope="session")
def data_dir() -> pathlib.Path:
  """The offline data directory with real MNIST (CI: ../shared/data)."""
  return require_data("mnist/train.npz")


@pytest.fixture
def real_adult_dir(monkeypatch) -> pathlib.Path:
  """The real UCI Adult split (same lookup as :func:`data_dir`), exported as
  ``$PATE_JAX_DATA_DIR`` for the loaders that read it."""
  path = require_data("adult/train.csv", "adult/test.csv", "adult/attack.csv")
  monkeypatch.setenv("PATE_JAX_DATA_DIR", str(path))
  return path
