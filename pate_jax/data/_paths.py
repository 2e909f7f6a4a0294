"""Where offline datasets are looked for."""

from __future__ import annotations

import os
import pathlib

ENV_VAR = "PATE_JAX_DATA_DIR"


def resolve_data_dir(data_dir: str | os.PathLike | None = None) -> pathlib.Path | None:
  """The offline data directory: ``data_dir`` if given, else ``$PATE_JAX_DATA_DIR``.

  Returns ``None`` when neither is set. The directory holds one sub-directory
  per dataset (``mnist/``, ``svhn/``, ``adult/``, ...).
  """
  if data_dir:
    return pathlib.Path(data_dir).expanduser()
  env = os.environ.get(ENV_VAR)
  return pathlib.Path(env).expanduser() if env else None
