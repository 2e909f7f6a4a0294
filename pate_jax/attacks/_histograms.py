"""The 30 vote histograms of the histogram-leakage paper's Table 1 (as data).

Transcribed by hand from the paper's text, Appendix C, Table 1 ("The 30 MNIST
and SVHN vote histograms sampled from the collection of histograms provided by
Papernot et al. [1] (divided into 3 equally-sized consensus groups)"),
../shared/papers/pate-histogram-leakage-attack.txt. Each histogram counts the
votes of 250 teachers over 10 classes; every row sums to 250 (checked by the
tests). The paper's figures name them L1-5 / M1-5 / H1-5 (low, medium -- the
paper writes "median" -- and high consensus), where consensus is the top count.
"""

from __future__ import annotations

import functools

import numpy as np

NUM_TEACHERS = 250
NUM_CLASSES = 10
DATASETS = ("mnist", "svhn")
GROUPS = ("low", "medium", "high")

_TABLE1 = {
    ("mnist", "high"): [
        [4, 7, 6, 8, 4, 2, 0, 214, 4, 1],
        [4, 7, 207, 10, 4, 4, 0, 10, 3, 1],
        [5, 205, 7, 8, 4, 3, 0, 11, 6, 1],
        [4, 7, 6, 7, 4, 200, 4, 10, 7, 1],
        [4, 7, 210, 7, 4, 4, 0, 10, 3, 1],
    ],
    ("svhn", "high"): [
        [0, 0, 0, 0, 250, 0, 0, 0, 0, 0],
        [0, 0, 250, 0, 0, 0, 0, 0, 0, 0],
        [0, 0, 0, 250, 0, 0, 0, 0, 0, 0],
        [0, 250, 0, 0, 0, 0, 0, 0, 0, 0],
        [0, 0, 0, 0, 0, 0, 250, 0, 0, 0],
    ],
    ("mnist", "medium"): [
        [5, 183, 9, 16, 4, 3, 1, 10, 17, 2],
        [6, 7, 6, 30, 4, 181, 0, 10, 5, 1],
        [4, 7, 6, 10, 13, 4, 0, 17, 3, 186],
        [6, 18, 184, 7, 10, 4, 7, 10, 3, 1],
        [7, 7, 8, 7, 4, 9, 193, 10, 4, 1],
    ],
    ("svhn", "medium"): [
        [0, 0, 1, 0, 249, 0, 0, 0, 0, 0],
        [0, 10, 1, 232, 1, 3, 0, 1, 0, 2],
        [0, 0, 0, 6, 0, 243, 0, 0, 0, 1],
        [236, 0, 0, 7, 0, 0, 6, 0, 1, 0],
        [234, 2, 0, 4, 0, 0, 0, 1, 9, 0],
    ],
    ("mnist", "low"): [
        [12, 7, 6, 30, 4, 161, 0, 10, 19, 1],
        [4, 8, 7, 11, 38, 16, 1, 13, 8, 144],
        [4, 7, 15, 33, 6, 5, 0, 171, 5, 4],
        [4, 7, 117, 99, 4, 4, 0, 10, 4, 1],
        [4, 17, 6, 11, 154, 4, 0, 11, 5, 38],
    ],
    ("svhn", "low"): [
        [1, 1, 20, 12, 0, 0, 2, 207, 7, 0],
        [0, 158, 1, 6, 4, 38, 0, 40, 1, 2],
        [0, 184, 0, 2, 3, 0, 0, 61, 0, 0],
        [0, 0, 24, 0, 0, 0, 0, 0, 0, 226],
        [10, 1, 2, 19, 7, 109, 73, 0, 19, 10],
    ],
}


def table1_histograms(dataset: str | None = None) -> tuple[np.ndarray, list[str]]:
  """Table 1's histograms and their names.

  Args:
    dataset: ``"mnist"``, ``"svhn"`` or ``None`` for both (MNIST first).

  Returns:
    ``(histograms int32 [B, 10], names)`` with ``B = 15`` per dataset, ordered
    low L1-L5, medium M1-M5, high H1-H5; names like ``"mnist/M3"``.
  """
  if dataset is not None and dataset not in DATASETS:
    raise ValueError(f"dataset must be one of {DATASETS} or None, got {dataset!r}")
  rows, names = [], []
  for ds in DATASETS if dataset is None else (dataset,):
    for group in GROUPS:
      for i, row in enumerate(_TABLE1[(ds, group)]):
        rows.append(row)
        names.append(f"{ds}/{group[0].upper()}{i + 1}")
  return np.asarray(rows, dtype=np.int32), names


def table1_histogram(name: str) -> np.ndarray:
  """One histogram by name, e.g. ``table1_histogram("svhn/M3")`` (int32 ``[10]``)."""
  hists, names = table1_histograms()
  if name not in names:
    raise ValueError(f"name must be one of {names}, got {name!r}")
  return hists[names.index(name)]


def table1_labels(names: list[str]) -> tuple[np.ndarray, np.ndarray, list[str]]:
  """Splits Table-1 names like ``"mnist/M3"`` into their parts.

  Returns:
    ``(datasets str [B] e.g. "mnist", groups str [B] e.g. "medium", short names
    e.g. "M3")``.
  """
  by_letter = {g[0].upper(): g for g in GROUPS}
  parts = [n.split("/") for n in names]
  if any(len(p) != 2 or p[0] not in DATASETS or p[1][:1] not in by_letter for p in parts):
    raise ValueError(f"names must look like 'mnist/M3', got {names!r}")
  return (np.array([p[0] for p in parts]), np.array([by_letter[p[1][0]] for p in parts]),
          [p[1] for p in parts])


def dirichlet_histograms(key, alphas, num_per_alpha: int, *, num_teachers: int = NUM_TEACHERS,
                         num_classes: int = NUM_CLASSES) -> tuple[np.ndarray, list[str]]:
  """Fresh histograms drawn like Table 1's: ``p ~ Dirichlet(α·1)``, ``H ~ Multinomial(N, p)``.

  Small ``α`` gives near-unanimous histograms (most classes 0, like SVHN's high
  consensus rows), ``α = 1`` spread ones (the ``dirichlet`` setting's set: α in
  {0.05, 0.3, 1}, 250 votes, 10 classes).

  Args:
    key: PRNG key; concentration ``a`` (index ``i``) uses ``fold_in(key, i)``.
    alphas: concentrations ``α > 0``.
    num_per_alpha: histograms per ``α``.
    num_teachers, num_classes: ``N`` and ``C``.

  Returns:
    ``(int32 [len(alphas) · num_per_alpha, C] rows summing to N, names like
    "dirichlet0.3/7")``, grouped by ``α`` in the given order.
  """
  import jax  # pylint: disable=g-import-not-at-top
  import jax.numpy as jnp  # pylint: disable=g-import-not-at-top
  alphas = np.asarray(alphas, np.float64).reshape(-1)
  if alphas.size == 0 or np.any(~np.isfinite(alphas) | (alphas <= 0)):
    raise ValueError(f"alphas must be finite concentrations > 0, got {alphas.tolist()!r}")
  if len({f"{a:g}" for a in alphas}) != alphas.size:  # the rows' names would repeat
    raise ValueError(f"alphas must be distinct (as the names print them), got "
                     f"{alphas.tolist()!r}")
  for name, val in (("num_per_alpha", num_per_alpha), ("num_teachers", num_teachers),
                    ("num_classes", num_classes)):
    if not (isinstance(val, (int, np.integer)) and val >= (2 if name == "num_classes" else 1)):
      raise ValueError(f"{name} must be an integer >= {2 if name == 'num_classes' else 1}, "
                       f"got {val!r}")
  @functools.partial(jax.jit, static_argnums=(2, 3, 4))
  def draw(k, a, b, n, c):
    k_p, k_h = jax.random.split(k)
    p = jax.random.dirichlet(k_p, jnp.full((c,), a), (b,))
    # Multinomial(N, p): N categorical votes per histogram, counted.
    votes = jax.random.categorical(k_h, jnp.log(p)[:, None, :], axis=-1, shape=(b, n))
    return jax.nn.one_hot(votes, c, dtype=jnp.int32).sum(1)

  rows, names = [], []
  for i, a in enumerate(alphas):
    rows.append(np.asarray(draw(jax.random.fold_in(key, i), jnp.float32(a), int(num_per_alpha),
                                int(num_teachers), int(num_classes)), np.int32))
    names += [f"dirichlet{a:g}/{j}" for j in range(num_per_alpha)]
  return np.concatenate(rows), names
