"""The core's one I/O module: the file and array helpers the library shares.

It owns what the core needs to touch the host side without the harness: a digest of
arrays (which data a run trained on, for checkpoint fingerprints), an atomic text
write (a temporary file, then a rename: a reader never sees half a file), owner-only
files in owner-only directories (a file of private values, its size included) and the
progress bar of long loops. It reads no config and knows no work directory layout;
:mod:`pate_jax.experiment` (the harness: ``results.json``, ``run_main``) builds on it
and re-exports these helpers, never the reverse.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import pathlib
import shutil
import stat
import warnings
from typing import Any, BinaryIO, Callable, Iterator

import numpy as np

__all__ = ["copy_file", "data_digest", "file_digest", "narrow", "narrow_tree", "open_private",
           "private_directory", "progress", "save_figure", "set_times", "shared_directory",
           "temporary", "times_kept", "write_file", "write_private", "write_text"]


def data_digest(*arrays: Any) -> str:
  """SHA-256 of arrays' dtypes, shapes and bytes: which data a run trained on.

  Of private data it is private too (one who knows every record but one tries each
  candidate for the missing one against it): it goes into owner-only files only."""
  h = hashlib.sha256()
  for a in arrays:
    a = np.ascontiguousarray(a)
    h.update(f"{a.dtype.str}|{a.shape}|".encode())
    h.update(memoryview(a).cast("B"))
  return h.hexdigest()


def file_digest(path: str | os.PathLike) -> str:
  """SHA-256 of a file's bytes, read in 1 MiB blocks."""
  h = hashlib.sha256()
  with open(path, "rb") as f:
    for block in iter(lambda: f.read(1 << 20), b""):
      h.update(block)
  return h.hexdigest()


def write_text(path: str | os.PathLike, text: str, *, private: bool = False) -> pathlib.Path:
  """Writes ``text`` to ``path`` atomically and durably (:func:`write_file`: a temporary
  file, synced and renamed, removed if the write fails).

  ``private``: readable by the owner only (0600) from its first byte (:func:`write_private`).
  """
  return write_file(path, lambda f: f.write(text.encode("utf-8")), private=private)


def temporary(path: str | os.PathLike) -> pathlib.Path:
  """The temporary file :func:`write_private` fills before renaming it over ``path``."""
  path = pathlib.Path(path)
  return path.with_name(path.name + ".tmp")


def temporary_files(path: str | os.PathLike) -> tuple[pathlib.Path, ...]:
  """The temporary files a durable write of ``path`` (an ``.npz``) killed before its rename
  leaves: :func:`temporary`, and the ``.tmp.npz`` name earlier versions wrote. What they
  held was never recorded; a stage removes them before it writes ``path`` again."""
  path = pathlib.Path(path)
  return temporary(path), path.with_name(path.name + ".tmp.npz")


def write_private(path: str | os.PathLike, write: Callable[[BinaryIO], Any]) -> pathlib.Path:
  """Writes ``path`` atomically, durably and owner-only: ``write(f)`` fills a temporary
  file opened by :func:`open_private`, which is synced to disk and renamed over ``path``,
  and then the directory is synced (a record that must survive a crash). A write that
  fails before the rename removes its temporary file (:func:`temporary`; what it held was
  never recorded)."""
  return write_file(path, write, private=True)


def write_file(path: str | os.PathLike, write: Callable[[BinaryIO], Any], *,
               private: bool = False) -> pathlib.Path:
  """Writes ``path`` atomically and durably: ``write(f)`` fills a temporary file
  (:func:`temporary`), which is synced to disk and renamed over ``path``, and then the
  directory is synced. A write that fails before the rename removes its temporary file,
  so a run stopped there leaves no half-written copy beside ``path``.

  ``private``: the temporary file is opened by :func:`open_private` (owner-only, in a
  directory made owner-only) before a byte is written: :func:`write_private`."""
  path = pathlib.Path(path)
  tmp = temporary(path)
  try:
    with open_private(tmp) if private else open(tmp, "wb") as f:
      write(f)
      f.flush()
      os.fsync(f.fileno())
    tmp.replace(path)
  except BaseException:
    tmp.unlink(missing_ok=True)
    raise
  dir_fd = os.open(path.parent, os.O_RDONLY)
  try:
    os.fsync(dir_fd)
  finally:
    os.close(dir_fd)
  return path


def open_private(path: str | os.PathLike, append: bool = False, *,
                 narrow_directory: bool = True):
  """``path`` opened for binary writing (truncated, or appended to), readable by its owner
  only (0600) before a byte is written: a file holding private data (votes, a ledger, an
  archive of a teachers' directory).

  ``narrow_directory``: make its directory owner-only too (:func:`private_directory`):
  whoever may enter a directory reads the size and times of every file in it, and the size
  of a compressed file follows its contents (one teacher's vote would change a compressed
  votes.npz's by bytes; a checkpoint's parameters are compressed). False for a file the
  user sends somewhere of their choosing (a hand-over archive)."""
  if narrow_directory:
    private_directory(pathlib.Path(path).parent)
  flags = os.O_WRONLY | os.O_CREAT | (os.O_APPEND if append else os.O_TRUNC)
  fd = os.open(path, flags, 0o600)
  os.fchmod(fd, 0o600)  # a file that existed keeps its mode through os.open
  return os.fdopen(fd, "ab" if append else "wb")


def copy_file(src: str | os.PathLike, dst: str | os.PathLike) -> pathlib.Path:
  """Copies ``src`` to ``dst`` with its permission bits and its access and modification
  times (a file may carry a time chosen to hide what came after it: the main job's summary
  carries its student's end); an owner-only ``src`` (a file holding private values) stays
  owner-only, in a directory made so (:func:`open_private`)."""
  src, dst = pathlib.Path(src), pathlib.Path(dst)
  st = src.stat()
  if st.st_mode & 0o077:
    shutil.copy(src, dst)
  else:
    with open(src, "rb") as f, open_private(dst) as out:
      shutil.copyfileobj(f, out)
  os.utime(dst, ns=(st.st_atime_ns, st.st_mtime_ns))
  return dst


def set_times(path: str | os.PathLike, when: float) -> None:
  """Sets ``path``'s access and modification times to ``when`` (seconds since the epoch),
  or leaves them where the caller may not (a directory of another user's)."""
  try:
    os.utime(path, (when, when))
  except PermissionError:
    pass


@contextlib.contextmanager
def times_kept(path: str | os.PathLike) -> Iterator[None]:
  """Runs the block, then sets ``path``'s access and modification times back to those it
  had before (where the caller may: a directory of another user's keeps its own). A
  directory's modification time moves when a file is made, renamed or removed in it: kept
  around a private figure's drawing, it does not show how long that took. Its change time
  (ctime) still moves; no call sets it."""
  st = os.stat(path)
  try:
    yield
  finally:  # a block that fails part way took a time of its own
    with contextlib.suppress(PermissionError):
      os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))


def save_figure(fig: Any, path: str | os.PathLike, **kwargs: Any) -> pathlib.Path:
  """Writes the matplotlib ``fig`` to the PNG ``path``, owner-only (:func:`open_private`):
  the library's figures are drawn from runs on private data (``kwargs``: ``savefig``'s)."""
  path = pathlib.Path(path)
  with open_private(path) as f:
    fig.savefig(f, format="png", **kwargs)
  return path


def private_directory(path: str | os.PathLike) -> pathlib.Path:
  """``path`` as a directory only its owner may enter (0700), created if missing and
  narrowed if wider: one that holds an owner-only file (:func:`open_private`), or whose
  files another library writes with its own modes (orbax's checkpoints of parameters
  trained on the private data).

  A directory shared on purpose is left as it is, with a warning: another user's, or one
  with the sticky bit (``/tmp``). One of the user's own keeps its setgid bit (a directory
  made inside a group's project tree inherits it) and loses the group's access."""
  path = pathlib.Path(path)
  path.mkdir(mode=0o700, parents=True, exist_ok=True)
  st = path.stat()
  mode = stat.S_IMODE(st.st_mode)
  if not mode & 0o077:
    return path
  if shared_directory(path):
    warnings.warn(f"{path} is shared (mode {mode:o}, owner uid {st.st_uid}): whoever may "
                  "enter it sees the sizes and times of the owner-only files written in it; "
                  "give the run a directory of its own", stacklevel=2)
    return path
  os.chmod(path, mode & ~0o077)
  return path


def shared_directory(path: str | os.PathLike) -> bool:
  """Whether the existing directory ``path`` is shared on purpose, so that
  :func:`private_directory` leaves it as it is: another user's, or one with the sticky
  bit (``/tmp``), that others may enter."""
  st = os.stat(path)
  mode = stat.S_IMODE(st.st_mode)
  return bool(mode & 0o077) and (st.st_uid != os.geteuid() or bool(mode & stat.S_ISVTX))


def narrow(path: str | os.PathLike) -> None:
  """Makes an existing file owner-only (0600), if it is not already; a missing one is
  left missing: a record an older version wrote readable by others."""
  try:
    if os.stat(path).st_mode & 0o077:
      os.chmod(path, 0o600)
  except FileNotFoundError:
    pass


def narrow_tree(path: str | os.PathLike) -> None:
  """Makes everything inside the directory ``path`` owner-only: files 0600, directories
  0700 (a setgid bit kept), where they are wider: what another library wrote there with
  its own modes (orbax's checkpoints), so that a copy taken out of ``path`` (``cp -r``
  keeps modes) is still its owner's alone. ``path`` itself is left to
  :func:`private_directory`; symbolic links are not followed, and an entry removed while
  the tree is walked (a checkpoint deleted by a save that ends meanwhile) is skipped."""
  for root, dirs, files in os.walk(path):
    for name in dirs + files:
      entry = os.path.join(root, name)
      try:
        st = os.lstat(entry)
        if stat.S_ISLNK(st.st_mode) or not st.st_mode & 0o077:
          continue
        os.chmod(entry, stat.S_IMODE(st.st_mode) & ~0o077 if stat.S_ISDIR(st.st_mode)
                 else 0o600)
      except FileNotFoundError:
        pass


def progress(iterable=None, **kwargs):
  """A tqdm progress bar that writes to stderr and stays quiet when disabled
  (``PATE_JAX_NO_PROGRESS=1``)."""
  from tqdm.auto import tqdm  # pylint: disable=g-import-not-at-top  (only loops need it)
  kwargs.setdefault("dynamic_ncols", True)
  kwargs.setdefault("disable", os.environ.get("PATE_JAX_NO_PROGRESS") == "1")
  return tqdm(iterable, **kwargs)
