"""Active learning (Papernot et al. 2017, Appendix B.2): the supervised student queries
the teachers for its least confident pool inputs first, round by round.

  python experiments/train_student.py --config configs/student_active.py:cpu \\
      --workdir runs/active --config.votes_dir=runs/pate_mnist_cpu/teachers

Round 0 labels the first ``round_sizes[0]`` pool rows; each later round retrains
the student, sorts the unqueried pool rows by increasing maximum probability and
queries the next ``round_sizes[r]``. One ledger (LNMax γ = 0.05, δ = 1e-5)
accumulates over rounds and refuses queries beyond ``aggregate.epsilon_max``;
compare with configs/student_supervised.py at the same number of queries
(``--config.aggregate.num_queries``). The queries are paid from the teachers' budget
(beside their votes.npz; a research noise seed keeps it in the workdir), which answers a
row once: a rerun that repeats the rounds gets the recorded answers without paying twice.
"""

import pathlib

import ml_collections

from pate_jax.experiment import load_script


def get_config(arg: str | None = None) -> ml_collections.ConfigDict:
  c = load_script(pathlib.Path(__file__).with_name("student_supervised.py")).get_config(arg)
  c.active = ml_collections.ConfigDict()
  c.active.round_sizes = (100, 100, 100, 100, 100)  # 500 queries in five rounds
  c.aggregate.epsilon_max = 8.0
  if arg == "cpu":
    c.num_steps = 1_500
  return c
