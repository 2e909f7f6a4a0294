"""Shared fixtures: offline data directory and quiet, offline defaults."""

from __future__ import annotations

import atexit
import os
import pathlib
import shutil
import tempfile

import pytest

# Tests never wait on tensorflow-datasets' download retries.
os.environ.setdefault("PATE_JAX_OFFLINE", "1")
os.environ.setdefault("PATE_JAX_NO_PROGRESS", "1")

REPO = pathlib.Path(__file__).resolve().parent.parent

# One persistent compilation cache for the whole run: tests compile many of the same
# programs, in this process, in the other pytest-xdist workers and in the scripts they start
# (which inherit these variables), and most of the suite's time is compiling. XLA keys an
# entry by the program, its compile options and flags, the devices and the jaxlib version,
# so a hit is the program that would have been compiled. The directory is new for each run
# (made by the process that starts the workers, removed when it exits) unless
# JAX_COMPILATION_CACHE_DIR is set; JAX_ENABLE_COMPILATION_CACHE=false turns it off. Every
# program is kept, however quickly it compiled (JAX's default keeps those over 1 s): the
# suite's are small. It is the suite's only: a compiled program holds its constants, so
# pate_jax's own runs keep none.
if "JAX_COMPILATION_CACHE_DIR" not in os.environ and "PYTEST_XDIST_WORKER" not in os.environ:
  _cache_dir = tempfile.mkdtemp(prefix="pate_jax_test_xla_cache_")
  os.environ["JAX_COMPILATION_CACHE_DIR"] = _cache_dir
  atexit.register(shutil.rmtree, _cache_dir, ignore_errors=True)
# A directory of one's own (JAX_COMPILATION_CACHE_DIR set) keeps every program too, and
# outlives the run: the next run of the tier finds them compiled.
os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "0")

# The budget registry (pate_jax.budget.BudgetRegistry) is the suite's own, never the user's:
# one directory for the run (set here, inherited by the workers and the scripts they start),
# and one per test (_own_budget_registry), so that tests that train teachers on the same
# data never meet each other's budgets.
if "PYTEST_XDIST_WORKER" not in os.environ:
  _registry_dir = tempfile.mkdtemp(prefix="pate_jax_test_budgets_")
  os.environ["PATE_JAX_BUDGET_REGISTRY"] = _registry_dir
  atexit.register(shutil.rmtree, _registry_dir, ignore_errors=True)


# On a CPU-only machine the suite compiles without LLVM's optimisation: its programs are
# small and brief, so compiling them is most of its time (the fast tier took 591 s with
# the flag and 915 s without, on the 2-core CPU). Scripts started by tests inherit it;
# _scripts.run_result keeps it beside the XLA_FLAGS a test gives. set_fast_compile declines
# where an accelerator may be used (experiment.compiles_for_cpu_only): the GPU acceptance's
# test stage keeps XLA's defaults.
from pate_jax.experiment import set_fast_compile  # pylint: disable=g-import-not-at-top
set_fast_compile(True)


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


_MAPPINGS_BEFORE_CLEARING = 25_000


def _num_mappings() -> int:
  try:
    with open("/proc/self/maps", "rb") as f:
      return sum(1 for _ in f)
  except OSError:  # Not Linux: no such limit to watch.
    return 0


@pytest.fixture(autouse=True, scope="module")
def _free_compiled_programs():
  """Drops JAX's compiled programs after a test module once the process holds many memory
  mappings. Every XLA:CPU executable keeps mappings of its own, and one process running
  the whole suite would otherwise reach the kernel's limit of 65,530 (vm.max_map_count)
  and crash inside the compiler; clearing only past a threshold keeps the programs that
  later modules share."""
  yield
  if _num_mappings() > _MAPPINGS_BEFORE_CLEARING:
    import jax  # pylint: disable=g-import-not-at-top
    jax.clear_caches()


@pytest.fixture
def float32_matmuls():
  """Float32 matrix products and convolutions on every backend, for tests that compare two
  computations of one function at float32 tolerances: a GPU's default for float32 operands
  is TF32 (about 1e-3 relative)."""
  import jax  # pylint: disable=g-import-not-at-top
  with jax.default_matmul_precision("float32"):
    yield


@pytest.fixture(autouse=True)
def _own_budget_registry(tmp_path_factory, monkeypatch):
  """Each test's secret-noise budgets register in a registry of its own."""
  monkeypatch.setenv("PATE_JAX_BUDGET_REGISTRY", str(tmp_path_factory.mktemp("budgets")))


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


@pytest.fixture(scope="session")
def digits_votes_dir(tmp_path_factory) -> pathlib.Path:
  """votes.npz of 20 simulated teachers (80 % right, else a uniform class) on the 8x8
  digits' student split, with probabilities at T = 1 and T = 5 (for distillation)."""
  import numpy as np  # pylint: disable=g-import-not-at-top
  from pate_jax import data, votes as votes_lib  # pylint: disable=g-import-not-at-top

  out = tmp_path_factory.mktemp("teachers")
  ds = data.load_image_dataset("digits")
  split = data.student_split("digits", len(ds.test_labels))
  index = np.concatenate([split.pool_index, split.eval_index])
  y = ds.test_labels[index]
  rs = np.random.RandomState(0)
  preds = np.where(rs.rand(20, len(y)) < 0.8, y, rs.randint(0, 10, (20, len(y))))
  votes = np.stack([np.bincount(p, minlength=10) for p in preds.T])
  probs = np.stack([votes / 20.0, np.full(votes.shape, 0.1)])
  votes_lib.save_votes(out / "votes.npz", votes, y, index=index,
                       num_pool=len(split.pool_index), dataset="digits",
                       probabilities=probs, temperatures=(1.0, 5.0))
  return out
