"""Tabular PATE on UCI Diabetes 130-US hospitals (readmission < 30 days).

Papernot et al. 2017, Appendix C: the same random-forest teachers and student as
for Adult (configs/adult_rf.py) on the original ``diabetic_data.csv``. The paper
keeps the features without missing values and balances the two classes; here, by
default (``diabetes_preparation = "label_free"``), nothing about the rows chooses
which rows are private or which columns are features: the features are a fixed list
(the file's columns less the identifiers, the label and the seven columns known to
hold "?"), the rows are cut by a keyed permutation of all of them (a quarter, the
``test_fraction``, public, the rest the teachers'), and only the public split is
balanced, by its own labels (the student's pool and its evaluation). The teachers'
rows keep the file's imbalance (about 11 % readmitted within 30 days), which each
teacher's forest weights away on its own partition (``class_weight = "balanced"``:
part of its training, inside the ε). ``--config.diabetes_preparation=paper`` is the
paper's preparation, a balanced subset and feature columns chosen on the whole file,
private rows' labels and missing values included: its ε holds for the data as
prepared, not for the file, so its votes are a research measurement only (the
aggregate stage refuses them a secret-noise release). The file is not available
offline: put it at ``<data_dir>/diabetes/diabetic_data.csv`` (the experiment stops
with a message saying so when it is absent).

Usage:
  python experiments/tabular.py --config configs/diabetes_rf.py --workdir runs/diabetes_rf
"""

from __future__ import annotations

import pathlib

import ml_collections

from pate_jax.experiment import load_script


def _adult_rf():
  return load_script(pathlib.Path(__file__).with_name("adult_rf.py"))


def get_config(arg: str | None = None) -> ml_collections.ConfigDict:
  if arg and "noeducation" in arg:
    raise ValueError("configs/diabetes_rf.py: 'noeducation' is an Adult option")
  c = _adult_rf().get_config(arg)
  c.dataset = "diabetes"
  c.query_split = "test"
  c.diabetes_preparation = "label_free"
  c.class_weight = "balanced"  # each teacher's, on its own partition (and the baseline's)
  return c
