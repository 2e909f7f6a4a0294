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
``noeducationnum`` (keep ``fnlwgt``, drop ``education_num``), ``coarse`` (the offline
copy's coding on the original split: its 11 features, without ``fnlwgt``,
``education_num`` and ``native_country``, and its merged categories) and ``cgn``
(Confident-GNMax beside LNMax and GNMax, below).

``cgn``: Papernot et al. 2018, Table 1, Adult row "Confident-GNMax (T=300, σ1=200,
σ2=40)": 524 queries answered, ε 1.90 (δ 1e-5), student 83.7 %. The values are those of
the paper's scripts, tensorflow/privacy research/pate_2018/ICLR2018/generate_table.sh
(commit 03035d5d4a271ac795dab80f5bc1cef82fc3d462), lines 51-57: votes of 250 teachers
(``adult_250_teachers.npy``), ``--threshold=300 --sigma1=200 --sigma2=40
--queries=1500 --delta=1e-5``. So 1,500 queries are asked (the first 1,500 rows of
``adult.test`` here; which rows the paper asked is not stated), and the student trains
on the answered ones and is scored on the remaining 14,781 rows. The paper's 524 and
1.90 are expectations over the threshold noise (``E[answered] = Σ Pr[answered]``, ε of
the expected RDP, classic conversion); the run reports one realised labelling (its ε
with the configured conversion, improved, and with the classic one) and, in its private
part, the expected values too. With ``cpu`` (25 teachers) the values are scaled by
25/250 (not the paper's).
"""

from __future__ import annotations

import pathlib

import ml_collections

from pate_jax.experiment import load_script


def _adult_rf():
  return load_script(pathlib.Path(__file__).with_name("adult_rf.py"))


def get_config(arg: str | None = None) -> ml_collections.ConfigDict:
  args = {a.strip() for a in (arg or "").split(",") if a.strip()}
  unknown = args - {"cpu", "noeducationnum", "coarse", "cgn"}
  if unknown or {"noeducationnum", "coarse"} <= args:
    raise ValueError(f"configs/adult_uci_rf.py: unknown or conflicting argument(s) "
                     f"{sorted(args)}; use 'cpu' and 'cgn' with 'noeducationnum' or 'coarse'")
  c = _adult_rf().get_config("cpu" if "cpu" in args else None)
  c.dataset = "adult_uci"
  c.query_split = "test"
  c.drop_columns = "education_num" if "noeducationnum" in args else "fnlwgt"
  c.coarsen = "coarse" in args    # merge categories as the offline copy does
  if c.coarsen:
    c.drop_columns = "fnlwgt,education_num,native_country"
  if "cgn" in args:               # 2018, Table 1: see the module docstring
    c.confident_gnmax.enabled = True
    c.confident_gnmax.num_queries = 1500
  return c
