"""Consensus inference on UCI Adult: the attack paper's Section 2 and Appendices D-E.

* Teachers (Appendix D): each of the 250 teachers picks its random forest by a
  randomized hyper-parameter search with cross-validated accuracy over
  :data:`RF_SEARCH_SPACE` (:func:`searched_forest`).
* Balanced test set (Section 2, Figure 1): every minority member (PhD holders)
  and as many majority members drawn uniformly without replacement
  (:func:`balanced_rows`); the precision of "low consensus ⇒ minority" depends
  on that draw, so :func:`balanced_precisions` redraws it.
* End to end (Appendix E): ``n`` low- and ``n`` high-consensus members
  (:func:`low_high_rows`) are attacked through noisy GNMax answers
  (:func:`end_to_end`).

(:func:`pate_jax.data.diabetes.balanced_index` balances a binary label too, but
subsamples both classes and shuffles; here every minority row is kept in order.)
"""

from __future__ import annotations

from typing import Any

import jax
import numpy as np

from pate_jax.attacks import _consensus
from pate_jax.attacks import _evaluation as ev
from pate_jax.attacks import _monte_carlo as mc
from pate_jax.attacks import _privacy
from pate_jax.attacks import _reconstruct as rc
from pate_jax import _checks as v

# Appendix D's search space (n_estimators: log-spaced integers in [10, 300]).
RF_SEARCH_SPACE = {
    "max_depth": list(range(1, 12)),
    "max_features": ["sqrt", "log2", 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9],
    "n_estimators": sorted({int(round(x)) for x in np.geomspace(10, 300, 24)}),
    "criterion": ["gini", "entropy"],
    "min_samples_split": [2, 5, 10],
    "bootstrap": [True, False],
}


def searched_forest(random_state: int, *, n_iter: int, folds: int) -> Any:
  """A teacher that picks its forest by randomized search (Appendix D).

  ``sklearn.model_selection.RandomizedSearchCV`` over :data:`RF_SEARCH_SPACE`:
  ``n_iter`` draws, each scored by ``folds``-fold CV accuracy, then refit on all
  the teacher's data. An estimator factory for :func:`pate_jax.tabular.fit_teachers`
  (``functools.partial(searched_forest, n_iter=..., folds=...)``).
  """
  from sklearn.ensemble import RandomForestClassifier  # pylint: disable=g-import-not-at-top
  from sklearn.model_selection import RandomizedSearchCV  # pylint: disable=g-import-not-at-top
  v.positive_int(n_iter, "n_iter")
  v.positive_int(folds, "folds")
  return RandomizedSearchCV(RandomForestClassifier(random_state=random_state, n_jobs=1),
                            RF_SEARCH_SPACE, n_iter=n_iter, cv=folds, scoring="accuracy",
                            random_state=random_state, n_jobs=1)


def balanced_rows(key: jax.Array, minority: Any) -> np.ndarray:
  """Rows of a balanced set: all minority rows, then as many random majority rows.

  Args:
    key: PRNG key of the majority draw (uniform, without replacement).
    minority: bool ``[n]`` group membership.

  Returns:
    int ``[2 m]`` row indices, ``m = Σ minority``: the minority rows in order,
    then the drawn majority rows.
  """
  minority = np.asarray(minority, bool)
  pos, neg = np.flatnonzero(minority), np.flatnonzero(~minority)
  if pos.size == 0 or neg.size < pos.size:
    raise ValueError(f"minority: need 1 <= #minority <= #majority, got {pos.size} and "
                     f"{neg.size}")
  drawn = np.asarray(jax.random.choice(key, neg, (pos.size,), replace=False))
  return np.concatenate([pos, drawn])


def balanced_precisions(keys: jax.Array, low: Any, minority: Any) -> np.ndarray:
  """Precision of ``low`` as a minority predictor on one balanced set per key.

  ``precision_d = group_rates(low[S_d], minority[S_d])["precision"]`` with
  ``S_d = balanced_rows(keys[d], minority)``.

  Returns:
    float64 ``[D]``.
  """
  low, minority = np.asarray(low, bool), np.asarray(minority, bool)
  out = []
  for k in keys:
    rows = balanced_rows(k, minority)
    out.append(_consensus.group_rates(low[rows], minority[rows])["precision"])
  return np.asarray(out, np.float64)


def low_high_rows(key: jax.Array, low: Any, n: int) -> np.ndarray:
  """``k`` random low-consensus rows, then ``k`` random high-consensus rows (Appendix E).

  ``k = min(n, #low, #high)``; the low rows are drawn with ``fold_in(key, 1)``,
  the high rows with ``fold_in(key, 2)`` (uniform, without replacement).

  Returns:
    int ``[2 k]`` row indices.
  """
  v.positive_int(n, "n")
  low = np.asarray(low, bool)
  low_pool, high_pool = np.flatnonzero(low), np.flatnonzero(~low)
  take = min(n, low_pool.size, high_pool.size)
  draw = lambda i, pool: np.asarray(jax.random.choice(jax.random.fold_in(key, i), pool,
                                                      (take,), replace=False))
  return np.concatenate([draw(1, low_pool), draw(2, high_pool)])


def consensus_inference(votes: Any, minority: Any, rows: Any, draw_keys: jax.Array, *,
                        threshold: float) -> dict[str, Any]:
  """Section 2 / Figure 1: "consensus < threshold ⇒ minority" on true vote histograms.

  Args:
    votes: ``[n, C]`` teacher vote histograms of the test set.
    minority: bool ``[n]`` group membership.
    rows: the balanced set (:func:`balanced_rows`).
    draw_keys: ``[D]`` keys of redrawn balanced sets (:func:`balanced_precisions`).
    threshold: the consensus threshold (paper: 0.75).

  Returns:
    ``{"balanced", "full_test_set"}`` (:func:`pate_jax.attacks.group_rates`),
    ``"consensus_mean"`` per group on the balanced set and
    ``"balanced_precision_over_draws"`` (mean, std, min, max, num_draws).
  """
  minority = np.asarray(minority, bool)
  low_all = np.asarray(_consensus.classify_low_consensus(votes, threshold))
  cons = np.asarray(_consensus.consensus(np.asarray(votes)[rows]))
  m = minority[rows]
  draws = balanced_precisions(draw_keys, low_all, minority)
  return {"balanced": _consensus.group_rates(low_all[rows], m),
          "full_test_set": _consensus.group_rates(low_all, minority),
          "consensus_mean": {"minority": float(cons[m].mean()),
                             "majority": float(cons[~m].mean())},
          "balanced_precision_over_draws": {
              "mean": float(np.mean(draws)), "std": float(np.std(draws)),
              "min": float(np.min(draws)), "max": float(np.max(draws)),
              "num_draws": len(draws)}}


def end_to_end(key: jax.Array, answer_key: jax.Array, votes: Any, minority: Any, *,
               threshold: float, num_individuals: int, sigma: float, delta: float,
               budget: float, num_teachers: float, conversion: str = "improved",
               max_queries: int = 10**6, **options: Any) -> dict[str, Any]:
  """Appendix E / Figure 8: the consensus attack through noisy GNMax answers only.

  ``k`` low- and ``k`` high-consensus members (:func:`low_high_rows` with ``key``)
  are each queried ``M_b = max{M : ε_GNMax(M) ≤ budget}`` times (data-dependent
  GNMax cost, :func:`pate_jax.attacks.max_queries_within_budget`), answered with
  ``answer_key``; each ``Ĥ_b`` is reconstructed (``options``) and classified by
  ``consensus(max(Ĥ_b, 0)) < threshold``.

  Args:
    votes: ``[n, C]`` vote histograms; minority: bool ``[n]``.
    num_teachers: ``N`` (the reconstructions sum to it).

  Returns:
    agreement of the attacked and the true class, group rates of both, the mean
    error and one row per individual.
  """
  votes, minority = np.asarray(votes), np.asarray(minority, bool)
  low = np.asarray(_consensus.classify_low_consensus(votes, threshold))
  cons = np.asarray(_consensus.consensus(votes))
  chosen = low_high_rows(key, low, num_individuals)
  h = votes[chosen]
  rdp = _privacy.per_query_rdp(h, sigma=sigma)
  m = _privacy.max_queries_within_budget(rdp, budget, delta=delta, conversion=conversion,
                                         max_queries=max_queries)
  eps_m, _ = _privacy.queries_epsilon(rdp, m, delta=delta, conversion=conversion)
  e = ev.evaluate(mc.sample_answers(answer_key, h, sigma, m), h, sigma, num_teachers, **options)
  low_hat = np.asarray(_consensus.classify_low_consensus(np.maximum(e.histogram, 0.0),
                                                         threshold))
  return {
      "num_individuals": int(chosen.size),
      "agreement_with_true_consensus_class": float(np.mean(low_hat == low[chosen])),
      "rates_from_true_histograms": _consensus.group_rates(low[chosen], minority[chosen]),
      "rates_from_reconstructed": _consensus.group_rates(low_hat, minority[chosen]),
      "mean_error": float(e.error.mean()),
      "individuals": [
          {"votes": h[i], "minority": bool(minority[chosen][i]),
           "consensus": float(cons[chosen][i]), "queries_allowed": int(m[i]),
           "epsilon": float(eps_m[i]), "reconstructed": e.histogram[i],
           "error": float(e.error[i]), "low_consensus_true": bool(low[chosen][i]),
           "low_consensus_attack": bool(low_hat[i]), "stop": rc.Stop(int(e.status[i])).name}
          for i in range(chosen.size)],
  }
