"""Tabular PATE: scikit-learn-style teachers (random forests) and tabular coding.

Reference: Papernot et al., "Semi-supervised Knowledge Transfer for Deep
Learning from Private Training Data", ICLR 2017, Appendix C (random-forest
teachers and student on UCI Adult and Diabetes).

Public API::

  fit_teachers(key, features, labels, T, estimator=...) -> TeacherEnsemble
  teacher_votes(ensemble, queries) -> (votes int32 [Q, C], preds int32 [T, Q])
  predict_teachers(ensemble, queries) -> preds int32 [T, Q]
  fit_model(key, features, labels, estimator=...) -> fitted estimator
  random_forest(n_estimators=100, **sklearn_kwargs) -> unfitted forest prototype
  random_states(key, n) -> int64 [n] seeds fold_in(key, i)

  read_csv / fit_encoder / encode / Encoder / TabularSplit / UNKNOWN_CODE
"""

from __future__ import annotations

from pate_jax.tabular._table import (
    UNKNOWN_CODE,
    Encoder,
    TabularSplit,
    encode,
    fit_encoder,
    read_csv,
)
from pate_jax.tabular._teachers import (
    Estimator,
    TeacherEnsemble,
    fit_model,
    fit_teachers,
    make_estimator,
    predict_teachers,
    random_forest,
    random_states,
    teacher_votes,
)

__all__ = [
    "UNKNOWN_CODE", "Encoder", "TabularSplit", "encode", "fit_encoder", "read_csv",
    "Estimator", "TeacherEnsemble", "fit_model", "fit_teachers", "make_estimator",
    "predict_teachers", "random_forest", "random_states", "teacher_votes",
]
