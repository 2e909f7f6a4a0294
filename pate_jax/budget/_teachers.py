"""The one budget of a set of teachers: :class:`TeachersBudget`.

Owns spending it: reading the newest ledger file under the lock and checking it against
the votes and the journal (its digest, generation, settings and recomputed cost), answering
new rows through a :class:`pate_jax.ledger.PrivateAggregator` and returning recorded ones
free, writing the next generation, and drawing the smooth-sensitivity releases. The
rules are described in :mod:`pate_jax.budget`.
"""

from __future__ import annotations

import json
import math
import os
import pathlib
from typing import Any
import warnings

import jax
import numpy as np

from pate_jax import _checks
from pate_jax import accounting as acc
from pate_jax import io
from pate_jax import ledger as ledger_lib
from pate_jax import mechanisms
from pate_jax.budget._files import (
    JOURNAL_SUFFIX,
    LEDGER_FILE,
    LOCK_SUFFIX,
    RESEARCH_LEDGER_FILE,
    BudgetError,
    _Loaded,
    _locked,
    votes_digest,
)
from pate_jax.budget._registry import BudgetRegistry
from pate_jax.budget._release import DEFAULT_BETA_TIMES_ORDER, ReleaseSpec


_ANSWERED = int(ledger_lib.Status.ANSWERED)
_NOT_CONFIDENT = int(ledger_lib.Status.NOT_CONFIDENT)
_REFUSED = int(ledger_lib.Status.REFUSED_BUDGET)
_CHARGED = (_ANSWERED, _NOT_CONFIDENT)


def check_releasable(votes: dict[str, Any], research_seed: int | None) -> None:
  """Refuses secret noise (``research_seed`` ``None``) on votes that carry
  ``not_releasable`` (:mod:`pate_jax.votes`: their teachers' data was prepared by looking
  at its private rows, so no ε of them holds for the data), with a ``ValueError`` that
  gives the votes' reason. Research noise (private as a whole) may measure them.
  """
  if research_seed is None and votes.get("not_releasable"):
    raise ValueError("votes: no release may be drawn with secret noise from these votes: "
                     f"{votes['not_releasable']} (a research noise seed may still measure "
                     "them, private as a whole)")


class TeachersBudget:
  """The one budget of a set of teachers (module docstring).

  Args:
    directory: where the ledger lives: the teachers' directory (beside votes.npz) for
      secret noise, the run's work directory for a research seed.
    votes: :func:`pate_jax.votes.load_votes` of the teachers.
    key: the noise key of the answers (:func:`pate_jax.rng.noise_key`).
    mechanism: a registered :class:`pate_jax.mechanisms.Mechanism` (or its name).
    params: its parameters.
    epsilon_max: the budget (finite for a release; ``inf`` only for research).
    delta: δ.
    orders, max_moment, data_dependent, conversion, chunk_size: as in
      :class:`pate_jax.ledger.PrivateAggregator` (no ``consistent``: the budget answers a
      row once and returns its record after, which is consistent by construction).
    release: the :class:`ReleaseSpec` of the private ε's release (GNMax and
      Confident-GNMax with ``data_dependent``), or ``None`` (no release).
    release_by_rule: ``release`` came from a data-independent rule (the settings only, e.g.
      :func:`default_release_order` of the queries asked now): a ledger created earlier
      keeps the spec it was created with, which is adopted instead. Otherwise a ledger with
      another spec is refused.
    research_seed: the research noise seed (``None``: secret noise). It is recorded and
      must match the ledger's.
    release_key: the noise key of the releases (the k-th uses ``fold_in(key, k)``).
    registry: the :class:`BudgetRegistry` where a secret-noise budget registers before it
      is charged, keyed by the votes' ``private_data`` (votes without it, and research
      budgets, do not register); ``None``: none. Votes the registry holds under other
      private data are refused, and votes whose ``private_data`` was removed take the
      registry's (:meth:`BudgetRegistry.data_of`).
    another_budget: register this budget even where the registry holds another budget on
      the same private data (whose ε adds to this one's); otherwise that is refused.
    private_data: the registry's key where the votes carry none (votes.npz written before
      its ``private_data`` field: the digest the teachers' run recorded).

  Raises:
    ValueError: secret noise on votes that carry ``not_releasable`` (their teachers' data
      was prepared by looking at its private rows: no ε of them holds for the data; the
      message gives the votes' reason), or a bad setting.
  """

  def __init__(self, directory: str | os.PathLike, votes: dict[str, Any], key: jax.Array, *,
               mechanism: mechanisms.Mechanism | str, params: dict[str, float],
               epsilon_max: float, delta: float,
               orders: Any = None, max_moment: int = 8, data_dependent: bool = True,
               conversion: str = "improved", chunk_size: int = 256,
               release: ReleaseSpec | None = None,
               research_seed: int | None = None, release_key: jax.Array | None = None,
               release_by_rule: bool = False, registry: BudgetRegistry | None = None,
               another_budget: bool = False, private_data: str | None = None):
    check_releasable(votes, research_seed)
    if research_seed is None and not math.isfinite(float(epsilon_max)):
      raise ValueError("epsilon_max must be finite with secret noise (research_seed None): a "
                       f"release needs a budget; got {epsilon_max!r} (inf is for research "
                       "runs, with a research_seed)")
    self.directory = pathlib.Path(directory)
    self.path = self.directory / (LEDGER_FILE if research_seed is None
                                  else RESEARCH_LEDGER_FILE)
    self.votes = np.asarray(votes["votes"])
    self.index = np.asarray(votes["index"])
    self.digest = votes_digest(votes)
    self.key, self.release_key = key, release_key
    self.mechanism = mechanisms.get(mechanism)
    self.params = {k: float(x) for k, x in mechanisms.check_params(self.mechanism,
                                                                   dict(params)).items()}
    self.aggregator_kwargs = dict(
        epsilon_max=epsilon_max, delta=delta, orders=orders, max_moment=max_moment,
        data_dependent=data_dependent, conversion=conversion,
        chunk_size=chunk_size, **self.params)
    self.release_spec = release
    self.release_by_rule = bool(release_by_rule)
    if release is not None and (not self.mechanism.accountant_kind.releasable
                                or not data_dependent):
      raise ValueError("release: a smooth-sensitivity release exists for the data-dependent "
                       "ε of GNMax and Confident-GNMax only; got mechanism "
                       f"{self.mechanism.name!r}, data_dependent={data_dependent}")
    self.num_classes = int(self.votes.shape[1])
    if release is not None:  # The 2018 analysis holds only where C5 and C6 hold.
      acc.check_release_order(self.params["sigma"], self.num_classes, release.order,
                              "release.order")
    self.research_seed = research_seed
    self.noise = "secret" if research_seed is None else f"research:{int(research_seed)}"
    self.private_data = votes.get("private_data") or private_data
    if registry is not None and research_seed is None:
      self.private_data = registry.key_of(self.digest, self.private_data, self.directory)
    self.registry = registry if research_seed is None and self.private_data else None
    self.another_budget = bool(another_budget)
    # One empty aggregator up front: validates the settings before anything is read.
    self._settings = self._aggregator(None).ledger_record()

  # -- files
  @property
  def journal(self) -> pathlib.Path:
    return self.path.with_name(self.path.name + JOURNAL_SUFFIX)

  @property
  def lock_path(self) -> pathlib.Path:
    return self.path.with_name(self.path.name + LOCK_SUFFIX)

  def _claim(self) -> None:
    """Registers this budget on its private data before it is charged (a no-op once
    registered, or without a registry): refused where another set of teachers holds a
    budget on the same data, unless ``another_budget``."""
    if self.registry is not None:
      generation, sha = self._journal_last() or (0, "")
      self.registry.claim(self.private_data, self.digest, self.directory,
                          another=self.another_budget, generation=generation, sha256=sha)

  def _sync(self) -> None:
    """Checks the ledger just read or written (its journal) against the registry's entry
    of this budget, which follows it: an older or copied ledger, or one deleted and
    started over, is refused."""
    if self.registry is not None:
      self.registry.sync(self.private_data, self.digest, self.directory, self._journal())

  def budgets_on_data(self) -> int | None:
    """How many budgets the registry holds on these teachers' private data (their ε add
    up); ``None`` where none is kept (no registry, votes without ``private_data``, or a
    research budget)."""
    if self.registry is None:
      return None
    return len(self.registry.budgets(self.private_data))

  def _aggregator(self, record: dict | None) -> ledger_lib.PrivateAggregator:
    return ledger_lib.PrivateAggregator(self.key, self.mechanism, ledger=record,
                                        **self.aggregator_kwargs)

  def _journal(self, content: str | None = None) -> list[tuple[int, str]]:
    """The journal's lines, ``(generation, SHA-256)`` per write, in order (``content``:
    the journal's text, else read from its file)."""
    if content is None:
      if not self.journal.exists():
        return []
      content = self.journal.read_text()
    out: list[tuple[int, str]] = []
    for n, text in enumerate(content.splitlines(), 1):
      line = text.split()
      if not line:
        continue
      # Each line is "<generation> <SHA-256>", generations never going back: a line that
      # names an older generation after a newer one would make an older ledger newest.
      if (len(line) != 2 or not line[0].isascii() or not line[0].isdigit()
          or not _checks.is_sha256(line[1]) or int(line[0]) < 1
          or (out and int(line[0]) < out[-1][0])):
        raise BudgetError(f"{self.journal}: line {n} is not '<generation> <SHA-256>' after "
                          f"generation {out[-1][0] if out else 0} (got {text[:80]!r}): the "
                          "journal was altered; restore it (it records every spend)")
      out.append((int(line[0]), line[1]))
    return out

  def _complete_journal(self) -> None:
    """Completes a journal line whose append was cut short (a crash, a full disk: the
    journal's bytes after its last newline), where they begin the line of the ledger file
    that the append was recording: the journal's next generation, naming its newest file as
    its previous one (caller holds the lock). The rest of the line is appended, so that the
    journal reads as if the append had ended; any other unfinished line is left to
    :meth:`_journal`, which refuses it."""
    if not self.journal.exists() or not self.path.exists():
      return
    text = self.journal.read_bytes()
    torn = text[text.rfind(b"\n") + 1:]
    if not torn:
      return
    try:
      with np.load(self.path, allow_pickle=False) as f:
        generation, previous = int(np.asarray(f["generation"])), str(f["previous"])
    except Exception:  # pylint: disable=broad-except  (_read says what is wrong with it)
      return
    lines = self._journal(text[:len(text) - len(torn)].decode("utf-8", "replace"))
    last = lines[-1] if lines else (0, "")
    line = f"{generation} {io.file_digest(self.path)}\n".encode()
    if (generation, previous) == (last[0] + 1, last[1]) and line.startswith(torn):
      with io.open_private(self.journal, append=True) as f:
        f.write(line[len(torn):])
        f.flush()
        os.fsync(f.fileno())

  def _journal_last(self) -> tuple[int, str] | None:
    lines = self._journal()
    return lines[-1] if lines else None

  def _read(self) -> _Loaded | None:
    """The verified ledger file, or ``None`` for a budget never spent (caller holds the
    lock). A write killed before its rename left its temporary file: it is removed, since
    its answers were neither recorded nor returned, and kept beside the answers the run
    draws again it would hold a second noisy answer to the same rows. One killed while
    appending its journal line left part of it: it is completed
    (:meth:`_complete_journal`)."""
    io.temporary(self.path).unlink(missing_ok=True)
    self._complete_journal()
    last = self._journal_last()
    if not self.path.exists():
      if last is not None:
        raise BudgetError(f"{self.path} is missing but {self.journal} records "
                          f"{last[0]} spends: this budget was spent; restore the file (a "
                          "deleted ledger does not give the budget back)")
      self._sync()
      return None
    sha = io.file_digest(self.path)
    try:
      with np.load(self.path, allow_pickle=False) as f:
        data = {k: f[k] for k in f.files}
    except Exception as e:  # pylint: disable=broad-except
      raise BudgetError(f"{self.path}: not a readable ledger ({type(e).__name__}: {e})") from e
    generation = int(np.asarray(data.get("generation", -1)))
    previous = str(data.get("previous", ""))
    if last is None and generation == 1 and previous == "":
      last = (0, "")  # The first write, interrupted before its journal line.
    if last is None or generation < last[0] or (generation == last[0] and sha != last[1]):
      known = "no journal" if last is None else f"the journal's generation {last[0]}"
      raise BudgetError(f"{self.path} is not the newest copy of this budget (generation "
                        f"{generation}, {known}): an older or copied ledger cannot spend "
                        "again")
    if generation > last[0] + 1:
      raise BudgetError(f"{self.path}: generation {generation} skips the journal's "
                        f"{last[0]}: the ledger does not belong to this journal")
    if generation == last[0] + 1:  # Written, then interrupted before its journal line:
      if previous != last[1]:      # only the next write of this journal's newest file.
        raise BudgetError(f"{self.path}: generation {generation} does not extend the "
                          f"journal's generation {last[0]} (it names another file as its "
                          "previous generation): a ledger from another directory cannot "
                          "spend here")
      self._append_journal(generation, sha)
    loaded = self._verify(data, generation)
    self._sync()
    return loaded

  def _verify(self, data: dict[str, np.ndarray], generation: int) -> _Loaded:
    """Checks a ledger file's digest, settings and cost against the votes."""
    where = str(self.path)
    if str(data.get("votes_digest", "")) != self.digest:
      raise BudgetError(f"{where} was spent on other votes than these (votes.npz digest "
                        f"{self.digest[:12]}..., ledger {str(data.get('votes_digest'))[:12]}"
                        "...): a budget belongs to the votes it was spent on")
    if str(data.get("noise", "")) != self.noise:
      raise BudgetError(f"{where}: its noise is {str(data.get('noise'))!r}, this run's is "
                        f"{self.noise!r}; secret and research answers never share a budget")
    raw = {k: np.asarray(data[k]) for k in ("rows", "row_labels", "row_status",
                                             "release_count", "releases_paid")}
    # Integers only, and none that a cast would wrap (2**32 + 3 read as label 3).
    if any(a.dtype.kind not in "iu" or np.any(a != a.astype(np.int32)) for a in raw.values()):
      raise BudgetError(f"{where}: rows, row_labels, row_status, release_count and "
                        "releases_paid must be integers (int32 range)")
    rows = raw["rows"].astype(np.int64)
    labels = raw["row_labels"].astype(np.int32)
    status = raw["row_status"].astype(np.int32)
    n = rows.shape[0] if rows.ndim else -1
    if (rows.ndim != 1 or labels.shape != (n,) or status.shape != (n,)
        or raw["release_count"].shape != () or raw["releases_paid"].shape != ()
        or np.unique(rows).size != n or (n and (rows.min() < 0 or rows.max() >= len(self.votes)))
        or not np.all(np.isin(status, _CHARGED))
        or np.any((labels >= 0) != (status == _ANSWERED)) or np.any(labels >= self.num_classes)):
      raise BudgetError(f"{where}: rows, row_labels and row_status must list distinct rows of "
                        "votes.npz with their outcomes")
    record = {k: data[k] for k in ledger_lib.RECORD_KEYS}
    try:
      aggregator = self._aggregator(record)  # Checks the settings, ε of its cost, counters.
    except ledger_lib.StaleLedgerError:
      raise
    except ValueError as e:
      raise BudgetError(f"{where}: {e}; one budget per set of teachers: another setting "
                        "needs other teachers") from e
    release_count = int(np.asarray(data["release_count"]))
    releases_paid = int(np.asarray(data["releases_paid"]))
    if not 0 <= release_count <= releases_paid:
      raise BudgetError(f"{where}: release_count {release_count} and releases_paid "
                        f"{releases_paid} must satisfy 0 <= drawn <= paid")
    spec = (None if not np.isfinite(np.asarray(data["release_order"]))
            else ReleaseSpec(float(data["release_order"]), float(data["release_beta"]),
                             float(data["release_sigma_ss"])))
    if spec is not None and self.release_spec is not None and self.release_by_rule:
      asked = self.release_spec
      explicit_beta = not math.isclose(asked.beta * asked.order, DEFAULT_BETA_TIMES_ORDER)
      if spec.sigma_ss != asked.sigma_ss or (explicit_beta and spec.beta != asked.beta):
        warnings.warn(f"{where}: its release keeps the σ_ss {spec.sigma_ss:g} and β "
                      f"{spec.beta:g} it was created with; this run's ({asked.sigma_ss:g}, "
                      f"{asked.beta:g}) are not used (the release parameters are fixed once "
                      "per budget)", stacklevel=2)
      self.release_spec = spec  # The rule's value when the ledger was created.
      acc.check_release_order(self.params["sigma"], self.num_classes, spec.order,
                              f"{where}: its release order")
    if spec != self.release_spec:
      raise BudgetError(f"{where}: its release parameters are {spec}, this run asks for "
                        f"{self.release_spec}; they are fixed once per budget")
    self._check_cost(where, record, rows, status, releases_paid)
    try:
      release = json.loads(str(data["release_json"])) if str(data["release_json"]) else None
    except ValueError as e:
      raise BudgetError(f"{where}: release_json is not readable ({e})") from e
    self._check_release(where, release, release_count, n, float(record["ledger_epsilon"]))
    return _Loaded(record, rows, labels, status, release_count, releases_paid, release,
                   generation, aggregator)

  def _check_release(self, where: str, release: Any, release_count: int, num_rows: int,
                     epsilon: float) -> None:
    """The stored release is the ``release_count``-th drawn with this budget's spec, of at
    most the recorded rows, its ε a number in the range it was clipped to (at most the
    budget's ε; a release written before releases were clipped records no range, and its ε
    is a number): :meth:`release` returns it as it is, and it is published."""
    if release is None and release_count == 0:
      return
    pub = release.get("public") if isinstance(release, dict) else None
    real = lambda x: type(x) in (int, float) and math.isfinite(x)  # noqa: E731 (not bool)
    spec = self.release_spec
    clipped = pub.get("clipped_to") if isinstance(pub, dict) else None
    ok = (isinstance(pub, dict) and isinstance(release.get("private"), dict)
          and spec is not None and type(pub.get("release")) is int
          and pub["release"] == release_count and type(pub.get("num_charged")) is int
          and 1 <= pub["num_charged"] <= num_rows and real(pub.get("epsilon_released"))
          and (clipped is None or (
              isinstance(clipped, list) and len(clipped) == 2 and all(map(real, clipped))
              and 0.0 <= pub["epsilon_released"] <= clipped[1] <= epsilon))
          and (pub.get("order"), pub.get("beta"), pub.get("sigma_ss")) == tuple(spec))
    if not ok:
      raise BudgetError(f"{where}: release_json is not release {release_count} of this "
                        "budget (its number, the rows it covers, its ε within the range it was "
                        "clipped to, its parameters): the ledger was altered")

  def _check_cost(self, where: str, record: dict, rows: np.ndarray, status: np.ndarray,
                  releases_paid: int) -> None:
    """The recorded costs and counters are those of the recorded answers (recomputed)."""
    orders = np.asarray(record["ledger_orders"], np.float64)
    answered = status == _ANSWERED
    bound, private = self._answers_cost(rows, answered, orders)
    extra = (releases_paid * self.release_spec.rdp_curve(orders)
             if releases_paid else np.zeros_like(orders))
    checks = {"ledger_cost": bound + extra, "ledger_private_cost": private,
              "ledger_extra_cost": extra}
    for key, want in checks.items():
      got = np.asarray(record[key], np.float64)
      same = np.isclose(got, want, rtol=1e-9, atol=1e-12) | ((got == want) & np.isinf(want))
      if not np.all(same):  # the data-dependent cost is private: its values are not shown
        values = ("" if key in ledger_lib.PRIVATE_RECORD_KEYS else
                  f" (recorded {got.tolist()}, recomputed {want.tolist()})")
        raise BudgetError(f"{where}: {key} is not the cost of the recorded answers on "
                          f"votes.npz{values}: the ledger was altered")
    if (int(record["ledger_num_charged"]) != rows.size
        or int(record["ledger_num_answered"]) != int(answered.sum())):
      raise BudgetError(f"{where}: its counters are not those of its recorded answers")

  def _answers_cost(self, rows: np.ndarray, answered: np.ndarray,
                    orders: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(bound, private)`` composed costs ``[K]`` of the answers to ``rows``."""
    if not rows.size:
      return np.zeros_like(orders), np.zeros_like(orders)
    # Padded (one compile per bucket; the padding rows are not summed).
    votes, ans = mechanisms.padded_queries(self.votes[rows].astype(np.int32), answered)
    dd = bool(self.aggregator_kwargs["data_dependent"])
    with jax.enable_x64(True):
      m = self.mechanism
      costs = [np.asarray(m.cost(votes, ans, self.params, orders, flag), np.float64)
               for flag in ((False, True) if dd else (False,))]
    bound = costs[0][:rows.size].sum(0)
    return bound, (costs[1][:rows.size].sum(0) if dd else bound)

  def _empty(self) -> _Loaded:
    """A budget never spent (generation 0)."""
    return _Loaded(self._settings, np.zeros(0, np.int64), np.zeros(0, np.int32),
                   np.zeros(0, np.int32), 0, 0, None, 0)

  def _write(self, loaded: _Loaded) -> None:
    """Writes ``loaded`` as the next generation: the file (atomically), then its journal
    line."""
    spec = self.release_spec
    nan = np.float64(np.nan)
    last = self._journal_last()  # The file this one follows (its SHA-256: "previous").
    previous = last[1] if last is not None and loaded.generation else ""
    loaded.generation += 1
    # Atomically and durably (file, then directory), owner-only: its answers are the votes'.
    io.write_private(self.path, lambda f: np.savez(
        f, **loaded.record, votes_digest=np.str_(self.digest), noise=np.str_(self.noise),
        generation=np.int64(loaded.generation), previous=np.str_(previous),
        rows=np.asarray(loaded.rows, np.int64),
        row_labels=np.asarray(loaded.labels, np.int32),
        row_status=np.asarray(loaded.status, np.int32),
        release_order=np.float64(spec.order) if spec else nan,
        release_beta=np.float64(spec.beta) if spec else nan,
        release_sigma_ss=np.float64(spec.sigma_ss) if spec else nan,
        release_count=np.int64(loaded.release_count),
        releases_paid=np.int64(loaded.releases_paid),
        release_json=np.str_(json.dumps(loaded.release) if loaded.release else "")))
    sha = io.file_digest(self.path)
    self._append_journal(loaded.generation, sha)
    self._sync()

  def _append_journal(self, generation: int, sha: str) -> None:
    with io.open_private(self.journal, append=True) as f:
      f.write(f"{generation} {sha}\n".encode())
      f.flush()
      os.fsync(f.fileno())

  # -- public
  def answer(self, rows: Any) -> ledger_lib.BatchResult:
    """Answers rows of votes.npz, in order, within the budget.

    A row answered before (in any work directory) returns its recorded outcome and costs
    nothing (``repeated``); new rows go through the aggregator, whose refusals depend only
    on the data-independent bound; once one is refused, every later new row is.

    Args:
      rows: int ``[B]`` rows of votes.npz (repeats within the batch are answered once).

    Returns:
      A :class:`pate_jax.ledger.BatchResult` of numpy arrays.
    """
    rows = np.asarray(rows)
    if rows.ndim != 1 or rows.dtype.kind not in "iu" or (
        rows.size and (rows.min() < 0 or rows.max() >= len(self.votes))):
      raise ValueError(f"rows must be a 1-D integer array of rows of votes.npz (0 to "
                       f"{len(self.votes) - 1}); got {rows!r}")
    rows = rows.astype(np.int64)
    with _locked(self.lock_path):
      loaded = self._read() or self._empty()
      known = {int(r): (int(lab), int(st))
               for r, lab, st in zip(loaded.rows, loaded.labels, loaded.status)}
      new = np.array([r for r in dict.fromkeys(rows.tolist()) if r not in known], np.int64)
      if new.size:
        self._claim()
        aggregator = loaded.aggregator or self._aggregator(None)
        spent = aggregator.generation
        try:
          self._answer_new(loaded, aggregator, new, known)
        except BaseException:
          # Nothing of it was returned, and the file (if not written) is still the record:
          # a retry in this process resumes from it, as a new process would.
          aggregator.discard_since(spent)
          raise
      labels = np.full(rows.size, mechanisms.NOT_ANSWERED, np.int32)
      status = np.full(rows.size, _REFUSED, np.int32)
      repeated = np.zeros(rows.size, bool)
      seen: set[int] = set()
      fresh = set(new.tolist())
      for i, r in enumerate(rows.tolist()):
        if r in known:
          labels[i], status[i] = known[r]
          repeated[i] = r not in fresh or r in seen
        seen.add(r)
      return ledger_lib.BatchResult(labels, status, repeated)

  def _answer_new(self, loaded: _Loaded, aggregator: ledger_lib.PrivateAggregator,
                  new: np.ndarray, known: dict[int, tuple[int, int]]) -> None:
    """Answers the rows ``new`` that no run answered before (caller holds the lock), a
    release paid for first where new answers need one, records their outcomes in
    ``known`` and ``loaded`` and writes the next generation where anything was charged."""
    spent = aggregator.generation
    paid = loaded.releases_paid
    if self.release_spec is not None and paid == loaded.release_count:
      # New answers need a release of their own: reserve (pay for) it first, so that
      # answering never leaves too little budget to release what it cost.
      if aggregator.charge(self.release_spec.rdp_curve(aggregator.orders)):
        paid += 1
      elif not loaded.generation:
        raise BudgetError(f"epsilon_max {aggregator.epsilon_max:g} leaves no room for "
                          f"the release of the private ε ({self.release_spec}); raise "
                          "it or release nothing")
    if paid > loaded.release_count or self.release_spec is None:
      out = aggregator.answer(self.votes[new])
      ok = out.status != _REFUSED
      for r, lab, st in zip(new[ok], out.labels[ok], out.status[ok]):
        known[int(r)] = (int(lab), int(st))
      loaded.rows = np.concatenate([loaded.rows, new[ok]])
      loaded.labels = np.concatenate([loaded.labels, out.labels[ok]]).astype(np.int32)
      loaded.status = np.concatenate([loaded.status, out.status[ok]]).astype(np.int32)
    if aggregator.generation != spent:  # Something was charged: the file follows.
      loaded.record, loaded.releases_paid = aggregator.ledger_record(), paid
      self._write(loaded)

  def releases_after(self, rows: Any) -> int:
    """How many releases of ε the ledger will hold once ``rows`` are asked of it
    (:meth:`answer`) and :meth:`release` is called: those drawn so far, and one more where
    a release is due, that is where a row not charged before is asked or the newest
    release does not cover every charged row (a run killed between its answers and its
    release). An upper bound by one where the budget refuses every new row (nothing new is
    charged, and nothing is released). Public: counts of the ledger, not the votes."""
    if self.release_spec is None:
      return 0
    with _locked(self.lock_path):
      loaded = self._read() or self._empty()
    asks_new = np.setdiff1d(np.asarray(rows), loaded.rows).size > 0
    due = asks_new or (loaded.rows.size > 0 and _release_due(loaded.release, loaded.rows))
    return loaded.release_count + int(due)

  @property
  def epsilon(self) -> float:
    """The budget's data-independent ε so far (labels and releases): publishable."""
    return float(self.state()["record"]["ledger_epsilon"])

  def state(self) -> dict[str, Any]:
    """The ledger as it stands: ``record``, ``rows``, ``labels``, ``status`` (all
    private) and ``release`` (``None`` if none was drawn)."""
    with _locked(self.lock_path):
      return (self._read() or self._empty()).public_view()

  def release(self) -> dict[str, Any] | None:
    """The smooth-sensitivity release of the private ε of everything charged so far.

    Drawn once per ledger state: if the newest release already covers every charged
    query it is returned as it is; otherwise a new one is drawn with the fixed
    :class:`ReleaseSpec`, already paid for (:meth:`answer` charges a release before the
    first new row it answers after one was drawn; a ledger whose rows outrun the releases
    paid for was not written so, and is refused). ``None`` without a spec or with nothing
    charged.

    Returns:
      ``{"public": {...}, "private": {...}}``: ``public`` may be published (the released
      ε and the range it is clipped to, δ, the fixed λ, β, σ_ss, the conversion, which
      release of this ledger it is and how many queries it covers); ``private`` is for
      the data owner only. A release an older version stored unclipped (no
      ``clipped_to``) is returned on the grid and clipped (:func:`_published`).
    """
    if self.release_spec is None:
      return None
    with _locked(self.lock_path):
      loaded = self._read()  # (Adopts the ledger's spec when ours came from the rule.)
      if loaded is None or not loaded.rows.size:
        return None
      if not _release_due(loaded.release, loaded.rows):
        return _published(loaded.release, float(loaded.record["ledger_epsilon"]))
      count = loaded.release_count + 1
      if count > loaded.releases_paid:
        raise BudgetError(f"{self.path}: release {count} of {int(loaded.rows.size)} charged "
                          f"rows, {loaded.releases_paid} paid for: answers charge each "
                          "release before its rows, so this ledger was not written by them")
      self._claim()
      loaded.release, loaded.release_count = self._draw(loaded, count), count
      loaded.record = loaded.aggregator.ledger_record()
      self._write(loaded)
      return loaded.release

  def _draw(self, loaded: _Loaded, count: int) -> dict[str, Any]:
    """The ``count``-th release (GNSS) of the ledger's charged queries."""
    spec = self.release_spec
    kw = self.aggregator_kwargs
    # The answer noise is `sigma`; any other parameter (Confident-GNMax's threshold check)
    # is released with the answers.
    extra = {k: x for k, x in self.params.items() if k != self.mechanism.noise_param}
    rel = acc.smooth_sensitivity_release(
        self.votes[loaded.rows], sigma=self.params["sigma"], order=spec.order,
        betas=np.array([spec.beta]), sigma_ss=spec.sigma_ss, delta=kw["delta"],
        answered=loaded.status == _ANSWERED, conversion=kw["conversion"],
        num_teachers=int(self.votes[loaded.rows[0]].sum()), **extra)
    key = self.release_key
    if key is None:
      raise ValueError("release_key: a release needs its noise key (pate_jax.rng.noise_key)")
    f = lambda x: float(np.asarray(x))  # noqa: E731
    expected = f(rel.epsilon) + (count - 1) * f(rel.rdp_release)
    # The k-th release's noise from fold_in(key, k), on the fixed grid of release_epsilon,
    # clipped to the budget's data-independent ε with this release charged (public; it
    # bounds the loss whatever the draw, and makes the sampler's δ term public).
    upper = float(loaded.aggregator.ledger_record()["ledger_epsilon"])
    released = f(acc.release_epsilon(jax.random.fold_in(key, count),
                                     rel._replace(epsilon=np.float64(expected)), upper))
    return {
        "public": {"epsilon_released": released, "clipped_to": [0.0, upper],
                   "delta": float(kw["delta"]),
                   "order": spec.order, "beta": spec.beta, "sigma_ss": spec.sigma_ss,
                   "conversion": kw["conversion"], "release": count,
                   "num_charged": int(loaded.rows.size)},
        "private": {"epsilon_data_dependent": f(rel.epsilon_before),
                    "epsilon_expected_release": expected,
                    "rdp_data_dependent": f(rel.rdp), "rdp_release": f(rel.rdp_release),
                    "smooth_sensitivity": f(rel.smooth_sensitivity),
                    "noise_std": f(rel.noise_std)},
    }


def _published(release: dict[str, Any], upper: float) -> dict[str, Any]:
  """A stored release as it may be published.

  One drawn by this version is returned as it is. One an older version stored before
  releases were rounded and clipped (no ``clipped_to``) holds the float64 bits of
  ``e + std·z``, which can tell neighbouring votes apart
  (:func:`pate_jax.accounting.on_release_grid`): it is published on the grid and clipped to
  ``[0, upper]``, the budget's data-independent ε (public; no answer was charged since the
  release covers every charged row; a later reservation whose rows were all refused raises
  it, and the same draw is then published clipped higher), both post-processing of the
  stored draw. The stored file is left as it is.
  """
  if "clipped_to" in release["public"]:
    return release
  value = float(np.clip(np.asarray(acc.on_release_grid(release["public"]["epsilon_released"])),
                        0.0, upper))
  public = {**release["public"], "epsilon_released": value, "clipped_to": [0.0, upper]}
  return {**release, "public": public}


def _release_due(release: dict | None, rows: np.ndarray) -> bool:
  """Whether the newest ``release`` (``None``: none drawn) leaves some of the charged
  ``rows`` uncovered, so that a release of ε is due."""
  covered = (release or {}).get("public", {}).get("num_charged")
  return covered != int(np.asarray(rows).size)
