"""Claims of the README's library, publishing, layout, experiments and data sections against
their sources: the snippet's own arrays, the code's constants and functions (computed here in
milliseconds), the configs, the committed runs and the papers. The later sections' figures
are checked in ``test_claims.py`` and ``test_claims_accelerators.py``; each check here fails
if either side drifts."""

from __future__ import annotations

import ast
import json
import math
import re
import shutil
import subprocess

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.extend import random as jex_random

from pate_jax import accounting, mechanisms, rng
from pate_jax.data import _images, _partition

from test_claims import (README, REPO, _config, _paper,  # pylint: disable=g-bad-import-order
                         _readme, _whole)

SNIPPET = README[README.index("## The library in a few lines"):README.index(
    "## What you may publish")]
DATA_README = REPO.parent / "shared" / "data" / "README.md"


def _git_subject(commit: str) -> str:
  """``commit``'s subject line; skips where the clone lacks git or that commit."""
  if shutil.which("git") is None or not (REPO / ".git").exists():
    pytest.skip("no git history")
  out = subprocess.run(["git", "show", "-s", "--format=%s", commit], cwd=REPO,
                       capture_output=True, text=True, check=False)
  if out.returncode:
    pytest.skip(f"{commit} not in this clone's history")
  return out.stdout


def _readme_diff(commit: str) -> str:
  """What ``commit`` changed in README.md."""
  _git_subject(commit)
  return subprocess.run(["git", "show", commit, "--", "README.md"], cwd=REPO,
                        capture_output=True, text=True, check=True).stdout


# ------------------------------------------------------------------ The library in a few lines


def test_the_snippets_comments_are_its_arrays():
  """The snippet's votes are "of 250 teachers" (every row sums to it), its ε curve is "for
  64 noise scales" (the linspace's count), and its derivative is of Theorem 6 of the 2018
  paper, the theorem ``accounting.gnmax_rdp`` implements (tests/test_readme.py runs the
  block; this ties its comments)."""
  m = re.search(r"votes = np\.array\((\[\[.*?\]\])\)\s+# \[Q, C\] votes of (\d+) teachers",
                SNIPPET)
  assert m, "the snippet's votes line"
  rows = ast.literal_eval(m.group(1))
  assert {sum(r) for r in rows} == {int(m.group(2))}
  m = re.search(r"# Vectorised: ε for (\d+) noise scales at once\.\n"
                r"sigmas = np\.linspace\([\d.]+, [\d.]+, (\d+)\)", SNIPPET)
  assert m and m.group(1) == m.group(2), m and m.groups()
  m = re.search(r"\(Theorem (\d+) of the 2018 paper\)", SNIPPET)
  gnmax_doc = (REPO / "pate_jax" / "accounting" / "_gnmax.py").read_text()
  assert m and f"ICLR 2018: Theorem {m.group(1)} (data-dependent RDP" in " ".join(
      gnmax_doc.split())


# ------------------------------------------------------------------ What you may publish


def test_the_secret_keys_bits_are_the_rngs():
  """*Noise is secret*: "128 bits of `os.urandom`" in "two threefry keys", so that "a
  search over one threefry key's 2^64 finds nothing": the secret implementation's key data
  and threefry's, in 32-bit words."""
  bits = int(_readme(r"draws its noise from (\d+) bits of `os\.urandom`").group(1))
  half = int(_readme(r"a search over one threefry key's 2\^(\d+) finds nothing").group(1))
  assert int(_readme(r"try every one of the 2\^(\d+) keys").group(1)) == bits
  secret = jax.random.key_data(rng.noise_key("aggregation"))
  assert secret.dtype == jnp.uint32 and 32 * secret.size == bits
  assert 32 * math.prod(jex_random.threefry_prng_impl.key_shape) == half
  assert 2 * half == bits


def test_the_attacks_private_as_a_whole_are_the_stages():
  """*What you may publish*: the attacks "private as a whole" are "`attack.py`'s `adult` and
  `near_duplicates` settings", its others saying "publishable: synthetic or public data
  only" (the disclosure the attack stage writes for the settings outside ON_PRIVATE_DATA)."""
  from pate_jax import experiment  # pylint: disable=import-outside-toplevel
  from pate_jax.stages import attack  # pylint: disable=import-outside-toplevel
  m = _readme(r"`attack\.py`'s `(\w+)` and `(\w+)` settings; its others attack published or "
              r"synthetic histograms and say \"([^\"]+)\"")
  assert set(m.groups()[:2]) == set(attack.ON_PRIVATE_DATA)
  assert set(attack.ON_PRIVATE_DATA) < set(attack.SETTINGS)
  assert m.group(3) == experiment.NO_PRIVATE_DATA


def test_a_private_runs_report_lines_are_marked_unless_they_begin_with_the_mark():
  """*What you may publish*: the harness "begins each report line of such a run that does
  not already begin with the mark" with it: a line that says "private" further on is
  marked too (``experiment.mark_private``)."""
  from pate_jax import experiment  # pylint: disable=import-outside-toplevel
  m = _readme(r"begins each report line of such a run that does not already begin with the "
              r"mark with \"([^\"]+)\"")
  assert m.group(1) == experiment.PRIVATE_MARK
  text = "ε 1.2 (private)\nprivate (data owner only): accuracy 0.9\n"
  assert experiment.mark_private(text) == (
      f"{experiment.PRIVATE_MARK}ε 1.2 (private)\n"
      "private (data owner only): accuracy 0.9\n")


def test_the_folders_left_as_they_are_are_the_codes():
  """*What you may publish*: "the folder a hand-over archive, a report or the report's copies
  of figures are written to" is left as it is: the three writers open their owner-only file
  without narrowing its directory (``io.open_private``'s ``narrow_directory=False``)."""
  import inspect  # pylint: disable=import-outside-toplevel
  from pate_jax import reporting  # pylint: disable=import-outside-toplevel
  from pate_jax.stages import gpu_acceptance, report  # pylint: disable=import-outside-toplevel
  _readme(r"and so is the folder a hand-over archive, a report or the report's copies of "
          r"figures are written to\.")
  for fn in (gpu_acceptance._archive, report.run,  # pylint: disable=protected-access
             reporting.stamp_private):
    assert "io.open_private(" in inspect.getsource(fn), fn.__name__
    assert "narrow_directory=False" in inspect.getsource(fn), fn.__name__


def _float32_normal_extremes() -> float:
  """The largest |z| JAX's float32 normal sampler can return: its value at the uniform
  bits all zeros and all ones (a PRNG whose bits are its key)."""
  impl = jex_random.define_prng_impl(
      key_shape=(1,), seed=lambda s: jnp.zeros((1,), jnp.uint32),
      split=lambda k, shape: jnp.broadcast_to(k, (*shape, 1)),
      random_bits=lambda k, bit_width, shape: jnp.full(shape, k[0], jnp.uint32),
      fold_in=lambda k, d: k, name="constant_bits", tag="cst")
  out = []
  for word in (0, 0xFFFFFFFF):
    key = jax.random.wrap_key_data(np.array([word], np.uint32), impl=impl)
    out.append(float(jax.random.normal(key, (), jnp.float32)))
  return max(abs(z) for z in out)


def test_the_float32_samplers_values_and_range_are_jaxs():
  """*Noise is secret*: "float32's sampler takes 2^23 values, none beyond 5.42 standard
  deviations", "its distance from the ideal noise (2^-23 per value)": float32's mantissa
  bits, and JAX's normal at its extreme uniforms."""
  m = _readme(r"float32's sampler takes 2\^(\d+) values, none beyond ([\d.]+) standard "
              r"deviations")
  assert int(m.group(1)) == np.finfo(np.float32).nmant
  distance = _readme(r"its distance from the ideal noise \(2\^-(\d+) per value\)")
  assert int(distance.group(1)) == np.finfo(np.float32).nmant  # each value's probability
  bound, unit = float(m.group(2)), 10.0 ** -len(m.group(2).split(".")[1])
  largest = _float32_normal_extremes()
  assert largest <= bound < largest + unit, (largest, bound)  # the tightest bound written


def test_the_sampler_delta_formulas_are_the_functions():
  """*Noise is secret*: each value drawn adds "(1 + e^ε_max)" times "2^-46 … plus … 2^-52
  (T/s + 38)"; a release's cell edges "ε / 2^-10 + 2" add "(1 + e^ε_max) · (2^-46 +
  2^-51)" each, "2.7e-10 for one release at ε 2.04"; on "a 2^-10 grid over [−1, 2], (1 +
  e^8) · n·C · 3,072 edges · 2^-46 ≈ 4e-3 for ε 8 and n·C = 30,000"."""
  m = _readme(r"plus the rounding of the scores it is compared through, 2\^-(\d+) \(T/s \+ "
              r"(\d+)\)")
  rounding, margin = 2.0 ** -int(m.group(1)), float(m.group(2))
  eps, queries, classes, teachers, sigma = 2.0, 100, 10, 250, 40.0
  want = (1 + math.exp(eps)) * queries * classes * (
      mechanisms.SAMPLER_CDF_ERROR + rounding * (teachers / sigma + margin))
  got = mechanisms.sampler_delta(mechanisms.GNMAX, {"sigma": sigma}, queries, classes,
                                 teachers, eps)
  assert got == pytest.approx(want, rel=1e-12)

  m = _readme(r"The released value lies on a fixed grid of 2\^-(\d+) "
              r"\(`accounting\.RELEASE_GRID`\)")
  assert accounting.RELEASE_GRID == 2.0 ** -int(m.group(1))
  m = _readme(r"the sampler's error at the `ε / 2\^-(\d+) \+ (\d+)` edges below the clip: "
              r"`\(1 \+ e\^ε_max\) · \(2\^-(\d+) \+ 2\^-(\d+)\)` each "
              r"\(`mechanisms\.release_sampler_delta`, ([\d.]+e-\d+) for one release at "
              r"ε ([\d.]+)\)")
  grid, extra = 2.0 ** -int(m.group(1)), float(m.group(2))
  cdf, product = 2.0 ** -int(m.group(3)), 2.0 ** -int(m.group(4))
  assert grid == accounting.RELEASE_GRID and cdf == mechanisms.SAMPLER_CDF_ERROR
  eps = float(m.group(6))
  got = mechanisms.release_sampler_delta(1, eps, eps)
  assert got == pytest.approx((1 + math.exp(eps)) * (eps / grid + extra) * (cdf + product),
                              rel=1e-12)
  assert f"{got:.1e}" == m.group(5)

  m = _readme(r"on a 2\^-(\d+) grid over \[−(\d+), (\d+)\], \(1 \+ e\^(\d+)\) · n·C · "
              r"([\d,]+) edges · 2\^-(\d+) ≈ (\de-\d) for ε (\d+) and n·C = ([\d,]+)")
  lo, hi, e_pow = int(m.group(2)), int(m.group(3)), int(m.group(4))
  edges = int(m.group(5).replace(",", ""))
  assert edges == (hi + lo) * 2 ** int(m.group(1))
  assert 2.0 ** -int(m.group(6)) == mechanisms.SAMPLER_CDF_ERROR
  assert int(m.group(8)) == e_pow
  value = (1 + math.exp(e_pow)) * int(m.group(9).replace(",", "")) * edges * 2.0 ** -int(
      m.group(6))
  assert f"{value:.0e}".replace("e-0", "e-") == m.group(7)


def test_the_float64_change_and_the_measured_figures_name_their_commits():
  """*Noise is secret*: "Runs whose code precedes a691587 drew float32 noise" (the commit
  that drew the answers' noise in float64); the float32 release's "1.16 % … measured at
  d1e7f06" and the sampler's "8 µs each, as ece735a's README gave it" are those commits'
  own figures."""
  commit = _readme(r"Runs whose code precedes (\w{7}) drew float32 noise").group(1)
  assert "noise is drawn and added in float64" in _git_subject(commit)
  m = _readme(r"teachers and σ 1, ([\d.]+) % of one coordinate's outputs could not occur "
              r"under a neighbour, measured at (\w{7}) by a script not kept")
  assert f"({m.group(1)} % of a coordinate's outputs impossible" in _git_subject(m.group(2))
  m = _readme(r"at (\d+) µs each, as (\w{7})'s README gave it")
  out = _readme_diff(m.group(2))
  assert f"+  KD-GAN run's published seconds include it (about 1 s of n·C·E values at " \
         f"{m.group(1)} µs each)." in out


def test_the_soft_labels_variance_is_the_codes():
  """*Noise is secret*: "the discrete Gaussian of variance ⌈2σ²S²⌉"."""
  from pate_jax import kd_gan, votes  # pylint: disable=import-outside-toplevel
  _readme(r"the noise is the discrete Gaussian of variance ⌈2σ²S²⌉")
  scale = votes.SOFT_COUNT_SCALE
  for sigma in (0.5, 1.0, 1.3):
    assert kd_gan.soft_count_variance(sigma) == math.ceil(2 * sigma**2 * scale**2)


# ------------------------------------------------------------------ Layout


def test_the_layouts_script_bound_is_the_import_tests():
  """*Layout*: "each script is at most 120 lines" is tests/test_import_graph's bound."""
  bound = int(_readme(r"each script is at most (\d+) lines importing only a stage").group(1))
  text = (REPO / "tests" / "test_import_graph.py").read_text()
  assert re.search(rf"^MAX_SCRIPT_LINES = {bound}$", text, re.M)


# ------------------------------------------------------------------ Experiments


def test_the_experiments_overrides_and_seeds_are_the_configs_and_runs():
  """*Experiments*: the main job's example overrides name fields of its config; the
  1,000-query PATE-G row (`num_queries=1000`, `epsilon_max=25`) is the committed run's
  setting; "RESULTS.md reads seeds 0, 1 and 2" is the catalogue's; and each listed attack
  setting has its config."""
  job = _config("pate_mnist.py:cpu")
  sentence = _readme(r"In the main job's nested config an override names the stage: (.*?\d`)\.")
  overrides = re.findall(r"`--config\.(\w+)\.(\w+)=\d+`", sentence.group(1))
  assert len(overrides) == 3, sentence.group(1)
  for stage, field in overrides:
    assert field in job[stage], (stage, field)
  m = _readme(r"`--config\.aggregate\.num_queries=(\d+) --config\.aggregate\.epsilon_max=(\d+)"
              r" --workdir runs/pate_g_1000/seed_0`")
  for seed in (0, 1, 2):
    aggregate = _whole(f"pate_g_1000/seed_{seed}")["config"]["aggregate"]
    assert (aggregate["num_queries"], aggregate["epsilon_max"]) == (
        int(m.group(1)), float(m.group(2)))
  m = _readme(r"`RESULTS\.md` reads seeds (\d+), (\d+) and (\d+)")
  from pate_jax import reproduction  # pylint: disable=import-outside-toplevel
  seeds = reproduction._SEEDS  # pylint: disable=protected-access
  assert seeds == tuple(int(x) for x in m.groups())
  m = _readme(r"histogram attack \(settings: ((?:`\w+`(?:, )?)+)\)")
  settings = re.findall(r"`(\w+)`", m.group(1))
  assert sorted(settings) == sorted(p.stem[len("attack_"):] for p in
                                    (REPO / "configs").glob("attack_*.py")
                                    if p.stem != "attack_bench")


# ------------------------------------------------------------------ Data


def test_the_data_sections_numbers_are_the_loaders_and_the_papers():
  """*Data*: the probe's "one TCP connection (≤ 5 s)"; the student split "first 9,000
  public pool, last 1,000 evaluation; SVHN: first 10,000 / remaining 16,032" is
  ``STUDENT_SPLITS``, the 2017 paper's, and SVHN's test set (26,032 rows, the data
  README's); and the fallback's 7 s / 212 s are 27e3d1f's README's."""
  m = _readme(r"one TCP connection \(≤ (\d+) s\)")
  assert _images.PROBE_TIMEOUT_S == float(m.group(1))
  m = _readme(r"first ([\d,]+) public pool, last ([\d,]+) evaluation; SVHN: first ([\d,]+) / "
              r"remaining ([\d,]+)\)")
  pool, held, svhn_pool, svhn_rest = (int(x.replace(",", "")) for x in m.groups())
  assert _partition.STUDENT_SPLITS["mnist"] == (pool, held)
  assert _partition.STUDENT_SPLITS["svhn"] == (svhn_pool, None)
  paper = " ".join(_paper("pate-2017-iclr.md").split())
  assert (f"the student has access to {pool:,} samples" in paper
          and f"evaluated on the {held:,} remaining samples" in paper)
  assert (f"For SVHN, the student has access to {svhn_pool:,} training inputs" in paper
          and f"evaluated on the remaining {svhn_rest:,} samples" in paper)
  if not DATA_README.is_file():
    pytest.skip("../shared/data/README.md not found")
  svhn_test = re.search(r"test ([\d,]+)", DATA_README.read_text().split("**SVHN**")[1])
  assert int(svhn_test.group(1).replace(",", "")) == svhn_pool + svhn_rest
  m = _readme(r"reached the fallback in (\d+) s, mostly imports, instead of (\d+) s of "
              r"tensorflow-datasets' retries, at load ≈ \d+: as (\w{7})'s README gave them")
  out = _readme_diff(m.group(3))
  assert f"+the main job's MNIST load went from {m.group(2)} s of retries to {m.group(1)} s" \
         in out


# ------------------------------------------------------------------ Accelerators: sourced leftovers


def _committed_run(commit: str, name: str) -> dict:
  """Run ``name``'s whole ``results.json`` as commit ``commit`` committed it."""
  _git_subject(commit)
  out = subprocess.run(["git", "show", f"{commit}:results/runs/{name}/results.json"], cwd=REPO,
                       capture_output=True, text=True, check=True).stdout
  return json.loads(out)


def _added(commit: str) -> str:
  """The README lines ``commit`` added, whitespace-normalised into one text."""
  lines = [l[1:] for l in _readme_diff(commit).splitlines()
           if l.startswith("+") and not l.startswith("+++")]
  return " ".join(" ".join(lines).split())


def test_the_h100s_save_time_is_its_runs():
  """"each save of the 250 teachers' state blocked training ~7 s on the H100:
  `mnist_250_gpu`'s 13.8 s over its 2 saves" (1,000 steps, a save every 500)."""
  m = _readme(r"blocked training ~(\d+) s on the H100: `(\w+)`'s ([\d.]+) s over its (\d+) "
              r"saves\)")
  run = _whole(m.group(2))
  checkpoints = run["results"]["checkpoints"]
  assert "H100" in run["device"]["device_kind"]
  assert checkpoints["saves"] == int(m.group(4))
  assert run["config"]["num_steps"] // run["config"]["checkpoint_every"] == int(m.group(4))
  assert f"{checkpoints['blocking_seconds']:.1f}" == m.group(3)
  assert round(checkpoints["blocking_seconds"] / checkpoints["saves"]) == int(m.group(1))


def test_the_h200s_aggregate_and_student_seconds_are_the_committed_main_jobs():
  """*The accounting runs on the host* and *The student's data-dependent initialisation*:
  "the main job's aggregate stage took 20.7 s on the H200 (`pate_mnist_gpu` as committed
  in 82daa20, code b4deb0f)", "[The labels' accounting took 9.6 s (… in e95114e, code
  0b5a9f2)", "the main job's student took 80 s wall for 41 s of training (… 82daa20 …)
  [57.0 s for 38.7 s, of which 9.7 s labelling: its file as committed in e95114e …]"."""
  def at(commit: str, code: str) -> dict:
    run = _committed_run(commit, "pate_mnist_gpu")
    assert run["git"].startswith(code) and "H200" in run["device"]["device_kind"]
    return run["results"]

  m = _readme(r"the main job's aggregate stage took ([\d.]+) s on the H200 \(`pate_mnist_gpu` "
              r"as committed in (\w{7}), code (\w{7})\)")
  assert f"{at(m.group(2), m.group(3))['aggregate']['time_s']:.1f}" == m.group(1)
  m = _readme(r"\[The labels' accounting took ([\d.]+) s, the aggregate stage ([\d.]+) s before "
              r"\(`pate_mnist_gpu` as committed in (\w{7}), code (\w{7}), and in (\w{7})\)")
  assert f"{at(m.group(3), m.group(4))['aggregate']['time_s']:.1f}" == m.group(1)
  older = _committed_run(m.group(5), "pate_mnist_gpu")["results"]
  assert f"{older['aggregate']['time_s']:.1f}" == m.group(2)
  m = _readme(r"the main job's student took (\d+) s wall for (\d+) s of training\. \[([\d.]+) s "
              r"for ([\d.]+) s, of which ([\d.]+) s labelling\.\] Both are `pate_mnist_gpu`'s: as "
              r"committed in (\w{7}) \(code (\w{7})\), and in brackets as committed in (\w{7}) "
              r"\(code (\w{7})\)\.")
  student = at(m.group(6), m.group(7))["student"]
  assert (f"{student['wall_seconds']:.0f}", f"{student['train_seconds']:.0f}") == m.group(1, 2)
  student = at(m.group(8), m.group(9))["student"]
  assert (f"{student['wall_seconds']:.1f}", f"{student['train_seconds']:.1f}",
          f"{student['labels_seconds']:.1f}") == m.group(3, 4, 5)


def test_the_cpu_figures_without_a_run_are_the_readmes_that_gave_them():
  """The one-pass votes' "9.4 s instead of 15.6 s … wall 20.9 s instead of 27.8 s" and the
  accounting's "61 of them compiled in 3.0 s of the stage's 3.8 s" (680ebdd), the student's
  "46 XLA programs instead of 207" and "14.8 s instead of 19.9 s" (1cce474), the probe's
  "51 MB" (a13ff88; the program's 69 MB is test_claims_accelerators' derivation): no run
  file holds them; the commit each names gave them."""
  m = _readme(r"votes took ([\d.]+) s instead of ([\d.]+) s and gave an identical `votes\.npz` "
              r"\(.*? wall ([\d.]+) s instead of ([\d.]+) s; on the 2-core CPU, as (\w{7})'s "
              r"README gave them, in no committed file\)")
  added = _added(m.group(5))
  assert (f"votes took {m.group(1)} s instead of {m.group(2)} s" in added
          and f"wall {m.group(3)} s instead of {m.group(4)} s" in added)
  m = _readme(r"(\d+) of them compiled in ([\d.]+) s of the stage's ([\d.]+) s \(.*? as "
              r"(\w{7})'s README gave them, in no committed file\)")
  assert f"{m.group(1)} of them compiled in {m.group(2)} s of the stage's {m.group(3)} s" in \
      _added(m.group(4))
  m = _readme(r"compiled (\d+) XLA programs instead of (\d+) \(`JAX_LOG_COMPILES=1`\)\. - Its "
              r"wall was ([\d.]+) s instead of ([\d.]+) s, both under `cProfile` \(these four "
              r"figures as (\w{7})'s README gave them")
  added = _added(m.group(5))
  assert (f"compiled {m.group(1)} XLA programs instead of {m.group(2)}" in added
          and f"{m.group(3)} s instead of {m.group(4)} s" in added)
  m = _readme(r"it accounted (\d+) MB per paper-CNN teacher, .*? the probe's (\d+) MB as "
              r"(\w{7})'s README gave it, in no committed file")
  assert m.group(1) == m.group(2)
  assert f"it accounted {m.group(1)} MB per paper-CNN teacher" in _added(m.group(3))


def test_the_reimplementation_gives_no_figure():
  """The PATE-G diagnosis' re-implementation of the authors' script was not kept: its
  figures are not in the table (no row of it) and the text says so."""
  assert not [l for l in README.splitlines() if l.startswith("  | re-implementation")]
  _readme(r"its script and its figures were not kept, so no accuracy of it is given here")
