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
from pate_jax.budget._files import BudgetError, written_ledgers
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
  except Exception as e:  # noqa: BLE001 -- a damaged file, whatever numpy or zipfile raises
    raise BudgetError(f"{path}: not a readable release ({type(e).__name__}: {e}); it may "
                      "hold a release already spent: restore it, or move it away") from e
  return out


def _save(path: pathlib.Path, arrays: dict[str, Any], release: str, secret: bool) -> str:
  """Writes the release atomically and durably, owner-only (a function of the private
  votes); returns the file's SHA-256."""
  io.write_private(path, lambda f: np.savez_compressed(
      f, **arrays, release=np.str_(release), secret=np.bool_(secret)))
  return io.file_digest(path)


def draw_once(path: str | os.PathLike, draw: Callable[[], dict[str, np.ndarray]], *,
              votes_digest: str, settings: dict[str, Any], secret: bool,
              registry: BudgetRegistry | None = None, private_data: str | None = None,
              another_budget: bool = False, teachers: str | os.PathLike | None = None
              ) -> dict[str, np.ndarray]:
  """The arrays of a release of private votes, drawn by ``draw()`` at most once per budget.

  The release is named by :func:`release_digest` of ``votes_digest`` and ``settings``
  (everything that decides it but the noise: rows, privacy targets, the noise's source;
  not values computed from them, such as a calibrated σ, whose last bits may change with a
  library). Kept in ``path`` (owner-only, written atomically), it is returned as stored by
  every later call for the same release. A secret-noise release is never overwritten:
  ``path`` holding one of other votes or settings is refused (the work directory belongs
  to that release; use another). Research noise (``secret`` False: the noise is public,
  nothing is protected and nothing is spent) is replaced freely and never registered.

  With ``registry`` and its key ``private_data`` (:meth:`BudgetRegistry.key_of`), a
  secret-noise release is drawn and registered on the data in one step
  (:meth:`BudgetRegistry.spend_release`):
  refused where the data has another budget -- a teachers' ledger, another release --
  unless ``another_budget``, and a release the registry holds as drawn whose file is not at
  ``path`` (deleted, or drawn in another directory) is refused unless ``another_budget``:
  copy its file to ``path`` to use it. With ``registry`` and no ``private_data`` (votes that
  name no private data), a secret-noise release not already at ``path`` is refused unless
  ``another_budget``: nothing would keep it to one draw.

  ``teachers``, the directory of the votes: a secret-noise release not already at ``path``
  is refused where the teachers' own ledger has spent there (``ledger.npz``, or its
  journal), unless ``another_budget``. The registry refuses it too, where it follows that
  ledger; this catches a registry that does not (another one, or one deleted), since the
  ledger beside the votes is the teachers' budget whichever registry a run names.

  Raises:
    BudgetError: as above, naming the file or the registry entry and the way on.
  """
  path = pathlib.Path(path)
  release = release_digest(votes_digest, settings)
  reg = registry if secret and private_data else None
  stored = _load(path)
  if stored is not None and stored["release"] == release:
    if reg is not None:
      reg.record_release(private_data, release, votes_digest, path, io.file_digest(path))
    return {k: v for k, v in stored.items() if k not in _META}
  if stored is not None and stored["secret"]:
    raise BudgetError(
        f"{path} holds a release drawn with secret noise from other votes or with other "
        "settings: it was spent, and this work directory is its own. Run this one in "
        "another work directory" + (" (with config.another_budget=True where it is a "
                                    "second budget on the same data)" if secret else ""))
  if secret and registry is not None and not private_data and not another_budget:
    # Keyed by nothing, the release is kept by nothing beside the votes (a ledger keeps
    # the labels'): every work directory would draw one of its own on the same teachers.
    raise BudgetError(
        f"{path}: the votes carry no digest of the teachers' private data (votes.npz's "
        "private_data, or one their run recorded), so the budget registry cannot hold this "
        "secret-noise release to one budget on that data; release from the teachers' own "
        "votes, or set config.another_budget=True to draw it as a budget that nothing "
        "counts with the others on the same data")
  out: dict[str, np.ndarray] = {}

  def write() -> str:  # under the registry's lock, after its checks: before any draw
    spent = ([] if not secret or another_budget or teachers is None
             else written_ledgers(teachers))
    if spent:
      raise BudgetError(
          f"{spent[0]}: the teachers' privacy ledger beside their votes has spent on them, "
          "and the budget registry of this run does not hold that budget (another registry, "
          "or one deleted): a secret release of these votes would be a second budget on "
          "their data. Run with the registry that follows the ledger "
          "(config.budget_registry, $PATE_JAX_BUDGET_REGISTRY), or set "
          "config.another_budget=True to spend a second budget knowingly (their ε add up)")
    out.update({k: np.asarray(v) for k, v in draw().items()})
    if set(out) & set(_META):
      raise ValueError(f"draw: the names {_META} are the release file's own")
    return _save(path, out, release, secret)

  if reg is None:
    write()
  else:
    reg.spend_release(private_data, release, votes_digest, path, write,
                      another=another_budget)
  return out
