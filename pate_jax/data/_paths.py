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


def data_file(data_dir: str | os.PathLike | None, relative: str, what: str,
              holding: str) -> pathlib.Path:
  """``<data dir>/<relative>`` (:func:`resolve_data_dir`), or a ``FileNotFoundError`` that
  names ``what`` is missing and the directory it should be in: one ``holding`` it."""
  root = resolve_data_dir(data_dir)
  if root is None:
    raise FileNotFoundError(f"{what}: no data directory; set ${ENV_VAR} or pass data_dir "
                            f"(config field `data_dir`) to a directory holding {holding}")
  path = root / relative
  if not path.is_file():
    raise FileNotFoundError(f"{what}: no file at {path}; point ${ENV_VAR} or data_dir at "
                            f"the directory holding {holding}")
  return path
