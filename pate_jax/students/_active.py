"""Active learning of the student (Papernot et al. 2017, Appendix B.2).

The student asks the teachers about the pool inputs it is least sure of:

  round 0   query the first ``round_sizes[0]`` pool rows (arbitrary inputs), train;
  round r   predict every not-yet-queried pool row, sort by increasing maximum
            class probability, query the next ``round_sizes[r]`` rows in that
            order through the private aggregator, retrain on all labels so far.

Queries go through one :class:`pate_jax.ledger.PrivateAggregator`, whose ledger
accumulates over rounds and refuses every query beyond ``ε_max``: the learner
stops querying at the first refusal and trains a last time on what it has. The
aggregator's noise is a function of its key and the order of the queries, and
each round's training resumes from its checkpoint, so a killed run repeated with
the same key re-releases the same answers (nothing new is revealed).
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
  rounds: list[dict]             # per round: queries asked/answered, ε, held-out accuracy
  stopped_by_budget: bool


def least_confident(probs: np.ndarray, candidates: np.ndarray, num: int) -> np.ndarray:
  """The ``num`` candidate rows with the smallest maximum probability (ties: lower row)."""
  conf = probs[candidates].max(axis=1)
  order = np.lexsort((candidates, conf))
  return candidates[order[:num]]


def active_learning(student: Student, data: StudentData, aggregator: Any,
                    pool_votes: np.ndarray, key: jax.Array, *, round_sizes: Sequence[int],
                    fit_kwargs: dict, checkpoint_dir: str | None = None,
                    on_answer: Callable[[], None] | None = None,
                    log: Callable[[str], None] | None = print) -> ActiveResult:
  """Runs the rounds of the module docstring.

  Args:
    student: the student retrained every round (from scratch, its own key per round).
    data: the pool and held-out set (its labelled subset is ignored).
    aggregator: answers ``aggregator.answer(votes[rows])`` and reports
      ``aggregator.epsilon`` (a ``PrivateAggregator`` with its budget ``ε_max``).
    pool_votes: int ``[P, C]`` teacher votes of every pool row (private; used only
      through ``aggregator``).
    key: the learner's key (round ``r`` trains with ``fold_in(key, r)``).
    round_sizes: queries asked per round (round 0 first).
    fit_kwargs: passed to :func:`pate_jax.students.fit` (steps, batch size, ...).
    checkpoint_dir: round ``r`` checkpoints under ``<dir>/round_<r>``.
    on_answer: called after every round's queries were answered (e.g. to persist
      the aggregator's ledger before anything is trained on its answers).
    log: progress lines (None: silent).

  A consistent aggregator (``aggregator.consistent``) is asked with the pool rows as
  query ids: a rerun that resumes its ledger asks the same rows again (each round's
  student resumes bit-identically) and gets the recorded answers, free.
  """
  sizes = [int(s) for s in round_sizes]
  if not sizes or min(sizes) < 1:
    raise ValueError(f"round_sizes must be a non-empty list of positive counts, got "
                     f"{list(round_sizes)}")
  if sum(sizes) > data.pool.shape[0]:
    raise ValueError(f"round_sizes: {sum(sizes)} queries for a pool of {data.pool.shape[0]} "
                     "rows")
  if pool_votes.shape[0] != data.pool.shape[0]:
    raise ValueError(f"pool_votes: {pool_votes.shape[0]} rows for a pool of "
                     f"{data.pool.shape[0]}")
  asked = np.zeros(data.pool.shape[0], bool)
  index, labels, rounds = [], [], []
  result, stopped = None, False
  for r, size in enumerate(sizes):
    if r == 0:
      rows = np.arange(size)
    else:
      probs = probabilities(student, result.state, data.pool)
      rows = least_confident(probs, np.flatnonzero(~asked), size)
    ids = {"query_ids": rows} if getattr(aggregator, "consistent", False) else {}
    out = aggregator.answer(np.asarray(pool_votes[rows]), **ids)
    if on_answer is not None:
      on_answer()
    asked[rows] = True
    ok = np.asarray(out.status) == Status.ANSWERED
    index.append(rows[ok])
    labels.append(np.asarray(out.labels)[ok])
    stopped = not ok.all()
    lab_index, lab = np.concatenate(index), np.concatenate(labels)
    if lab_index.size == 0:
      raise ValueError("the aggregator answered no query within its budget")
    ckpt = None if checkpoint_dir is None else str(pathlib.Path(checkpoint_dir) / f"round_{r}")
    result = fit(student, with_labels(data, lab_index, lab), jax.random.fold_in(key, r),
                 checkpoint_dir=ckpt, log=None, **fit_kwargs)
    rounds.append({"round": r, "asked": int(rows.size), "answered": int(ok.sum()),
                   "num_labels": int(lab_index.size), "epsilon": float(aggregator.epsilon),
                   "eval_accuracy": result.eval_accuracy,
                   "train_seconds": result.train_seconds})
    if log:
      log(f"active round {r}: {rounds[-1]}")
    if stopped:
      if log:
        log(f"budget reached after {lab_index.size} answers: stopping")
      break
  return ActiveResult(result, np.concatenate(index), np.concatenate(labels), rounds, stopped)
