"""Tabular PATE on UCI Adult with random-forest teachers and student.

Papernot et al. 2017, Appendix C (published version): 250 teachers, each a
scikit-learn random forest of 100 trees with default parameters, trained on
disjoint partitions of the training set; the first 500 test inputs are labelled
by the noisy aggregation (LNMax, gamma = 0.05) and a student forest trained on
them is evaluated on the remaining test inputs. Papernot et al. 2018 (Table 1) cite it
as 83.0 % at eps 2.66 (LNMax, 500 queries, delta = 1e-5); non-private forest ~85 %.
This config runs on the offline data's coarsened 11-feature re-split of Adult; the
papers' original files and split: configs/adult_uci_rf.py.

Usage:
  python experiments/tabular.py --config configs/adult_rf.py --workdir runs/adult_rf
  python experiments/tabular.py --config configs/adult_rf.py:cpu --workdir runs/adult_rf_cpu

A release (publishable): the aggregate stage answers the pool from the teachers' budget (GNMax:
500 LNMax answers cost 13.3 data-independent, past its 6), then the student forests learn
from its labels alone:
  python experiments/aggregate.py --config configs/aggregate_mnist.py \
      --config.votes_dir=runs/adult_rf --config.num_queries=500 \
      --config.query_selection=first --config.mechanism=gnmax --workdir runs/adult_rf_labels
  python experiments/tabular.py --config configs/adult_rf.py \
      --config.labels_dir=runs/adult_rf_labels --workdir runs/adult_rf_student

Arguments (comma-separated, combinable):
  cpu          small smoke variant (25 teachers of 10 trees, gamma 0.2, sigma 5,
               small sweeps; Confident-GNMax's values scaled by 25/250).
  noeducation  drop the ``education`` column from the features (the histogram
               attack's consensus inference trains its teachers this way).
"""

from __future__ import annotations

import ml_collections
from ml_collections import config_dict


def get_config(arg: str | None = None) -> ml_collections.ConfigDict:
  args = {a.strip() for a in (arg or "").split(",") if a.strip()}
  unknown = args - {"cpu", "noeducation"}
  if unknown:
    raise ValueError(f"configs/adult_rf.py: unknown argument(s) {sorted(unknown)}; "
                     "use 'cpu' and/or 'noeducation'")
  c = ml_collections.ConfigDict()
  c.seed = 0
  c.dataset = "adult"
  c.data_dir = ""                 # "" -> $PATE_JAX_DATA_DIR.
  c.drop_columns = "education" if "noeducation" in args else ""  # comma-separated names
  c.query_split = "test"          # Adult: "test" or "attack" (queries = student pool + eval).
  c.test_fraction = 0.25          # Diabetes only: the public split's fraction of all rows.
  # Diabetes only: "label_free" (rows and columns chosen without looking at the rows) or
  # "paper" (chosen on every row: no secret-noise release of its votes; configs/diabetes_rf.py).
  c.diabetes_preparation = "label_free"
  c.n_jobs = -1                   # joblib workers for teachers (-1: all cores).

  # Teachers, non-private baseline and student: sklearn RandomForestClassifier with
  # default parameters except the number of trees (Appendix C).
  c.num_teachers = 250
  c.n_estimators = 100
  c.max_depth = config_dict.placeholder(int)   # None: sklearn's default (unlimited).
  # The baseline's and each teacher's class weights (sklearn's class_weight, computed on the
  # rows each forest is fitted on): None (unweighted, as here), "balanced" or
  # "balanced_subsample".
  c.class_weight = config_dict.placeholder(str)
  c.student_n_estimators = 100
  c.baseline_n_estimators = 100

  # Student: the first num_pool query inputs are labelled; the rest evaluate.
  c.num_pool = 500
  # "" off. A directory: train only the student forests, on the labels.npz that
  # experiments/aggregate.py released there from this stage's votes.npz (secret noise, the
  # teachers' budget), and score them on the queries after the pool: publishable (README,
  # Tabular PATE). Teachers, votes and sweeps are not touched.
  c.labels_dir = ""
  # Reference (true labels, not private): students on this many random pools of num_pool
  # query inputs, each scored on the other queries, to place the first pool among them.
  c.reference_pools = 30

  # Noisy aggregation and its privacy cost.
  c.lnmax_gamma = 0.05            # Laplace scale 1/gamma = 20 (the paper's setting).
  c.gnmax_sigma = 40.0
  c.delta = 1e-5
  c.lnmax_max_moment = 8          # Moments accountant orders 1..8 (2017 analysis).
  c.lnmax_max_moment_wide = 32    # Also reported: the same bound over moments 1..32.
  c.rdp_orders = [1.25, 1.5, 1.75, 2.0, 2.5, 3.0, 3.5, 4.0, 5.0, 6.0, 8.0, 10.0, 12.0, 16.0,
                  20.0, 24.0, 32.0, 48.0, 64.0, 96.0, 128.0, 256.0]
  c.rdp_conversion = "improved"   # Balle et al. 2020 RDP -> (eps, delta) conversion.

  # Confident-GNMax (Papernot et al. 2018, Section 4.1): off here, so that the LNMax and
  # GNMax results do not change; configs/adult_uci_rf.py:cgn turns it on. The values are
  # the 2018 paper's for Adult (250 teachers; see configs/adult_uci_rf.py for the source).
  c.confident_gnmax = ml_collections.ConfigDict()
  c.confident_gnmax.enabled = False
  c.confident_gnmax.threshold = 300.0        # T, on the noisy top count (votes).
  c.confident_gnmax.sigma_threshold = 200.0  # sigma_1, noise of the threshold check.
  c.confident_gnmax.sigma = 40.0             # sigma_2, noise of the answer (GNMax).
  c.confident_gnmax.num_queries = config_dict.placeholder(int)  # Asked; None: num_pool.

  # Sweeps (PNG): student accuracy vs number of queries and vs noise scale.
  c.query_counts = [25, 50, 100, 200, 300, 400, 500]
  c.lnmax_gammas = [0.01, 0.02, 0.03, 0.05, 0.1, 0.2, 0.5]
  c.gnmax_sigmas = [5.0, 10.0, 20.0, 40.0, 60.0, 80.0, 120.0]
  c.num_seeds = 20                # noise draws for label accuracy (vmapped).
  c.student_repeats = 3           # noise draws x student forests per sweep point.

  if "cpu" in args:
    c.num_teachers = 25
    c.n_estimators = 10
    c.student_n_estimators = 20
    c.baseline_n_estimators = 20
    c.query_counts = [50, 200, 500]
    c.lnmax_gammas = [0.02, 0.05, 0.2]
    c.gnmax_sigmas = [5.0, 20.0, 40.0]
    c.lnmax_gamma = 0.2           # 25 teachers: less noise than for 250.
    c.gnmax_sigma = 5.0
    c.num_seeds = 5
    c.reference_pools = 3
    c.student_repeats = 1
    # 25 teachers: the 2018 values scaled by 25/250 (not the paper's).
    c.confident_gnmax.threshold = 30.0
    c.confident_gnmax.sigma_threshold = 20.0
    c.confident_gnmax.sigma = 4.0
  return c
