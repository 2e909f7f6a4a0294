"""Tabular PATE on the original UCI Adult files and split (the papers' setting).

Papernot et al. 2017, Appendix C and 2018, Table 1 use the original split: 250
random-forest teachers partition the 32,561 rows of ``adult.data``, the first
500 rows of ``adult.test`` (16,281 rows) are the student pool and the remaining
15,781 evaluate. Inputs have 13 of the 14 attributes, coded as integers; which
one the paper leaves out is not stated: ``fnlwgt`` (the census sampling weight)
by default, ``education_num`` with the ``noeducationnum`` argument. Everything
else is configs/adult_rf.py. The files are not in the offline data: put
``adult.data`` and ``adult.test`` (as distributed by UCI) at
``<data_dir>/adult/`` and pass ``--config.data_dir``.

Usage:
  python experiments/tabular.py --config configs/adult_uci_rf.py \
      --config.data_dir=/path/to/uci --workdir runs/adult_uci_rf

Arguments (comma-separated, combinable): ``cpu`` (as in configs/adult_rf.py),
``noeducationnum`` (keep ``fnlwgt``, drop ``education_num``) and ``coarse`` (the offline
copy's coding on the original split: its 11 features, without ``fnlwgt``,
``education_num`` and ``native_country``, and its merged categories).
"""

from __future__ import annotations

import pathlib

import ml_collections

from pate_jax.experiment import load_script


def _adult_rf():
  return load_script(pathlib.Path(__file__).with_name("adult_rf.py"))


def get_config(arg: str | None = None) -> ml_collections.ConfigDict:
  args = {a.strip() for a in (arg or "").split(",") if a.strip()}
  unknown = args - {"cpu", "noeducationnum", "coarse"}
  if unknown or {"noeducationnum", "coarse"} <= args:
    raise ValueError(f"configs/adult_uci_rf.py: unknown or conflicting argument(s) "
                     f"{sorted(args)}; use 'cpu' with 'noeducationnum' or 'coarse'")
  c = _adult_rf().get_config("cpu" if "cpu" in args else None)
  c.dataset = "adult_uci"
  c.query_split = "test"
  c.drop_columns = "education_num" if "noeducationnum" in args else "fnlwgt"
  c.coarsen = "coarse" in args    # merge categories as the offline copy does
  if c.coarsen:
    c.drop_columns = "fnlwgt,education_num,native_country"
  return c
