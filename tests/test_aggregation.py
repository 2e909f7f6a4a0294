"""Tests for pate_jax.aggregation: distributions, determinism, invariances, validation."""

from __future__ import annotations

import hashlib
import pathlib

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import stats

from pate_jax import aggregation as agg
from pate_jax import experiment

KEY = jax.random.key(0)
# Few distinct shapes keep compilation (most of the test time) down.
N = 20_000  # Sample size of the distribution checks.
Q, C = 64, 10  # Shape of the small tests (as in test_ledger.py: shared compilations).


def _random_votes(seed, q, c, t):
  rng = np.random.default_rng(seed)
  preds = rng.integers(0, c, size=(q, t))
  return np.stack([np.bincount(p, minlength=c) for p in preds]).astype(np.int32)


def _within(freq, p, n, k=5.0):
  """|freq - p| within k binomial standard errors."""
  return abs(freq - p) <= k * np.sqrt(p * (1 - p) / n)


# --- Distributions against closed forms --------------------------------------------------


def test_lnmax_two_class_flip_probability_matches_closed_form():
  # Two classes, gap d: Pr[minority] = Pr[Lap(1) - Lap(1) > gamma d]
  # = (2 + gamma d) / (4 exp(gamma d))   (2017 paper, Lemma 4; exact for C = 2).
  q, gamma, d = N, 0.5, 2
  votes = np.tile([[6, 6 - d]], (q, 1))
  labels = np.asarray(agg.lnmax(KEY, votes, gamma))
  p = (2 + gamma * d) / (4 * np.exp(gamma * d))
  assert _within((labels == 1).mean(), p, q)
  assert set(np.unique(labels)) == {0, 1}


def test_gnmax_two_class_flip_probability_matches_closed_form():
  # Pr[minority] = Pr[N(0, 2 sigma^2) > d] = Phi_bar(d / (sqrt(2) sigma)).
  q, sigma, d = N, 2.0, 3
  votes = np.tile([[10, 10 - d]], (q, 1))
  labels = np.asarray(agg.gnmax(KEY, votes, sigma))
  p = stats.norm.sf(d / (np.sqrt(2) * sigma))
  assert _within((labels == 1).mean(), p, q)


def test_lnmax_and_gnmax_ties_are_uniform():
  q = N
  votes = np.tile([[4, 4]], (q, 1))  # Two classes, as above: no new compilation.
  for labels in (agg.lnmax(KEY, votes, 1.0), agg.gnmax(KEY, votes, 1.0)):
    freq = np.bincount(np.asarray(labels), minlength=2) / q
    assert all(_within(f, 1 / 2, q) for f in freq)


def test_confident_gnmax_answer_rate_and_label_distribution():
  # Pr[answered] = Phi_bar((T - max_j n_j) / sigma_T); given answered, the label
  # is GNMax with independent noise: Pr[minority] = Phi_bar(d / (sqrt(2) sigma)).
  q, threshold, sigma_t, sigma, d = N, 11.0, 2.0, 3.0, 4
  votes = np.tile([[10, 10 - d]], (q, 1))
  labels, answered = agg.confident_gnmax(KEY, votes, threshold, sigma_t, sigma)
  labels, answered = np.asarray(labels), np.asarray(answered)
  p_ans = stats.norm.sf((threshold - 10) / sigma_t)
  assert _within(answered.mean(), p_ans, q)
  assert np.all(labels[~answered] == agg.NOT_ANSWERED)
  p_flip = stats.norm.sf(d / (np.sqrt(2) * sigma))
  assert _within((labels[answered] == 1).mean(), p_flip, answered.sum())


def test_small_noise_returns_plurality():
  votes = _random_votes(1, Q, C, 50)
  # Make the plurality unique with a gap >= 2 so tiny noise cannot flip it.
  top = votes.argmax(1)
  votes[np.arange(Q), top] += 2
  want = np.asarray(agg.plurality(votes))
  np.testing.assert_array_equal(want, votes.argmax(1))
  np.testing.assert_array_equal(agg.lnmax(KEY, votes, 1e3), want)
  np.testing.assert_array_equal(agg.gnmax(KEY, votes, 1e-3), want)
  labels, answered = agg.confident_gnmax(KEY, votes, 0.0, 1e-3, 1e-3)
  assert np.all(answered)
  np.testing.assert_array_equal(labels, want)
  unanimous = np.zeros((Q, C), np.int32)
  unanimous[:, 2] = 50
  np.testing.assert_array_equal(agg.lnmax(KEY, unanimous, 2.0), [2] * Q)


def test_plurality_breaks_ties_to_first_class():
  np.testing.assert_array_equal(agg.plurality([[3, 3, 1], [0, 2, 2]]), [0, 1])


# --- Shapes, determinism, invariances ---------------------------------------------------


@pytest.mark.parametrize("name", ["lnmax", "gnmax", "confident_gnmax"])
def test_shape_dtype_and_determinism(name):
  votes = _random_votes(2, Q, C, 20)
  fns = {
      "lnmax": lambda k: agg.lnmax(k, votes, 0.1),
      "gnmax": lambda k: agg.gnmax(k, votes, 5.0),
      "confident_gnmax": lambda k: agg.confident_gnmax(k, votes, 8.0, 3.0, 5.0),
  }
  a, b, c = fns[name](KEY), fns[name](KEY), fns[name](jax.random.key(1))
  la, lc = (a[0], c[0]) if name == "confident_gnmax" else (a, c)
  assert la.shape == (Q,) and la.dtype == jnp.int32
  if name == "confident_gnmax":
    assert a[1].shape == (Q,) and a[1].dtype == jnp.bool_
  jax.tree.map(np.testing.assert_array_equal, a, b)
  assert not np.array_equal(la, lc)  # 64 noisy answers at this noise level differ.


@pytest.mark.parametrize("name", ["lnmax", "gnmax", "confident_gnmax"])
def test_answers_do_not_depend_on_batch(name):
  votes = _random_votes(3, Q, C, 12)
  ids = np.arange(Q, dtype=np.uint32) * 7919 + 3

  def run(v, i):
    if name == "lnmax":
      return np.asarray(agg.lnmax(KEY, v, 0.3, query_ids=i))
    if name == "gnmax":
      return np.asarray(agg.gnmax(KEY, v, 2.0, query_ids=i))
    return np.asarray(agg.confident_gnmax(KEY, v, 6.0, 2.0, 2.0, query_ids=i)[0])

  full = run(votes, ids)
  # Ask the second half first, in a batch of half the size.
  np.testing.assert_array_equal(run(votes[Q // 2:], ids[Q // 2:]), full[Q // 2:])
  np.testing.assert_array_equal(run(votes[:Q // 2], ids[:Q // 2]), full[:Q // 2])
  # Permuting queries (with their ids) permutes the answers.
  perm = np.random.default_rng(0).permutation(Q)
  np.testing.assert_array_equal(run(votes[perm], ids[perm]), full[perm])


def test_default_ids_are_arange_and_one_word_ids_match_vectors():
  votes = _random_votes(4, Q, C, 9)
  a = agg.lnmax(KEY, votes, 0.2)
  np.testing.assert_array_equal(a, agg.lnmax(KEY, votes, 0.2, np.arange(Q)))
  np.testing.assert_array_equal(a, agg.lnmax(KEY, votes, 0.2, np.arange(Q)[:, None]))
  # The second word of a two-word id changes the noise.
  two = np.stack([np.arange(Q), np.full(Q, 5)], 1)
  assert not np.array_equal(a, agg.lnmax(KEY, votes, 0.2, two))


def test_noise_key_is_fold_in_of_query_id():
  votes = _random_votes(5, Q, C, 6)
  ids = 123 + np.arange(Q)
  got = agg.lnmax(KEY, votes, 0.7, ids)
  for i in (0, Q - 1):
    k = jax.random.fold_in(KEY, ids[i])
    with jax.enable_x64(True):  # the answers' noise is float64
      want = jnp.argmax(votes[i] + jax.random.laplace(k, (C,), jnp.float64) / 0.7)
    assert int(got[i]) == int(want)


def test_works_under_jit_and_with_raw_keys():
  votes = _random_votes(5, Q, C, 10)
  # Inside a caller's jit and vmap (over gamma), as the experiments use it: traced in
  # 64-bit mode, as the float64 noise needs (refused otherwise, not drawn in float32).
  jitted = jax.jit(jax.vmap(lambda k, v, g: agg.lnmax(k, v, g), in_axes=(None, None, 0)))
  with pytest.raises(ValueError, match="float64 noise.*jax.enable_x64"):
    jitted(KEY, votes, jnp.array([0.4, 3.0]))
  with jax.enable_x64(True):
    got = jitted(KEY, votes, jnp.array([0.4, 3.0]))
  np.testing.assert_array_equal(got[0], agg.lnmax(KEY, votes, 0.4))
  np.testing.assert_array_equal(got[1], agg.lnmax(KEY, votes, 3.0))
  raw = jax.random.PRNGKey(0)  # A raw uint32 key gives the answers of its typed key.
  np.testing.assert_array_equal(agg.lnmax(raw, votes, 0.4),
                                agg.lnmax(jax.random.wrap_key_data(raw), votes, 0.4))


def test_x64_mode_gives_the_same_answers():
  votes = _random_votes(6, Q, C, 10)
  want = agg.gnmax(KEY, votes, 2.0)
  with jax.enable_x64(True):
    got = agg.gnmax(KEY, votes, 2.0)
  np.testing.assert_array_equal(got, want)


# --- Consistent answers -------------------------------------------------------------------


def test_hash_query_ids_is_stable_blake2b():
  x = np.arange(12, dtype=np.uint8).reshape(2, 6)
  ids = agg.hash_query_ids(x)
  assert ids.shape == (2, 2) and ids.dtype == np.uint32
  digest = hashlib.blake2b(b"|u1|(6,)|" + bytes(range(6)), digest_size=8,
                           person=b"pate_jax.qid").digest()
  np.testing.assert_array_equal(ids[0], np.frombuffer(digest, "<u4"))
  assert agg.hash_query_ids(x, words=1).shape == (2, 1)
  # Dtype is part of the id; big-endian input hashes like little-endian.
  assert not np.array_equal(agg.hash_query_ids(x.astype(np.int32)), ids)
  np.testing.assert_array_equal(agg.hash_query_ids(x.astype(">i4")),
                                agg.hash_query_ids(x.astype("<i4")))


def test_repeated_inputs_get_the_same_label():
  rng = np.random.default_rng(7)
  inputs = rng.integers(0, 255, size=(Q, 4, 4), dtype=np.uint8)
  votes = np.full((Q, C), 5)  # Ties: every answer is pure noise.
  first = np.asarray(agg.lnmax(KEY, votes, 0.5, agg.hash_query_ids(inputs)))
  # Ask a shuffled batch with repeats.
  order = rng.integers(0, Q, size=Q)
  again = np.asarray(agg.lnmax(KEY, votes[order], 0.5, agg.hash_query_ids(inputs[order])))
  np.testing.assert_array_equal(again, first[order])
  assert len(set(agg.hash_query_ids(inputs)[:, 0])) == Q


# --- Vectorised ablations -----------------------------------------------------------------


@pytest.mark.parametrize("mechanism", ["lnmax", "gnmax"])
def test_accuracy_grid_equals_loop(mechanism):
  votes = _random_votes(8, Q, C, 15)
  labels = np.random.default_rng(8).integers(0, C, size=Q)
  scales = [0.05, 0.3, 2.0] if mechanism == "lnmax" else [0.5, 3.0, 20.0]
  grid = np.asarray(agg.label_accuracy_grid(KEY, votes, labels, mechanism, scales, 3))
  assert grid.shape == (3, 3)
  fn = agg.lnmax if mechanism == "lnmax" else agg.gnmax
  loop = np.array([[np.mean(np.asarray(fn(jax.random.fold_in(KEY, r), votes, s)) == labels)
                    for r in range(3)] for s in scales])
  np.testing.assert_allclose(grid, loop, rtol=0, atol=1e-6)


def test_accuracy_grid_limits():
  votes = _random_votes(9, Q, C, 30)
  votes[np.arange(Q), votes.argmax(1)] += 3
  labels = votes.argmax(1)
  labels[:Q // 4] = (labels[:Q // 4] + 1) % C  # Plurality accuracy is exactly 0.75.
  grid = np.asarray(agg.label_accuracy_grid(KEY, votes, labels, "lnmax", [1e-4, 1e3], 3))
  np.testing.assert_allclose(grid[1], 0.75)
  # Noise of scale 10^4 on 33 votes: near chance (0.1); 0.5 is > 5 standard errors away.
  assert grid[0].mean() < 0.5


# --- Bad input ----------------------------------------------------------------------------


@pytest.mark.parametrize("votes, match", [
    ([[1, -1]], "votes must be non-negative"),
    ([[1.0, np.nan]], "votes must be finite"),
    ([[1.5, 0.5]], "votes must hold integer"),
    ([[3], [3]], "at least 2 classes"),
    (np.zeros((0, 3)), "at least one query"),
    ([1, 2, 3], r"shape \[Q, C\]"),
])
def test_bad_votes(votes, match):
  with pytest.raises(ValueError, match=match):
    agg.lnmax(KEY, votes, 0.1)
  with pytest.raises(ValueError, match=match):
    agg.plurality(votes)


@pytest.mark.parametrize("call, match", [
    (lambda v: agg.lnmax(KEY, v, 0.0), "gamma"),
    (lambda v: agg.lnmax(KEY, v, -1.0), "gamma"),
    (lambda v: agg.gnmax(KEY, v, 0.0), "sigma"),
    (lambda v: agg.gnmax(KEY, v, float("nan")), "sigma"),
    (lambda v: agg.confident_gnmax(KEY, v, 3.0, 0.0, 1.0), "sigma_threshold"),
    (lambda v: agg.confident_gnmax(KEY, v, 3.0, 1.0, -2.0), "sigma"),
    (lambda v: agg.confident_gnmax(KEY, v, float("inf"), 1.0, 1.0), "threshold"),
    (lambda v: agg.confident_gnmax(KEY, v + np.array([[1, 0], [0, 0]]), 3.0, 1.0, 1.0),
     "every row must sum"),
    (lambda v: agg.lnmax(KEY, v, 0.1, query_ids=[0]), "query_ids"),
    (lambda v: agg.lnmax(KEY, v, 0.1, query_ids=[0, -1]), "query_ids"),
    (lambda v: agg.lnmax(KEY, v, 0.1, query_ids=[0.5, 1.0]), "query_ids"),
    (lambda v: agg.label_accuracy_grid(KEY, v, [0, 1], "lnmax", [0.0], 1), "noise_scales"),
    (lambda v: agg.label_accuracy_grid(KEY, v, [0, 5], "lnmax", [1.0], 1), "labels"),
    (lambda v: agg.label_accuracy_grid(KEY, v, [0, 1], "foo", [1.0], 1), "mechanism"),
    (lambda v: agg.label_accuracy_grid(KEY, v, [0, 1], "gnmax", [1.0], 0), "num_seeds"),
    (lambda v: agg.hash_query_ids(v, words=0), "words"),
])
def test_bad_arguments(call, match):
  with pytest.raises(ValueError, match=match):
    call(np.array([[3, 1], [2, 2]]))


# --- experiments/plot_aggregation.py (Figure 2, pate_jax.stages.figures) smoke test --------


def _load_by_path(*parts):
  """Imports a config or experiment script of this repository by path."""
  return experiment.load_script(pathlib.Path(__file__).resolve().parent.parent.joinpath(*parts))


def test_figure2_on_synthetic_ensembles(tmp_path):
  import json

  from pate_jax import votes as votes_lib
  rng = np.random.default_rng(12)
  y = rng.integers(0, C, size=Q)
  workdirs = []
  for n in (10, 100, 250):  # Each teacher is right with probability 0.6 + 0.04.
    p = np.full((Q, C), 0.4 / C)
    p[np.arange(Q), y] += 0.6
    votes = np.stack([rng.multinomial(n, pi) for pi in p])
    votes_lib.save_votes(tmp_path / f"n{n}" / "votes.npz", votes, y, num_pool=Q // 2,
                         dataset="synthetic")
    workdirs.append(str(tmp_path / f"n{n}"))
  from pate_jax.stages import figures as plot  # pylint: disable=g-import-not-at-top
  # Grid shape (3 scales, 3 seeds, [Q, C]) as in test_accuracy_grid_equals_loop.
  res = plot.make_figure(workdirs, tmp_path / "fig", num_points=3, num_seeds=3)
  assert (tmp_path / "fig" / "figure2.png").stat().st_size > 0
  record = json.loads((tmp_path / "fig" / "figure2.json").read_text())["results"]
  np.testing.assert_allclose(record["epsilon"], [0.01, 0.1, 1.0])
  np.testing.assert_allclose(record["gamma"], [0.005, 0.05, 0.5])
  curves = {c["num_teachers"]: np.array(c["accuracy_mean"]) for c in record["curves"]}
  assert sorted(curves) == [10, 100, 250]
  assert all(np.all((a >= 0) & (a <= 1)) for a in curves.values())
  # More teachers tolerate more noise (the paper's point); at eps = 0.1 (Laplace
  # scale 20) 10 teachers are near chance, 250 near their plurality accuracy.
  assert curves[250][1] > curves[100][1] > curves[10][1]
  assert curves[10][1] < 0.4 < 0.9 < curves[250][1]
  assert res["curves"][2]["plurality_accuracy"] == 1.0
  # The 2017 axis (gamma = eps): the same gammas give the same accuracies.
  res = plot.make_figure(workdirs[:1], tmp_path / "fig_paper", num_points=3, num_seeds=3,
                         eps_min=0.005, eps_max=0.5, epsilon_convention="paper")
  np.testing.assert_allclose(res["gamma"], record["gamma"])
  np.testing.assert_allclose(res["curves"][0]["accuracy_mean"], curves[10])
  with pytest.raises(ValueError, match="eps_min"):
    plot.make_figure(workdirs, tmp_path / "bad", eps_min=1.0, eps_max=0.1)


def test_figure_scripts_run_from_their_configs(tmp_path):
  """plot_aggregation.py and plot_gap.py read their runs from a comma-separated config field."""
  import json

  from pate_jax import votes as votes_lib
  rng = np.random.default_rng(13)
  y = rng.integers(0, C, size=Q)
  workdirs = []
  for n in (5, 50):
    votes = np.stack([rng.multinomial(n, np.eye(C)[c] * 0.5 + 0.05) for c in y])
    votes_lib.save_votes(tmp_path / f"n{n}" / "votes.npz", votes, y, num_pool=Q // 2)
    workdirs.append(str(tmp_path / f"n{n}"))
  config = _load_by_path("configs", "plot_aggregation.py").get_config("paper")
  config.runs, config.num_points, config.num_seeds, config.rows = ",".join(workdirs), 2, 2, "eval"
  plot = _load_by_path("experiments", "plot_aggregation.py")
  from pate_jax.stages import figures  # pylint: disable=g-import-not-at-top
  res = plot.run(config, tmp_path / "fig2")
  direct = figures.make_figure(workdirs, tmp_path / "direct", num_points=2, num_seeds=2,
                               rows="eval", epsilon_convention="paper")
  np.testing.assert_array_equal(res["curves"][1]["accuracy_mean"],
                                direct["curves"][1]["accuracy_mean"])
  assert res["curves"][0]["num_queries"] == Q - Q // 2
  assert (tmp_path / "fig2" / "figure2.png").stat().st_size > 0
  gap = _load_by_path("experiments", "plot_gap.py")
  config = _load_by_path("configs", "plot_gap.py").get_config()
  config.runs = ",".join(reversed(workdirs))
  rows = gap.run(config, tmp_path / "fig3")["figure3"]
  assert [r["num_teachers"] for r in rows] == [5, 50]
  assert (tmp_path / "fig3" / "figure3.png").stat().st_size > 0
  record = json.loads((tmp_path / "fig3" / "results.json").read_text())
  assert record["results"]["figure3"][1]["mean_normalized_gap"] == rows[1]["mean_normalized_gap"]
  config.runs = ""
  with pytest.raises(ValueError, match="config.runs"):
    gap.run(config, tmp_path / "none")


@pytest.mark.parametrize("runs, error, match", [
    ("{missing}", FileNotFoundError, r"^config.runs\[0\]: no votes file at .*missing"),
    ("{tmp},{missing}", FileNotFoundError, r"^config.runs\[1\]: no votes file at .*missing"),
    ("{tmp},{corrupt}", ValueError, r"^config.runs\[1\]: "),
])
def test_plot_gap_names_the_run_it_cannot_read(tmp_path, runs, error, match):
  """A run without votes (or with a corrupted file) failed naming the path alone; refused
  as config.runs[i], with the reason, before anything is written."""
  from pate_jax import votes as votes_lib  # pylint: disable=g-import-not-at-top
  y = np.arange(Q) % C
  votes_lib.save_votes(tmp_path / "ok" / "votes.npz", np.eye(C, dtype=np.int32)[y] * 5, y,
                       num_pool=Q // 2)
  (tmp_path / "corrupt").mkdir()
  (tmp_path / "corrupt" / "votes.npz").write_bytes(b"not a zip file")
  gap = _load_by_path("experiments", "plot_gap.py")
  config = _load_by_path("configs", "plot_gap.py").get_config()
  config.runs = runs.format(tmp=tmp_path / "ok", missing=tmp_path / "missing",
                            corrupt=tmp_path / "corrupt")
  with pytest.raises(error, match=match):
    gap.run(config, tmp_path / "fig3")
  assert not (tmp_path / "fig3").exists()
