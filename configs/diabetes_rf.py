"""Tabular PATE on UCI Diabetes 130-US hospitals (readmission < 30 days).

Papernot et al. 2017, Appendix C: the same random-forest teachers and student as
for Adult (configs/adult_rf.py), on a class-balanced subset of the original
``diabetic_data.csv`` restricted to the features without missing values. The
file is not available offline: put it at ``<data_dir>/diabetes/diabetic_data.csv``
(the experiment stops with a message saying so when it is absent).

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
  return c
