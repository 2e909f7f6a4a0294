"""pate_jax.rng: the streams of all stages are disjoint, and every stage uses them."""

from __future__ import annotations

import itertools
import pathlib
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.stats

from pate_jax import discrete_gaussian, mechanisms, rng
from tests._scripts import run_result

REPO = pathlib.Path(__file__).resolve().parent.parent
NUM_CHILDREN = 10_000  # teachers (split(k, T)[t] == fold_in(k, t)) and query ids (MNIST test set)
NUM_OUTER, NUM_INNER = 64, 256  # fold_in(fold_in(k, t), step): per-teacher steps, per-query noise


def _words(keys: jax.Array) -> np.ndarray:
  """One uint64 per key (its two threefry words), for set operations."""
  data = np.asarray(jax.random.key_data(keys), np.uint32).reshape(-1, 2)
  return (data[:, 0].astype(np.uint64) << np.uint64(32)) | data[:, 1].astype(np.uint64)


def _children(key: jax.Array, num: int) -> jax.Array:
  return jax.vmap(lambda i: jax.random.fold_in(key, i))(jnp.arange(num, dtype=jnp.uint32))


def _derived(key: jax.Array) -> np.ndarray:
  """The keys the code derives from a stream key, as uint64, deduplicated.

  The stream key itself; ``fold_in(k, i)`` for ``i < NUM_CHILDREN`` (equal to
  ``split(k, T)[i]``: teachers, queries, Monte Carlo repetitions); and
  ``fold_in(fold_in(k, t), s)`` (teacher ``t``'s step ``s``; the two noises of a
  Confident-GNMax query, ``split(fold_in(k, id))``).
  """
  kids = _children(key, NUM_CHILDREN)
  grand = jax.vmap(lambda k: _children(k, NUM_INNER))(kids[:NUM_OUTER])
  return np.unique(np.concatenate([_words(key), _words(kids), _words(grand)]))


def _collisions(root: jax.Array, stream_fn, names) -> list[tuple[str, str]]:
  """Pairs of streams (or ``"<root>"``) whose derived keys share a key.

  ``"<root>"`` stands for the root key and its children ``split(root, n)``: what
  a library call handed the root itself draws (``jax.random.permutation(key(0))``
  in ``pate_jax.data.student_split``, whose fixed seed is the default run seed).
  """
  sets = {"<root>": np.unique(np.concatenate([_words(root),
                                              _words(_children(root, NUM_CHILDREN))]))}
  sets.update({n: _derived(stream_fn(root, n)) for n in names})
  return [(a, b) for a, b in itertools.combinations(sets, 2)
          if np.intersect1d(sets[a], sets[b], assume_unique=True).size]


@pytest.mark.parametrize("seed", [0, 1, 2**32 - 1])
def test_streams_of_all_stages_are_disjoint(seed):
  assert _collisions(rng.root_key(seed), rng.stream, rng.STREAMS) == []


def test_a_shared_stream_id_is_caught():
  """The check above fails when two names share an id (here: aggregation = teacher_init)."""
  shared = dict(rng.STREAMS, aggregation=rng.STREAMS["teacher_init"])
  broken = lambda root, name: jax.random.fold_in(root, rng.STREAMS_BASE + shared[name])
  assert _collisions(rng.root_key(0), broken, shared) == [("teacher_init", "aggregation")]
  # The old scheme: small ids collide with what a call handed the root draws.
  small = lambda root, name: jax.random.fold_in(root, rng.STREAMS[name])
  assert ("<root>", "partition") in _collisions(rng.root_key(0), small, ["partition"])


def test_teacher_init_keys_are_not_query_noise_keys():
  """A former defect: split(fold_in(root, 1), T)[t] was the noise key of query t."""
  root = rng.root_key(0)
  init = _words(jax.random.split(rng.stream(root, "teacher_init"), 250))
  noise = _words(_children(rng.stream(root, "aggregation"), 250))
  assert np.intersect1d(init, noise).size == 0
  old = jax.random.fold_in(root, 1)  # both stages' stream before the fix
  np.testing.assert_array_equal(_words(jax.random.split(old, 250)), _words(_children(old, 250)))


def test_table_ids_are_distinct_uint32():
  ids = [rng.stream_id(n) for n in rng.STREAMS]
  assert len(set(ids)) == len(ids)
  assert all(rng.STREAMS_BASE <= i < 2**32 for i in ids)


def test_stream_is_fold_in_and_works_under_jit():
  root = rng.root_key(3)
  expected = jax.random.fold_in(root, rng.STREAMS_BASE + rng.STREAMS["aggregation"])
  np.testing.assert_array_equal(_words(rng.stream(root, "aggregation")), _words(expected))
  jitted = jax.jit(rng.stream, static_argnums=1)(root, "aggregation")
  np.testing.assert_array_equal(_words(jitted), _words(expected))


@pytest.mark.parametrize("call, match", [
    (lambda: rng.stream(rng.root_key(0), "noise"), "unknown PRNG stream 'noise'"),
    (lambda: rng.root_key(-1), "seed"),
    (lambda: rng.root_key(2**32), "seed"),
    (lambda: rng.root_key(1.5), "seed"),
    (lambda: rng.root_key(True), "seed"),
])
def test_bad_input_raises(call, match):
  with pytest.raises(ValueError, match=match):
    call()


def test_every_stage_takes_its_keys_from_the_table():
  """No script or library module keeps its own stream ids or roots a key on config.seed."""
  own_ids = re.compile(r"\b_?STREAM_[A-Z_]+\s*[,=]")
  own_root = re.compile(r"random\.(?:PRNG)?[kK]ey\(\s*config\.seed")
  offenders = []
  for path in sorted([*REPO.glob("experiments/*.py"), *REPO.glob("pate_jax/**/*.py")]):
    if path.name == "rng.py":
      continue
    text = path.read_text()
    offenders += [f"{path.relative_to(REPO)}: {m.group(0)}"
                  for pat in (own_ids, own_root) for m in pat.finditer(text)]
  assert offenders == []


def test_kd_gan_draws_from_its_own_streams():
  """The KD-GAN stage folds only its own streams into the root, not the main
  job's student / baseline streams; its sound release's noise is the private noise key."""
  text = (REPO / "pate_jax" / "stages" / "kd_gan.py").read_text()
  used = set(re.findall(r'rng\.stream\(\s*\w+\s*,\s*"(\w+)"\s*\)', text))
  assert used == {"kd_gan_train", "kd_gan_data", "kd_gan_teacher"}
  assert set(re.findall(r'rng\.noise_key\(\s*"(\w+)"', text)) == {"aggregation"}
  assert "rng.stream(" not in (REPO / "experiments" / "train_kd_gan.py").read_text()


_HOST_SCRIPT = r"""
import json, jax, numpy as np
from pate_jax import data, rng
jax.config.update("jax_default_device", jax.devices()[1])  # not where the host computes
seen, permutation = [], jax.random.permutation
def spy(key, n, *args, **kwargs):
  seen.append(sorted(str(d) for d in key.devices()))
  return permutation(key, n, *args, **kwargs)
jax.random.permutation = spy
key = rng.stream(rng.root_key(3), "partition")
part = data.partition_indices(key, 1_000, 7)
split = data.student_split("mnist", 10_000)
print("RESULT" + json.dumps({"seen": seen, "host": str(jax.local_devices(backend="cpu")[0]),
                             "default": str(jax.devices()[1]),
                             "index": part.index.ravel().tolist(),
                             "pool": split.pool_index[:50].tolist()}))
"""


def test_the_partition_and_student_split_are_drawn_on_the_host():
  # Another default device (two host devices): both permutations ran on the host's CPU
  # device all the same, and drew what the default device draws.
  out = run_result(_HOST_SCRIPT, XLA_FLAGS="--xla_force_host_platform_device_count=2")
  assert out["seen"] == [[out["host"]], [out["host"]]] and out["host"] != out["default"]
  key = rng.stream(rng.root_key(3), "partition")
  want = np.asarray(jax.random.permutation(key, 1_000))[:994]
  np.testing.assert_array_equal(out["index"], want)
  np.testing.assert_array_equal(
      out["pool"], np.asarray(jax.random.permutation(jax.random.key(0), 10_000))[:50])


@pytest.mark.parametrize("key", [7, jax.random.key(7), jax.random.PRNGKey(7)])
def test_host_permutation_is_the_permutation_of_its_key(key):
  want = np.asarray(jax.random.permutation(jax.random.key(7), 500))
  got = rng.host_permutation(key, 500)  # an int seed, a typed key, a raw uint32 key
  assert isinstance(got, np.ndarray)
  np.testing.assert_array_equal(got, want)


# --- Secret keys: 128 bits, two threefry keys whose bit streams are XORed ----------------

SECRET_WORDS = np.array([0x243F6A88, 0x85A308D3, 0x13198A2E, 0x03707344], np.uint32)
"""A fixed secret-impl key's words (drawn by no run: the tests' keys must be repeatable)."""


def _secret(words: np.ndarray = SECRET_WORDS) -> jax.Array:
  return jax.random.wrap_key_data(np.asarray(words, np.uint32), impl=rng.SECRET_IMPL)


def _halves(words: np.ndarray = SECRET_WORDS) -> tuple[jax.Array, jax.Array]:
  """The two threefry keys of a secret key's words."""
  return tuple(jax.random.wrap_key_data(np.asarray(words[i:i + 2], np.uint32),
                                        impl="threefry2x32") for i in (0, 2))


def test_secret_key_reads_128_bits_of_urandom(monkeypatch):
  asked = []

  def urandom(n):
    asked.append(n)
    return bytes(range(1, n + 1))

  monkeypatch.setattr(rng.os, "urandom", urandom)
  key = rng.secret_key()
  assert asked == [16]
  assert key.shape == () and key.dtype == rng.SECRET_KEY_DTYPE
  words = np.asarray(jax.random.key_data(key))
  assert words.dtype == np.uint32 and words.shape == (4,)
  np.testing.assert_array_equal(words, np.frombuffer(bytes(range(1, 17)), "<u4"))
  # Secret noise is such a key; a research seed's stays threefry's (seeded results unchanged).
  assert rng.noise_key("aggregation").dtype == rng.SECRET_KEY_DTYPE and asked == [16, 16]
  threefry = jax.random.key_dtype("threefry2x32")
  assert rng.noise_key("aggregation", 3).dtype == threefry
  np.testing.assert_array_equal(jax.random.key_data(rng.noise_key("aggregation", 3)),
                                jax.random.key_data(rng.stream(jax.random.key(3),
                                                               "aggregation")))
  assert rng.noise_key_spec().dtype == rng.SECRET_KEY_DTYPE
  assert rng.noise_key_spec(3).dtype == threefry and rng.noise_key_spec(3).shape == ()
  assert asked == [16, 16]  # a spec reads nothing


@pytest.mark.parametrize("dtype", [jnp.uint8, jnp.uint16, jnp.uint32, jnp.uint64])
def test_secret_bits_are_the_xor_of_the_two_halves_threefry_bits(dtype):
  h1, h2 = _halves()
  with jax.enable_x64(True):  # uint64 bits (the float64 noise's width)
    got = jax.jit(lambda k: jax.random.bits(k, (5, 3), dtype))(_secret())
    one, two = (jax.random.bits(h, (5, 3), dtype) for h in (h1, h2))
  assert got.dtype == dtype and got.shape == (5, 3)
  np.testing.assert_array_equal(got, one ^ two)
  assert not np.array_equal(got, one) and not np.array_equal(got, two)


@jax.jit
def _jax_noises(key: jax.Array) -> dict[str, jax.Array]:
  """The three mechanisms' answers to tied votes (the noise alone decides them) and the
  release's normal, drawn from ``key`` in one program (one compile per key type, not one
  per operation of an eager call)."""
  votes = jnp.zeros((64, 10), jnp.int32)
  ids = jnp.arange(64, dtype=jnp.uint32)
  params = {"lnmax": {"gamma": 1.0}, "gnmax": {"sigma": 1.0},
            "confident_gnmax": {"threshold": 0.0, "sigma_threshold": 1.0, "sigma": 1.0}}
  out = {name: mechanisms.get(name).answer(key, votes, ids, p)[0]
         for name, p in params.items()}
  out["release normal"] = jax.random.normal(key, (), jnp.float64)
  return out


def _private_noises(key: jax.Array) -> dict[str, np.ndarray]:
  """What the private releases draw from ``key``: the three mechanisms' answers (to tied
  votes, so the noise alone decides them), the release's normal, the discrete Gaussian."""
  with jax.enable_x64(True):
    out = {name: np.asarray(value) for name, value in _jax_noises(key).items()}
  out["discrete gaussian"] = discrete_gaussian.sample(key, np.arange(4), 8, 10_000)
  return out


def test_both_halves_of_a_secret_key_set_the_noise():
  """Changing only the second half (or only the first) changes every private noise: a
  search over one half's 2^64 keys cannot find it. Nor is it either half's threefry noise."""
  base = _private_noises(_secret())
  others = [_private_noises(_secret(SECRET_WORDS ^ np.array(flip, np.uint32)))
            for flip in ([0, 0, 0, 1], [0, 0, 1 << 31, 0], [1, 0, 0, 0])]
  others += [_private_noises(h) for h in _halves()]
  for name, value in base.items():
    for other in others:
      assert not np.array_equal(value, other[name]), name


def test_split_and_fold_in_of_a_secret_key_keep_its_128_bits():
  """Keys derived from a secret key (per-query ``fold_in``, Confident-GNMax's ``split``) are
  secret keys, 4 words each, other for each index: threefry's split / fold_in of each half."""
  key, (h1, h2) = _secret(), _halves()
  n = 8
  fold = lambda k: jax.vmap(lambda i: jax.random.fold_in(k, i))(jnp.arange(n, dtype=jnp.uint32))
  for derive in (lambda k: jax.random.split(k, n), fold,
                 lambda k: mechanisms.query_keys(k, jnp.arange(n, dtype=jnp.uint32))):
    derived = jax.jit(derive)(key)
    assert derived.dtype == rng.SECRET_KEY_DTYPE
    data = np.asarray(jax.random.key_data(derived))
    assert data.shape == (n, 4) and len({tuple(row) for row in data}) == n
    np.testing.assert_array_equal(data[:, :2], jax.random.key_data(derive(h1)))
    np.testing.assert_array_equal(data[:, 2:], jax.random.key_data(derive(h2)))
  nested = jax.random.split(jax.random.fold_in(key, 5))
  assert jax.random.key_data(nested).shape == (2, 4)


@pytest.mark.parametrize("sampler,dist", [(jax.random.normal, "norm"),
                                          (jax.random.laplace, "laplace")])
def test_a_secret_key_draws_the_samplers_distribution(sampler, dist):
  """KS test at n = 1e5 of the float64 normal / Laplace of a fixed secret key (fixed: the
  verdict cannot change between runs), with a test that would see a wrong distribution."""
  with jax.enable_x64(True):
    x = np.asarray(sampler(_secret(), (100_000,), jnp.float64))
  assert scipy.stats.kstest(x, dist).pvalue > 1e-3
  wrong = "laplace" if dist == "norm" else "norm"
  assert scipy.stats.kstest(x, wrong).pvalue < 1e-9  # the test has the power to see it


def test_host_permutation_of_a_secret_key_keeps_its_impl():
  """Its words pass through host memory and are rewrapped with the key's implementation."""
  np.testing.assert_array_equal(rng.host_permutation(_secret(), 500),
                                np.asarray(jax.random.permutation(_secret(), 500)))
