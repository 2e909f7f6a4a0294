"""One process at a time in a directory: :class:`DirectoryLock`.

Owns the ``flock``-ed lock file holding the holder's pid (:data:`LOCK_FILE`), the error a
second run gets (:class:`LockedError`), the takeover of a stale lock, and
:func:`check_directory` (a path that is, or can become, a writable directory).
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import logging
import os
import pathlib

LOCK_FILE = ".lock"

_log = logging.getLogger("pate_jax.checkpoint")  # the package's logger


class LockedError(RuntimeError):
  """The directory is in use by another run (or another object of this process)."""


def check_directory(directory: str | os.PathLike, name: str = "directory") -> pathlib.Path:
  """``directory`` as an absolute path, which is or can become a writable directory.

  Raises:
    NotADirectoryError: it, or a parent, is a file.
    PermissionError: it exists and is not writable.
  """
  path = pathlib.Path(directory).absolute()
  for p in (path, *path.parents):
    if p.exists():
      if not p.is_dir():
        raise NotADirectoryError(
            f"{name}: {p} is not a directory (a file is in the way of {path}); move or "
            "delete it, or use another --workdir")
      if p == path and not os.access(p, os.W_OK | os.X_OK):
        raise PermissionError(f"{name}: {p} is not writable")
      break
  return path


def _pid_alive(pid: int) -> bool:
  try:
    os.kill(pid, 0)
  except ProcessLookupError:
    return False
  except PermissionError:
    return True
  return True


class DirectoryLock:
  """One process at a time in ``directory``: an ``flock`` on ``<directory>/.lock``.

  The file holds the holder's pid, for the message a second run gets; the kernel
  releases the lock when the holder exits or is killed, so a stale lock (a pid that no
  longer runs) is taken over with a warning. Let go, the file is emptied and keeps the
  access and modification times of its taking (the run's start), not the run's end. Use
  as a context manager or call :meth:`acquire` / :meth:`release`.
  """

  def __init__(self, directory: str | os.PathLike, name: str = LOCK_FILE):
    self.directory = pathlib.Path(directory).absolute()
    self.path = self.directory / name
    self._fd: int | None = None
    self._taken: os.stat_result | None = None  # the file's times when it was taken

  @property
  def held(self) -> bool:
    return self._fd is not None

  def acquire(self) -> "DirectoryLock":
    """Takes the lock or raises :class:`LockedError` at once (never waits)."""
    if self._fd is not None:
      return self
    check_directory(self.directory)
    self.directory.mkdir(parents=True, exist_ok=True)
    fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
      fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as e:
      holder = os.pread(fd, 200, 0).decode(errors="replace").split()
      os.close(fd)
      if e.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
        raise
      pid = holder[0] if holder else "?"
      this = " (this process: close the other user of the directory first)" if (
          pid == str(os.getpid())) else ""
      raise LockedError(
          f"{self.directory} is in use by process {pid}{this} (lock file {self.path}); two "
          "runs in one directory would overwrite each other's checkpoints and results. Wait "
          "for it to end, or use another --workdir") from None
    previous = os.pread(fd, 200, 0).decode(errors="replace").split()
    if previous and previous[0] != str(os.getpid()):
      state = "" if not previous[0].isdigit() or _pid_alive(int(previous[0])) else \
          ", no longer running"
      _log.warning("%s: took over the stale lock of process %s%s", self.directory,
                   previous[0], state)
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
    self._fd, self._taken = fd, os.fstat(fd)
    return self

  def release(self) -> None:
    if self._fd is None:
      return
    fd, self._fd = self._fd, None
    with contextlib.suppress(OSError):
      os.ftruncate(fd, 0)  # the file stays (deleting it would race with a new holder)
      # It keeps the times of its taking: emptying it would set them to the run's end,
      # after the private figures a run draws last.
      os.utime(fd, ns=(self._taken.st_atime_ns, self._taken.st_mtime_ns))
    fcntl.flock(fd, fcntl.LOCK_UN)
    os.close(fd)

  def __enter__(self) -> "DirectoryLock":
    return self.acquire()

  def __exit__(self, *exc) -> None:
    self.release()

  def __del__(self):
    try:
      self.release()
    except Exception:  # pylint: disable=broad-except  # at interpreter exit modules are gone
      pass
