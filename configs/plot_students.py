"""Student accuracy and ε against queries (experiments/plot_students.py)."""

import ml_collections


def get_config(arg: str | None = None) -> ml_collections.ConfigDict:
  del arg
  c = ml_collections.ConfigDict()
  c.runs = ""  # comma-separated train_student workdirs
  return c
