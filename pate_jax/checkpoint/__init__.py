"""Orbax checkpoints of a pytree train state, keyed by training step, and what makes a
resume safe: it continues the *same* run, past a corrupted step, in one process at a time.

* **Fingerprint.** :class:`Checkpointer` stores a flat JSON record of everything that
  determines the run (seed, data digest, partition, optimiser, model: see
  :func:`fingerprint`) as ``fingerprint.json`` beside the step directories. A resume
  whose fingerprint differs is refused with :class:`ResumeMismatchError` naming the
  differing fields, unless ``restart=True`` discards the checkpoints and starts over
  (the message says how the caller's user asks for it, ``restart_hint``: a script's
  ``--config.restart=True``, or a main job's ``--config.teachers.restart=True``).
  For PATE this protects the privacy analysis: teachers resumed with another seed would
  continue on *another* partition, so one example could end up in two teachers.
* **Fallback.** :meth:`Checkpointer.restore_or` tries the steps newest first; a step
  that does not restore (truncated or garbage files, missing metadata, an empty
  directory) is moved to ``corrupt/`` and named in one warning line, and the newest
  step that restores is used (none: the run starts over, which for a deterministic run
  gives the same result).
* **Lock.** A :class:`DirectoryLock` (an ``flock``-ed ``.lock`` file holding the pid)
  keeps a second run from using the directory at the same time; it fails fast with
  :class:`LockedError` naming the holder. The kernel drops the lock when its process
  dies, so the lock of a killed run is taken over (and said so).
* **Disk.** ``max_to_keep`` steps are kept while a run trains (1 by default: what a resume
  needs). :meth:`Checkpointer.complete` marks a finished run in ``completed.json`` (its
  step and fingerprint) and deletes the step directories unless asked to keep them: a
  stage's outputs (votes, labels, results) are what a rerun reuses
  (:meth:`Checkpointer.completed`; :func:`read_completed` reads the record). orbax's
  "Waiting for previous save" warning is dropped (its time is in
  :attr:`Checkpointer.blocking_seconds`), so it does not break the progress bar.
* **Modes.** The directory is made owner-only (0700) when it is opened; orbax writes its
  files with its own modes (0644 under the usual umask). A checkpointer told its state is
  private (``private=True``: the caller, a stage, knows) makes every file 0600 and every
  directory 0700 as each save is finalised (orbax's post-finalisation callback, before the
  step is renamed into place; orbax's commit marker, written after, at the next save, wait
  or close), and narrows what an earlier run left wider when it opens the directory, so
  that a copy taken out of it stays owner-only.
* **The loop.** :func:`run_segments` is the one training loop of the teachers, the students
  and the KD-GAN: compiled segments, a checkpoint and a record after each; the records
  (:meth:`Checkpointer.save_history`) are restored with the state. :func:`segment_lengths`
  gives the lengths it will run (the programs to compile ahead), :func:`committed_state`
  the placement it runs them for (a fresh state placed as a restored one).
* **Paths.** orbax globs inside the directory without escaping it, so under a path with
  ``[`` (``runs/run[1]``, a character class to glob) the glob matched nothing and no step
  restored: orbax is given a directory whose path holds ``[``, ``*`` or ``?`` through a
  symlink of a plain name.
"""

from pate_jax.checkpoint._checkpointer import CORRUPT_DIR, Checkpointer, PyTree
from pate_jax.checkpoint._fingerprint import (
    COMPLETED_FILE,
    FINGERPRINT_FILE,
    ResumeMismatchError,
    check_restart_hint,
    fingerprint,
    fingerprint_diff,
    how_to_restart,
    read_completed,
)
from pate_jax.checkpoint._lock import LOCK_FILE, DirectoryLock, LockedError, check_directory
from pate_jax.checkpoint._segments import (
    Segments,
    committed_state,
    run_segments,
    segment_lengths,
)
