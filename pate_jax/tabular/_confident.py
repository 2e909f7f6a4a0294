"""Confident-GNMax on a tabular query pool: labels, their ε, and a student on the answered rows.

Papernot et al. 2018, Section 4.1 and Table 1: a query ``i`` is answered iff
``max_j n_ij + N(0, σ_T²) >= T``, with label ``argmax_j(n_ij + N(0, σ²))``; unanswered
queries get no label and the student trains on the answered rows only. Every query pays
the threshold check; answered ones also pay GNMax(σ).

Thin glue, no new privacy maths: the answers are the registered mechanism's
(:data:`pate_jax.mechanisms.CONFIDENT_GNMAX` through :func:`pate_jax.aggregation.answer`),
the realised ε is :func:`pate_jax.mechanisms.epsilon_report` (its ``cost`` given each
query's outcome, composed in RDP and converted at ``δ``), and the expected cost (the
2018 paper's convention: ``E[answered] = Σ_i Pr[answered_i]`` and ``E[RDP]``) is
:func:`pate_jax.accounting.confident_gnmax_rdp`.
"""

from __future__ import annotations

from typing import Any, NamedTuple, Sequence

import jax
import numpy as np

from pate_jax import _checks as v
from pate_jax import accounting
from pate_jax import aggregation
from pate_jax import mechanisms
from pate_jax.tabular._privacy import Accountant
from pate_jax.tabular._students import StudentTask, student_accuracies
from pate_jax.tabular._teachers import EstimatorSpec


class ConfidentParams(NamedTuple):
  """Confident-GNMax's parameters, in votes.

  Attributes:
    threshold: ``T``, the threshold on the noisy top count (a real number; it may exceed
      the number of teachers: 2018's Adult setting is ``T = 300`` with 250 teachers).
    sigma_threshold: ``σ_T`` (the paper's ``σ₁``) of the threshold noise, > 0.
    sigma: ``σ`` (the paper's ``σ₂``) of the answer noise, > 0.
  """
  threshold: float
  sigma_threshold: float
  sigma: float

  def as_dict(self) -> dict[str, float]:
    """The mechanism's parameter dict (:data:`pate_jax.mechanisms.CONFIDENT_GNMAX`)."""
    return {"threshold": float(self.threshold), "sigma_threshold": float(self.sigma_threshold),
            "sigma": float(self.sigma)}


def check_confident_params(params: ConfidentParams, prefix: str = "") -> ConfidentParams:
  """``params`` as floats after checking them; a ``ValueError`` names ``prefix + field``."""
  return ConfidentParams(
      threshold=float(v.scalar(params.threshold, f"{prefix}threshold")),
      sigma_threshold=float(v.positive(params.sigma_threshold, f"{prefix}sigma_threshold")),
      sigma=float(v.positive(params.sigma, f"{prefix}sigma")))


def confident_labels(key: jax.Array, votes: Any, params: ConfidentParams
                     ) -> tuple[np.ndarray, np.ndarray]:
  """Confident-GNMax answers to every row of ``votes`` (query ids ``arange(Q)``).

  Query ``i`` draws its two noises from ``split(fold_in(key, i))``
  (:func:`pate_jax.aggregation.confident_gnmax`), so the answer to row ``i`` does not
  depend on how many rows are asked.

  Args:
    key: PRNG key of the noise.
    votes: int ``[Q, C]``, every row summing to the number of teachers.
    params: the mechanism's parameters.

  Returns:
    ``(labels int32 [Q], answered bool [Q])``; ``labels`` is
    :data:`pate_jax.aggregation.NOT_ANSWERED` (-1) where not answered.
  """
  params = check_confident_params(params)
  labels, answered = aggregation.answer(mechanisms.CONFIDENT_GNMAX, key, votes,
                                        params.as_dict())
  return np.asarray(labels), np.asarray(answered)


def confident_epsilon(accountant: Accountant, votes: Any, answered: Any,
                      params: ConfidentParams) -> dict[str, dict[str, float]]:
  """ε of one Confident-GNMax labelling of ``votes``, given which rows were answered.

  Every row pays the threshold check, the answered ones GNMax(σ) too
  (``mechanisms.CONFIDENT_GNMAX.cost``), composed over ``accountant.orders`` and
  converted at ``accountant.delta`` (:func:`pate_jax.mechanisms.epsilon_report`).

  Args:
    accountant: δ, RDP orders and the conversion of the headline values.
    votes: int ``[Q, C]``.
    answered: bool ``[Q]`` rows that got a label.
    params: the mechanism's parameters.

  Returns:
    ``{"data_independent" | "data_dependent" | "data_independent_classic" |
    "data_dependent_classic": {"epsilon", "best_order"}}``: the first two with
    ``accountant.conversion``, the ``_classic`` ones with the classic conversion (the 2018
    code's ``ε = RDP(λ) + log(1/δ)/(λ - 1)``).
  """
  params = check_confident_params(params)
  votes = np.asarray(votes)
  answered = np.asarray(answered, bool)
  if answered.shape != votes.shape[:1]:
    raise ValueError(f"answered must have shape [{votes.shape[0]}] (one per row of votes); "
                     f"got {answered.shape}")
  conversion = v.choice(accountant.conversion, "conversion", accounting.CONVERSIONS)
  report = mechanisms.epsilon_report(
      mechanisms.CONFIDENT_GNMAX, params.as_dict(), votes, answered,
      np.ones(votes.shape[0], bool), delta=accountant.delta,
      orders=np.asarray(accountant.orders, np.float64))
  out = {}
  for dd in ("data_independent", "data_dependent"):
    for suffix, conv in (("", conversion), ("_classic", "classic")):
      entry = report[f"rdp_{dd}_{conv}"]
      out[dd + suffix] = {"epsilon": entry["epsilon"], "best_order": entry["best_order"]}
  return out


def confident_expected(accountant: Accountant, votes: Any, params: ConfidentParams
                       ) -> dict[str, float]:
  """The 2018 paper's expected accounting of asking every row of ``votes``.

  ``E[answered] = Σ_i Φ((max_j n_ij - T)/σ_T)`` and the data-dependent ε of
  ``Σ_i E[RDP_i]`` (:func:`pate_jax.accounting.confident_gnmax_rdp`: threshold cost plus
  ``Pr[answered_i]`` times the GNMax cost), as the paper's Table 1 reports them (its
  ``smooth_sensitivity_table.py``). Functions of the private votes.

  Returns:
    ``{"answered", "epsilon", "best_order", "epsilon_classic", "best_order_classic"}``
    (``epsilon`` with ``accountant.conversion``).
  """
  params = check_confident_params(params)
  orders = np.asarray(accountant.orders, np.float64)
  with jax.enable_x64(True):
    pr = np.exp(np.asarray(accounting.confident_log_pr_answered(
        votes, params.threshold, params.sigma_threshold), np.float64))
    rdp = accounting.confident_gnmax_rdp(votes, params.threshold, params.sigma_threshold,
                                         params.sigma, orders)
    out = {"answered": float(pr.sum())}
    for suffix, conv in (("", accountant.conversion), ("_classic", "classic")):
      eps, best = accounting.rdp_accountant(orders, conv).compose(rdp).epsilon(
          accountant.delta)
      out[f"epsilon{suffix}"], out[f"best_order{suffix}"] = float(eps), float(best)
  return out


def confident_gnmax_run(key: jax.Array, votes: Any, labels: Any, features: Any, *,
                        num_queries: int, params: ConfidentParams, estimator: EstimatorSpec,
                        random_states: Sequence[int], accountant: Accountant,
                        n_jobs: int = -1) -> tuple[dict, dict]:
  """Confident-GNMax on the first ``num_queries`` query rows and students on its answers.

  The first ``num_queries`` rows of ``votes`` are asked (:func:`confident_labels`); one
  student per seed in ``random_states`` is trained on the answered rows' features and
  noisy labels and scored on the rows from ``num_queries`` on.

  Args:
    key: PRNG key of the noise.
    votes: int ``[N, C]`` votes on every query input.
    labels: int ``[N]`` their true labels (public pool labels: accuracy of the answers,
      and the students' evaluation).
    features: ``[N, F]`` the query inputs.
    num_queries: queries asked, in ``[1, N)``.
    params: the mechanism's parameters.
    estimator: the student prototype or factory.
    random_states: ``[R]`` student seeds.
    accountant: δ, RDP orders and conversion.
    n_jobs: joblib workers for the students.

  Returns:
    ``(public, private)``: ``public`` the parameters, the queries asked and answered, the
    answered labels' accuracy, the data-independent ε, the students' accuracy (mean, std
    and each; NaN when nothing was answered) and the evaluation size; ``private`` the
    data-dependent ε (realised and the paper's expected accounting) and ``E[answered]``,
    functions of the private votes.
  """
  votes, labels, features = np.asarray(votes), np.asarray(labels), np.asarray(features)
  n = len(labels)
  if votes.shape[0] != n or features.shape[0] != n:
    raise ValueError(f"votes, labels and features must have the same rows; got "
                     f"{votes.shape[0]}, {n} and {features.shape[0]}")
  if isinstance(num_queries, bool) or not isinstance(num_queries, (int, np.integer)) or (
      not 0 < num_queries < n):
    raise ValueError(f"num_queries must be an integer in [1, {n}) (query inputs, the rest "
                     f"evaluate); got {num_queries!r}")
  params = check_confident_params(params)
  asked = votes[:num_queries]
  noisy, answered = confident_labels(key, asked, params)
  rows = np.flatnonzero(answered)
  x_eval, y_eval = features[num_queries:], labels[num_queries:]
  if rows.size:
    task = StudentTask(features[rows], x_eval, y_eval, estimator, n_jobs)
    acc = student_accuracies(task, list(random_states), [noisy[rows]] * len(random_states))
  else:
    acc = np.full(len(random_states), np.nan)
  eps = confident_epsilon(accountant, asked, answered, params)
  public = {
      **params.as_dict(),
      "num_queries": int(num_queries), "num_answered": int(rows.size),
      "answered_fraction": float(rows.size / num_queries),
      "label_accuracy": float(np.mean(noisy[rows] == labels[rows])) if rows.size else np.nan,
      "epsilon_data_independent": eps["data_independent"]["epsilon"],
      "best_order_data_independent": eps["data_independent"]["best_order"],
      "epsilon_data_independent_classic": eps["data_independent_classic"]["epsilon"],
      "delta": float(accountant.delta), "conversion": accountant.conversion,
      "student_accuracy_mean": float(np.mean(acc)),
      "student_accuracy_std": float(np.std(acc)),
      "student_accuracies": acc.tolist(), "student_repeats": len(random_states),
      "num_eval": int(len(y_eval)),
  }
  expected = confident_expected(accountant, asked, params)
  private = {
      "epsilon_data_dependent": eps["data_dependent"]["epsilon"],
      "best_order_data_dependent": eps["data_dependent"]["best_order"],
      "epsilon_data_dependent_classic": eps["data_dependent_classic"]["epsilon"],
      "expected_answered": expected["answered"],
      "expected_epsilon_data_dependent": expected["epsilon"],
      "expected_epsilon_data_dependent_classic": expected["epsilon_classic"],
  }
  return public, private
