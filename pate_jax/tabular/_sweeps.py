"""Noisy labels of the student pool over noise scales and draws, and the sweeps built on them.

Papernot et al. 2017, Appendix C and Figure 2: student accuracy as a function
of the number of labelled queries and of the noise scale, with ε beside it.
All labels of a mechanism (every noise scale x every draw) come from one
vmapped call of its registered ``answer`` (:mod:`pate_jax.mechanisms`: LNMax, GNMax,
or any registered mechanism with one noise parameter).
"""

from __future__ import annotations

from typing import Any, Iterable, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from pate_jax import _checks as v
from pate_jax import aggregation
from pate_jax import mechanisms
from pate_jax._compile import light_jit
from pate_jax.tabular._privacy import (Accountant, epsilon, prefix_epsilon,
                                       single_scale_mechanism)
from pate_jax.tabular._students import StudentTask, student_accuracies


def query_counts(counts: Iterable[int], num_pool: int) -> list[int]:
  """The sorted distinct prefix lengths of the query sweep: ``{n in counts : 0 < n < num_pool}
  ∪ {num_pool}`` (out-of-range counts are dropped, the whole pool is always included)."""
  if int(num_pool) < 1:
    raise ValueError(f"num_pool must be >= 1, got {num_pool}")
  return sorted({int(n) for n in counts if 0 < int(n) < num_pool} | {int(num_pool)})


def _label_grid_core(key, votes, scales, *, mechanism, num_draws):
  """``labels[s, r] = answer(fold_in(key, r), votes, arange(Q), {param: scales[s]})``."""
  m = mechanisms.get(mechanism)
  ids = jnp.arange(votes.shape[0], dtype=jnp.uint32)
  draws = jnp.arange(num_draws, dtype=jnp.uint32)

  def labels(scale, r):
    return m.answer(jax.random.fold_in(key, r), votes, ids, {m.noise_param: scale})[0]

  return jax.vmap(lambda s: jax.vmap(lambda r: labels(s, r))(draws))(scales)


_label_grid = light_jit(_label_grid_core, static_argnames=("mechanism", "num_draws"),
                        x64=True)  # float64 noise


def noisy_label_grid(key: jax.Array, votes: Any, mechanism: Any, scales: Sequence[float],
                     num_draws: int) -> np.ndarray:
  """Noisy labels for every noise scale and draw, in one vmapped call.

  ``labels[s, r] = agg(fold_in(key, r), votes, scales[s])`` with ``agg`` the
  registered ``answer`` of LNMax (scales are γ) or GNMax (scales are σ) and query
  ids ``arange(Q)``, as :func:`pate_jax.aggregation.lnmax` / ``gnmax`` answer. Draw ``r``
  uses the same key at every scale (common random numbers), and per-query keys
  make ``labels[s, r, :n]`` the labels of the first ``n`` queries alone.

  Args:
    key: PRNG key.
    votes: int ``[Q, C]``.
    mechanism: a registered one-parameter mechanism (``mechanisms.LNMAX``, ``GNMAX``) or
      its name.
    scales: ``[S]`` noise scales, > 0.
    num_draws: ``R >= 1`` noise draws per scale.

  Returns:
    int32 ``[S, R, Q]``.
  """
  m = single_scale_mechanism(mechanism)
  if int(num_draws) < 1:
    raise ValueError(f"num_draws must be >= 1, got {num_draws}")
  votes = v.votes(votes, equal_totals=m.equal_totals)
  scales = v.positive_vector(scales, f"scales ({m.noise_param})", "noise scales")
  return np.asarray(_label_grid(key, votes, scales.astype(np.float64), mechanism=m.name,
                                num_draws=int(num_draws)))


def sweep_mechanism(key: jax.Array, mechanism: Any, votes: Any, labels: Any, plurality: Any, *,
                    scale: float, grid: Sequence[float], counts: Sequence[int], num_seeds: int,
                    task: StudentTask, random_states: Sequence[int],
                    accountant: Accountant) -> tuple[dict, dict, dict]:
  """One mechanism of the tabular experiment: labels, their accuracy and ε, and students.

  Scales are ``[scale, *grid]`` (index 0: the configured scale). With ``R =
  len(random_states)`` draws from :func:`noisy_label_grid`, draw ``r`` trains a
  student with seed ``random_states[r]`` on all pool labels at every scale, and
  on the first ``n`` labels of the configured scale for each ``n`` in
  ``counts``. Label accuracy is averaged over ``num_seeds`` draws
  (:func:`pate_jax.aggregation.label_accuracy_grid`).

  Args:
    key: PRNG key of the noise.
    mechanism: a registered one-parameter mechanism (``mechanisms.LNMAX``, ``GNMAX``) or
      its name.
    votes: int ``[P, C]`` votes on the pool.
    labels: int ``[P]`` true labels of the pool.
    plurality: int ``[P]`` noiseless plurality labels of the pool.
    scale: the configured γ (LNMax) or σ (GNMax).
    grid: ``[S - 1]`` further scales for the noise sweep.
    counts: prefix lengths of the query sweep (see :func:`query_counts`).
    num_seeds: draws for the label accuracy.
    task: the students' data and model.
    random_states: ``[R]`` student seeds.
    accountant: δ, orders and conversion (:class:`Accountant`).

  Returns:
    ``(summary, queries_sweep, noise_sweep)`` dicts: the configured scale's
    results; student accuracy (mean, std over ``R``) and ε per count; student
    and label accuracy and ε (data-dependent and -independent) per grid scale.
  """
  m = single_scale_mechanism(mechanism)
  scale_name = m.noise_param
  best = m.accountant_kind.best_key
  repeats = len(random_states)
  labels, plurality = np.asarray(labels), np.asarray(plurality)
  scales = [float(scale), *map(float, grid)]
  noisy = noisy_label_grid(key, votes, m, scales, repeats)  # [S, R, P]
  label_acc = np.asarray(aggregation.label_accuracy_grid(
      key, votes, labels, m, scales, num_seeds))  # [S, num_seeds]
  sets = [noisy[s, r] for s in range(len(scales)) for r in range(repeats)]
  sets += [noisy[0, r, :n] for n in counts for r in range(repeats)]
  acc = student_accuracies(task, list(random_states) * (len(sets) // repeats), sets)
  acc_grid = acc[:len(scales) * repeats].reshape(len(scales), repeats)
  acc_counts = acc[len(scales) * repeats:].reshape(len(counts), repeats)

  eps_dd = [epsilon(accountant, m, votes, sc, data_dependent=True) for sc in scales]
  eps_di = [epsilon(accountant, m, votes, sc, data_dependent=False) for sc in scales]
  summary = {
      scale_name: scale,
      "epsilon_data_dependent": eps_dd[0][0], f"{best}_data_dependent": eps_dd[0][1],
      "epsilon_data_independent": eps_di[0][0], f"{best}_data_independent": eps_di[0][1],
      "delta": accountant.delta,
      "num_queries": len(labels),
      "label_accuracy": float(np.mean(noisy[0, 0] == labels)),
      "label_accuracy_mean_over_seeds": float(label_acc[0].mean()),
      "label_agreement_with_plurality": float(np.mean(noisy[0, 0] == plurality)),
      "student_accuracy": float(acc_grid[0, 0]),
      "student_accuracy_mean": float(acc_grid[0].mean()),
      "student_accuracy_std": float(acc_grid[0].std()),
      "student_repeats": repeats,
  }
  if m.inverse_scale:  # LNMax: Laplace noise of scale 1/γ.
    summary["laplace_scale"] = mechanisms.noise_scale(m, {m.noise_param: scale})
  if not m.accountant_kind.takes_orders:  # The 2017 accountant: moments 1..max_moment.
    wide = accountant.max_moment_wide
    if wide is not None:
      eps_wide, best_wide = epsilon(accountant._replace(max_moment=int(wide)), m,
                                    votes, scale)
      summary[f"epsilon_data_dependent_max_moment_{wide}"] = eps_wide
      summary[f"best_moment_data_dependent_max_moment_{wide}"] = best_wide
    summary["accountant"] = ("2017 moments accountant (Theorems 2-3, Lemma 4), moments "
                             f"1..{accountant.max_moment}")
  else:
    summary["accountant"] = (f"RDP (2018, Theorem 6 data-dependent), "
                             f"{accountant.conversion} conversion")
  queries_sweep = {
      "student_accuracy_mean": acc_counts.mean(axis=1),
      "student_accuracy_std": acc_counts.std(axis=1),
      "epsilon": prefix_epsilon(accountant, m, votes, scale, counts)}
  noise_sweep = {
      "noise_scale": scales[1:], "student_accuracy_mean": acc_grid[1:].mean(axis=1),
      "student_accuracy_std": acc_grid[1:].std(axis=1),
      "label_accuracy_mean": label_acc[1:].mean(axis=1),
      "epsilon": [e for e, _ in eps_dd[1:]],
      "epsilon_data_independent": [e for e, _ in eps_di[1:]]}
  return summary, queries_sweep, noise_sweep
