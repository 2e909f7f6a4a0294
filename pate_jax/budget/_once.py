"""A release drawn once from private votes, outside a ledger: :func:`draw_once`.

Some releases of the teachers' votes are not answers of a noisy-max ledger: the KD-GAN's
sound variant releases their averaged probability vectors through the Gaussian mechanism,
every public input once per noise level. Drawn with secret noise, each draw spends privacy,
so a rerun that drew again would spend again, silently. :func:`draw_once` draws such a
release once, keeps it in an owner-only file, and gives it back to every later call of the
same release (its post-processing is free); with a registry it is a budget of its own on
the teachers' private data (:class:`pate_jax.budget.BudgetRegistry`), refused where the
data already has one unless asked for, and a release that was drawn and whose file is
gone is not drawn again unless asked for.
"""

from __future__ import annotations

import json
import os
import pathlib
from typing import Any, Callable

import numpy as np

from pate_jax import io
from pate_jax.budget._files import BudgetError
from pate_jax.budget._registry import BudgetRegistry

_META = ("release", "secret")


def release_digest(votes_digest: str, settings: dict[str, Any]) -> str:
  """SHA-256 naming a release: the votes' (salted) digest and the settings it is drawn
  with (JSON, sorted keys)."""
  text = json.dumps({"votes": votes_digest, "settings": settings}, sort_keys=True)
  return io.data_digest(np.frombuffer(text.encode("utf-8"), np.uint8))


def _load(path: pathlib.Path) -> dict[str, Any] | None:
  if not path.exists():
    return None
  try:
    with np.load(path, allow_pickle=False) as f:
      out = {k: f[k] for k in f.files}
    out["release"], out["secret"] = str(out["release"]), bool(out["secret"])
  except (OSError, ValueError, KeyError, EOFError) as e:
    raise BudgetError(f"{path}: not a readable release ({type(e).__name__}: {e}); it may "
                      "hold a release already spent: restore it, or move it away") from e
  return out


def _save(path: pathlib.Path, arrays: dict[str, Any], release: str, secret: bool) -> None:
  tmp = path.with_name(path.name + ".tmp.npz")
  with io.open_private(tmp) as f:  # a function of the private votes: the owner's only
    np.savez_compressed(f, **arrays, release=np.str_(release), secret=np.bool_(secret))
    f.flush()
    os.fsync(f.fileno())
  tmp.replace(path)


def draw_once(path: str | os.PathLike, draw: Callable[[], dict[str, np.ndarray]], *,
              votes_digest: str, settings: dict[str, Any], secret: bool,
              registry: BudgetRegistry | None = None, private_data: str | None = None,
              another_budget: bool = False) -> dict[str, np.ndarray]:
  """The arrays of a release of private votes, drawn by ``draw()`` at most once per budget.

  The release is named by :func:`release_digest` of ``votes_digest`` and ``settings``
  (everything that decides it but the noise: rows, noise levels, the noise's source). Kept
  in ``path`` (owner-only, written atomically), it is returned as stored by every later
  call for the same release; ``path`` holding a secret-noise release of other votes or
  settings is refused (it was spent) unless ``another_budget``, which draws the new one in
  its place. Research noise (``secret`` False: the noise is public, nothing is protected
  and nothing is spent) is replaced freely and never registered.

  With ``registry`` and ``private_data`` (votes.npz's), a secret-noise release registers
  on the data before it is drawn (:meth:`BudgetRegistry.claim_release`): refused where the
  data has another budget -- a teachers' ledger, another release -- unless
  ``another_budget``; a release the registry holds as drawn whose file is not at ``path``
  (deleted, or drawn in another directory) is refused unless ``another_budget``: copy its
  file to ``path`` to use it. Written, it is recorded with its file's hash.

  Raises:
    BudgetError: as above, naming the file or the registry entry and the way on.
  """
  path = pathlib.Path(path)
  release = release_digest(votes_digest, settings)
  reg = registry if secret and registry is not None else None
  if reg is not None:
    known = reg.data_of(votes_digest)
    if known is not None and private_data and private_data != known:
      raise BudgetError(f"votes.npz names other private data than the budget registry "
                        f"{reg.directory} holds these votes under: votes.npz was altered")
    private_data = private_data or known
    reg = reg if private_data else None
  stored = _load(path)
  if stored is not None and stored["release"] == release:
    if reg is not None:
      reg.record_release(private_data, release, path, io.file_digest(path))
    return {k: v for k, v in stored.items() if k not in _META}
  if stored is not None and stored["secret"] and not another_budget:
    raise BudgetError(
        f"{path} holds a release drawn with secret noise from other votes or with other "
        "settings: it was spent, and drawing this one spends again. Use another work "
        "directory, or set config.another_budget=True to draw it here (the budgets add up)")
  entry = None
  if reg is not None:
    drawn = reg.releases(private_data, release)
    if drawn and not another_budget:
      raise BudgetError(
          f"this release was drawn before (registered {drawn[-1]['registered']} in the budget "
          f"registry {reg.directory}, its file {drawn[-1]['path']}) and {path} does not hold "
          "it: drawing it again spends again. Copy that file here to use it, or set "
          "config.another_budget=True to draw a new one (the budgets add up)")
    entry = reg.claim_release(private_data, release, path, another=another_budget)
  arrays = {k: np.asarray(v) for k, v in draw().items()}
  if set(arrays) & set(_META):
    raise ValueError(f"draw: the names {_META} are the release file's own")
  _save(path, arrays, release, secret)
  if reg is not None:
    reg.record_release(private_data, release, path, io.file_digest(path), entry_id=entry)
  return arrays
