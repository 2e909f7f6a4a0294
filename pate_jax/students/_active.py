"""Active learning of the student (Papernot et al. 2017, Appendix B.2).

The student asks the teachers about the pool inputs it is least sure of:

  round 0   query the first ``round_sizes[0]`` pool rows (arbitrary inputs), train;
  round r   predict every not-yet-queried pool row, sort by increasing maximum
            class probability, query the next ``round_sizes[r]`` rows in that
            order from the teachers' budget, retrain on all labels so far.

Queries go to the teachers' budget (:class:`pate_jax.budget.TeachersBudget`), asked by
pool row: the learner never sees a vote. The budget accumulates over rounds (and over
every other consumer of the same teachers) and refuses every query beyond ``ε_max``: the
learner stops querying at the first refusal and trains a last time on what it has (a
Confident-GNMax query whose threshold check failed is charged but not a refusal: the learner
goes on). A row
asked again -- by a killed run repeated, whose rounds resume from their checkpoints --
returns its recorded answer, free (nothing new is revealed).
"""

from __future__ import annotations

import pathlib
from typing import Any, Callable, NamedTuple, Sequence

import jax
import numpy as np

from pate_jax.ledger import Status
from pate_jax.students._data import StudentData, with_labels
from pate_jax.students._loop import FitResult, Student, fit, probabilities


class ActiveResult(NamedTuple):
  fit: FitResult                 # the final training
  labelled_index: np.ndarray     # pool rows with an answered label, in query order
  labels: np.ndarray             # their noisy labels
  rounds: list[dict]             # per round: queries asked/answered, the budget's ε when
                                 # the round was recorded (budget_epsilon: a resumed run's
                                 # rows come back recorded, so it then holds the killed
                                 # run's later rounds too), held-out accuracy
  stopped_by_budget: bool
  charged_index: np.ndarray      # pool rows charged to the budget (answered or not
                                 # confident), in query order: what the ε is of
  charged_answered: np.ndarray   # bool, per charged row: answered


def least_confident(probs: np.ndarray, candidates: np.ndarray, num: int) -> np.ndarray:
  """The ``num`` candidate rows with the smallest maximum probability (ties: lower row)."""
  conf = probs[candidates].max(axis=1)
  order = np.lexsort((candidates, conf))
  return candidates[order[:num]]


def active_learning(student: Student, data: StudentData, budget: Any, key: jax.Array, *,
                    round_sizes: Sequence[int], fit_kwargs: dict,
                    checkpoint_dir: str | None = None,
                    log: Callable[[str], None] | None = print) -> ActiveResult:
  """Runs the rounds of the module docstring.

  Args:
    student: the student retrained every round (from scratch, its own key per round).
    data: the pool and held-out set (its labelled subset is ignored).
    budget: answers ``budget.answer(rows)`` (rows of the pool, which are the first rows
      of votes.npz) and reports its publishable ``budget.epsilon`` (a
      :class:`pate_jax.budget.TeachersBudget`).
    key: the learner's key (round ``r`` trains with ``fold_in(key, r)``).
    round_sizes: queries asked per round (round 0 first).
    fit_kwargs: passed to :func:`pate_jax.students.fit` (steps, batch size, ...).
    checkpoint_dir: round ``r`` checkpoints under ``<dir>/round_<r>``.
    log: progress lines (None: silent).
  """
  sizes = [int(s) for s in round_sizes]
  if not sizes or min(sizes) < 1:
    raise ValueError(f"round_sizes must be a non-empty list of positive counts, got "
                     f"{list(round_sizes)}")
  if sum(sizes) > data.pool.shape[0]:
    raise ValueError(f"round_sizes: {sum(sizes)} queries for a pool of {data.pool.shape[0]} "
                     "rows")
  asked = np.zeros(data.pool.shape[0], bool)
  index, labels, rounds, charged, charged_ok = [], [], [], [], []
  result, stopped = None, False
  for r, size in enumerate(sizes):
    if r == 0:
      rows = np.arange(size)
    else:
      probs = probabilities(student, result.state, data.pool)
      rows = least_confident(probs, np.flatnonzero(~asked), size)
    out = budget.answer(rows)
    asked[rows] = True
    status = np.asarray(out.status)
    ok = status == Status.ANSWERED
    index.append(rows[ok])
    labels.append(np.asarray(out.labels)[ok])
    paid = status != Status.REFUSED_BUDGET
    charged.append(rows[paid])
    charged_ok.append(ok[paid])
    stopped = not paid.all()
    lab_index, lab = np.concatenate(index), np.concatenate(labels)
    if lab_index.size == 0:
      raise ValueError(
          "the teachers' budget answered no query within epsilon_max" if stopped else
          f"no query of round {r} was answered: each failed the threshold check (charged, "
          "not answered), so the student has no label to train on; ask more queries in "
          "the first round, or lower the threshold")
    ckpt = None if checkpoint_dir is None else str(pathlib.Path(checkpoint_dir) / f"round_{r}")
    result = fit(student, with_labels(data, lab_index, lab), jax.random.fold_in(key, r),
                 checkpoint_dir=ckpt, log=None, **fit_kwargs)
    rounds.append({"round": r, "asked": int(rows.size), "answered": int(ok.sum()),
                   "charged": int(paid.sum()),
                   "num_labels": int(lab_index.size),
                   "budget_epsilon": float(budget.epsilon),
                   "eval_accuracy": result.eval_accuracy,
                   "train_seconds": result.train_seconds})
    if log:
      log(f"active round {r}: {rounds[-1]}")
    if stopped:
      if log:
        log(f"budget reached after {lab_index.size} answers: stopping")
      break
  return ActiveResult(result, np.concatenate(index), np.concatenate(labels), rounds, stopped,
                      np.concatenate(charged), np.concatenate(charged_ok))
