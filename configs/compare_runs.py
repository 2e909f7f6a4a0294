"""Every script's results.json before and after a refactor (experiments/compare_runs.py).

  python experiments/compare_runs.py --config configs/compare_runs.py:cpu \\
      --config.before=HEAD --workdir runs/compare_runs

``before``: a commit (checked out with ``git worktree`` under the workdir, removed again
afterwards); ``after``: a commit, or "" for the working tree (uncommitted changes
included). Each side runs the catalogue of pate_jax/stages/compare_runs.py (tiny runs,
every noise seeded) into ``<workdir>/before`` and ``<workdir>/after``. MNIST and Adult
runs read ``$PATE_JAX_DATA_DIR``.
"""

import ml_collections


def get_config(arg: str | None = None) -> ml_collections.ConfigDict:
  c = ml_collections.ConfigDict()
  c.before = "HEAD"    # commit whose results are the reference ("" = the working tree)
  c.after = ""         # "" = the working tree; else a commit
  c.runs = ""          # comma-separated catalogue names ("" = all); prerequisites added
  c.platform = ""      # JAX_PLATFORMS of the runs ("" = JAX's default backend)
  c.timeout_s = 600    # per run; a run killed at the limit counts as failed (rc 124)
  if arg == "cpu":
    c.platform = "cpu"
    c.timeout_s = 300
  elif arg not in (None, ""):
    raise ValueError(f"configs/compare_runs.py: unknown variant {arg!r}; use '' or 'cpu'")
  return c
