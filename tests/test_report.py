"""The reproduction report (pate_jax/reproduction.py, experiments/report.py): the committed
RESULTS.md regenerates byte for byte from the committed results/runs; every row resolves;
missing runs and bad keys; published values are the papers' own."""

from __future__ import annotations

import dataclasses
import json
import os
import pathlib
import re

import pytest

from pate_jax import experiment, reproduction as rp

REPO = pathlib.Path(__file__).resolve().parent.parent
SNAPSHOT = REPO / "results" / "runs"


def _papers_dir() -> pathlib.Path | None:
  """``../shared/papers`` (beside ``$PATE_JAX_DATA_DIR`` or the repository), as the tests
  find the shared data."""
  data = os.environ.get("PATE_JAX_DATA_DIR")
  for candidate in ((pathlib.Path(data).parent / "papers") if data else None,
                    REPO.parent / "shared" / "papers"):
    if candidate is not None and candidate.is_dir():
      return candidate
  return None


def test_committed_report_regenerates_exactly(monkeypatch):
  monkeypatch.chdir(REPO)  # the command at the top of RESULTS.md runs from the repository root
  text = rp.render("results/runs", output_dir=".", figures_dir="results/figures")
  assert rp.REPORT_COMMAND in text.splitlines()[2]
  assert text == (REPO / "RESULTS.md").read_text(), (
      "RESULTS.md is stale: regenerate it with " + rp.REPORT_COMMAND)


def test_recorded_paths_never_spell_out_the_machines_directories(tmp_path, monkeypatch):
  """A path inside the run's directory is recorded relative to it; one outside as
  ``.../<last part>``, never ``../../tmp/...``: no committed results file climbs out."""
  monkeypatch.chdir(tmp_path)
  (tmp_path / "runs").mkdir()
  record = experiment.to_jsonable({"inside": tmp_path / "runs" / "a", "outside": "/srv/x/data",
                                   "root": "/", "plain": "configs/x.py"})
  assert record == {"inside": "runs/a", "outside": ".../data", "root": "...",
                    "plain": "configs/x.py"}
  climbing = re.compile(r'"(\.\./)+(tmp|root|home|work|srv)/')
  assert not [str(f.relative_to(REPO)) for f in (REPO / "results" / "runs").rglob("*.json")
              if climbing.search(f.read_text())]


def test_committed_publishable_files_hold_no_research_noise_or_attack_seconds():
  """A committed results.json that says it is publishable answered with secret noise, and
  holds the attack on its votes (a function of them, its seconds too) in its private part
  only, as the time it was written (the student's end, before the attack)."""
  import json  # pylint: disable=g-import-not-at-top

  def public_noise(node):
    if isinstance(node, dict):
      return (isinstance(node.get("noise_source"), dict) and bool(node["noise_source"].get(
          "public"))) or any(public_noise(v) for v in node.values())
    return isinstance(node, list) and any(public_noise(v) for v in node)

  def seeded(node):  # a research noise seed in the config
    if isinstance(node, dict):
      return any((k == "noise_seed" and v is not None) or seeded(v) for k, v in node.items())
    return isinstance(node, list) and any(seeded(v) for v in node)

  def attack_keys(node, path=""):
    if isinstance(node, dict):
      for k, v in node.items():
        if k == "private":
          continue
        if "attack" in k and not path.startswith("config"):
          yield f"{path}.{k}"
        yield from attack_keys(v, f"{path}.{k}")

  checked = 0
  for path in sorted(SNAPSHOT.rglob("results.json")):
    record = json.loads(path.read_text())
    if not str(record.get("disclosure", "")).startswith("publishable: every value outside"):
      continue
    checked += 1
    assert not public_noise(record["results"]), path
    # A seed in the config counts unless no teacher answered (a student on the pool's own
    # labels: pate_g_cgn_true).
    assert not seeded(record["config"]) or record["config"].get("labels") == "true", path
    assert not list(attack_keys(record["results"], "results")), path
    seconds = record["results"].get("private", {}).get("seconds", {})
    if "written_at_end_to_end" in seconds:
      assert record["written_at"] < seconds["written_at_end_to_end"], path
  assert checked >= 10


def test_every_row_resolves_in_the_snapshot():
  names = {r.name for r in rp.RUNS}
  assert len(names) == len(rp.RUNS), "duplicate run names"
  records = rp.load_runs(SNAPSHOT)
  for row in rp.ROWS:
    assert row.paper in rp.PAPERS, row
    assert row.fmt in rp.FORMATTERS or row.fmt == "none", row
    if row.run is None:
      assert row.note, f"{row}: a row without a run must say why"
      continue
    assert row.run in names, f"{row}: run not in the run table"
    assert row.run in records, f"{row}: no {row.run}/results.json in results/runs"
    assert rp.value_of(row, rp._results(records[row.run]))


def test_student_rows_compared_with_a_paper_are_means_over_seeds():
  """A student's accuracy set beside a published number is a mean ± SE over >= 3 seeds."""
  by_name = {r.name: r for r in rp.RUNS}
  records = rp.load_runs(SNAPSHOT)
  checked = 0
  for row in rp.ROWS:
    if row.run is None or row.published == "—" or "accuracy" not in (row.key or ""):
      continue
    command = by_name[row.run].command
    if not any(s in command for s in ("train_student", "train_kd_gan")) or (
        row.key == "teacher_accuracy"):
      continue
    text = rp.value_of(row, rp._results(records[row.run]))
    seeds = re.search(r"\((?:equal in all )?(\d+) seeds\)$", text)
    assert seeds and int(seeds.group(1)) >= 3, f"{row.setting!r}: {text} (one run?)"
    checked += 1
  assert checked >= 10


def test_snapshot_is_small_and_only_json_and_png():
  files = [p for p in (REPO / "results").rglob("*") if p.is_file()]
  assert {p.suffix for p in files} <= {".json", ".png"}
  assert all(p.stat().st_size < 200_000 for p in files if p.suffix == ".png")
  assert sum(p.stat().st_size for p in files) < 3_000_000


def test_missing_run_renders_not_run_yet_with_its_command(tmp_path):
  text = rp.render(tmp_path / "none")
  main = next(r for r in rp.RUNS if r.name == "pate_mnist_cpu")
  assert f"not run yet: `{main.command}`" in text
  assert "- **not run yet**" in text
  # A partial run directory: the present run's rows are measured, the others are not.
  part = tmp_path / "runs" / "pate_mnist_cpu"
  part.mkdir(parents=True)
  (part / "results.json").write_text((SNAPSHOT / "pate_mnist_cpu" / "results.json").read_text())
  text = rp.render(tmp_path / "runs")
  assert ("| PATE-G student, 300 epochs, real images shifted by ≤ 2 pixels | — | 98.9 % "
          "*(private)* |") in text  # a research noise seed: the run is private as a whole
  assert "not run yet: `" in text


def test_a_key_that_does_not_resolve_names_the_row():
  bad = rp.Row("pate2017", "Figure 4", "a misspelt key", "—", "pate_mnist_cpu",
               "student.eval_accuracyy")
  with pytest.raises(KeyError, match="Figure 4 / 'a misspelt key'.*student.eval_accuracyy"):
    rp.render(SNAPSHOT, rows=(bad,))
  unknown = dataclasses.replace(bad, run="no_such_run")
  with pytest.raises(KeyError, match="no_such_run.*not in the run table"):
    rp.render(SNAPSHOT, rows=(unknown,))


def test_a_null_value_renders_not_measured_and_a_missing_one_still_raises():
  row = rp.Row("beyond", "GPU acceptance", "share of peak", "—", "bench", "a.fraction", "pct")
  assert rp.value_of(row, {"a": {"fraction": None}}) == rp.NOT_MEASURED
  assert rp.value_of(row, {"a": {"fraction": 0.25}}) == "25.0 %"
  with pytest.raises(KeyError, match="share of peak.*a.fraction"):
    rp.value_of(row, {"a": {}})
  diff = dataclasses.replace(row, key="a.fraction - a.other")  # a difference of nulls is no value
  with pytest.raises(KeyError, match="share of peak"):
    rp.value_of(diff, {"a": {"fraction": None, "other": None}})


def test_resolve_paths():
  results = {"a": {"b": [1, {"c": 2}]}, "g": {"dirichlet0.05": 3}, "x": 5, "y": 2}
  assert rp.resolve(results, "a.b[1].c") == 2
  assert rp.resolve(results, "a.b[-2]") == 1
  assert rp.resolve(results, "g.dirichlet0.05") == 3
  row = rp.Row("gao", "T", "s", run="r", key="x - y", fmt="pp")
  assert rp.value_of(row, results) == "300.00 points"
  with pytest.raises(KeyError):
    rp.resolve(results, "a.c")


def test_a_key_with_alternatives_reads_the_first_the_run_holds():
  row = rp.Row("pate2017", "T", "s", run="r", key="eval_accuracy_seeds | eval_accuracy")
  one = {"eval_accuracy": 0.978}
  side_by_side = {"eval_accuracy": 0.98, "eval_accuracy_seeds": [0.978, 0.98, 0.982]}
  assert rp.value_of(row, one) == "97.8 %"
  assert rp.value_of(row, side_by_side) == "98.0 ± 0.1 % (3 seeds)"
  with pytest.raises(KeyError, match="eval_accuracy"):
    rp.value_of(row, {"accuracy": 0.9})


def test_mean_and_standard_error():
  mean, se = rp.mean_and_se([0.90, 0.92, 0.94])
  assert mean == pytest.approx(0.92)
  assert se == pytest.approx(0.02 / 3 ** 0.5)  # sample sd 0.02 over sqrt(3)
  assert rp.format_spread("pct", [0.90, 0.92, 0.94]) == "92.0 ± 1.2 % (3 seeds)"
  assert rp.format_spread("f2", [1.0, 2.0]) == "1.50 ± 0.50 (2 seeds)"
  assert rp.format_spread("f2", [1.668, 1.668, 1.668]) == "1.67 (equal in all 3 seeds)"
  with pytest.raises(ValueError, match="at least 2"):
    rp.mean_and_se([0.9])
  assert rp.format_spread("int", [359, 366, 338]) == "354 ± 8 (3 seeds)"
  with pytest.raises(ValueError, match="'g' cannot show"):
    rp.format_spread("g", [1, 2])


def test_a_list_of_per_seed_values_renders_as_mean_and_se():
  results = {"acc": [0.90, 0.92, 0.94], "teacher": 1.0, "n": [1, 2]}
  assert rp.value_of(rp.Row("gao", "T", "s", run="r", key="acc", fmt="pct"), results) == (
      "92.0 ± 1.2 % (3 seeds)")
  assert rp.value_of(rp.Row("gao", "T", "s", run="r", key="teacher - acc", fmt="pp"),
                     results) == "8.00 ± 1.15 points (3 seeds)"
  with pytest.raises(KeyError, match="'s'.*cannot show a mean"):
    rp.value_of(rp.Row("gao", "T", "s", run="r", key="n", fmt="g"), results)


def _seeded_runs(tmp_path, seeds, accuracies):
  run = rp.Run("toy", "python experiments/train_student.py --config.seed={seed} "
               "--workdir runs/toy/seed_{seed}", "configs/student_pate_g.py:cpu", seeds=(0, 1, 2))
  for seed, acc in zip(seeds, accuracies):
    d = tmp_path / "toy" / f"seed_{seed}"
    d.mkdir(parents=True)
    experiment.write_results(d, {"eval_accuracy": acc}, config={"seed": seed}, seed=seed)
  row = rp.Row("pate2017", "Figure 4", "a seeded student", "98.00%", "toy", "eval_accuracy",
               "pct")
  return dict(rows=(row,), runs=(run,), figures=(), optional_runs=(), optional_rows=())


def test_a_seeded_run_renders_mean_and_se_over_its_seeds(tmp_path):
  kwargs = _seeded_runs(tmp_path, (0, 1, 2), (0.95, 0.96, 0.97))
  text = rp.render(tmp_path, **kwargs)
  assert "| a seeded student | 98.00% | 96.0 ± 0.6 % (3 seeds) | [toy](#run-toy) |" in text
  assert ("- command: `for seed in 0 1 2; do python experiments/train_student.py "
          "--config.seed=$seed --workdir runs/toy/seed_$seed; done`") in text
  assert "- seeds: 0, 1, 2" in text
  # None present: not run yet, with the loop to run.
  text = rp.render(tmp_path / "none", **kwargs)
  assert "not run yet: `for seed in 0 1 2; do" in text


def test_a_seeded_run_with_a_seed_missing_is_refused(tmp_path):
  kwargs = _seeded_runs(tmp_path, (0, 2), (0.95, 0.97))
  with pytest.raises(ValueError, match="run toy: .*seed_1 missing"):
    rp.render(tmp_path, **kwargs)


def test_script_writes_a_partial_report(tmp_path, capsys):
  script = experiment.load_script(REPO / "experiments" / "report.py")
  config = experiment.load_config(str(REPO / "configs" / "report.py"))
  config.runs_dir = str(tmp_path / "runs")
  results = experiment.run_and_report(script.run, script.report, config, str(tmp_path))
  text = (tmp_path / "RESULTS.md").read_text()
  assert "not run yet" in text and results["measured"] == 0
  assert "report: " + str((tmp_path / "RESULTS.md").resolve()) in capsys.readouterr().out


def test_a_report_with_private_rows_is_owner_only(tmp_path):
  """RESULTS.md of runs whose rows are private is the owner's (0600); the folder it was
  written to is theirs to choose and left as it is; a report of nothing private is not."""
  script = experiment.load_script(REPO / "experiments" / "report.py")
  config = experiment.load_config(str(REPO / "configs" / "report.py"))
  for run, runs in (("kd_gan_cpu", tmp_path / "runs"), ("pate_g_100_gpu", tmp_path / "gpu_runs")):
    (runs / run).mkdir(parents=True)  # the GPU's rows are in the report only where present
    (runs / run / "results.json").write_text(
        (REPO / "results" / "runs" / run / "results.json").read_text())
  old = os.umask(0o022)
  try:
    for name, runs_dir in (("private", tmp_path / "runs"), ("gpu", tmp_path / "gpu_runs"),
                           ("empty", tmp_path / "none")):
      out = tmp_path / name
      out.mkdir(mode=0o755)
      config.runs_dir = str(runs_dir)
      script.run(config, str(out))
      mode = (out / "RESULTS.md").stat().st_mode & 0o777
      assert mode == (0o644 if name == "empty" else 0o600), (name, oct(mode))
      assert out.stat().st_mode & 0o777 == 0o755
  finally:
    os.umask(old)


def test_published_values_appear_in_the_papers():
  papers = _papers_dir()
  if papers is None:
    pytest.skip("../shared/papers not found")
  texts = {key: " ".join((papers / f).read_text() for f in files).replace(",", "")
           for key, (_, files) in rp.PAPERS.items()}
  for row in rp.ROWS:
    for number in rp.published_numbers(row.published):
      number = number.replace(",", "")
      assert re.search(rf"(?<![\d.]){re.escape(number)}(?!\d)", texts[row.paper]), (
          f"{row.paper} / {row.item} / {row.setting!r}: published {number} is not in "
          f"{rp.PAPERS[row.paper][1]}")


def _paper_texts(papers: pathlib.Path) -> dict[str, str]:
  """Each paper's text files joined, whitespace collapsed."""
  return {key: " ".join(" ".join((papers / f).read_text() for f in files).split())
          for key, (_, files) in rp.PAPERS.items()}


def test_paper_titles_are_the_papers_own():
  """The italic title of each paper with a text is that text's title (the KD-GAN paper was
  headed by a paraphrase once)."""
  papers = _papers_dir()
  if papers is None:
    pytest.skip("../shared/papers not found")
  texts = _paper_texts(papers)
  checked = 0
  for key, (title, files) in rp.PAPERS.items():
    italic = re.search(r"\*([^*]+)\*", title)
    if not files or italic is None:
      continue
    assert italic.group(1).lower() in texts[key].lower(), (key, italic.group(1))
    checked += 1
  assert checked >= 2


# A passage quoted in a row: "..." or '...' (an opening quote after a space, a colon or "(",
# so that apostrophes do not open one).
_QUOTE = re.compile(r"(?:(?<=\s)|(?<=^)|(?<=[(:]))"
                    r"(?:\"([^\"]+)\"|'([^'\s][^']*?[^'\s])'(?![A-Za-z]))")


def test_passages_quoted_from_the_papers_are_verbatim():
  """Every passage a row quotes (in its setting or note) is in its paper's text word for
  word; a row beyond the papers quotes one of them. A paraphrase in quotes ("errors often
  as low as 0.03" for the text's "error rates, often as low as 0.03") fails."""
  papers = _papers_dir()
  if papers is None:
    pytest.skip("../shared/papers not found")
  texts = _paper_texts(papers)
  everything = " ".join(texts.values())
  checked = 0
  for row in rp.ROWS:
    text = texts[row.paper] if rp.PAPERS[row.paper][1] else everything
    for field in (row.setting, row.note or ""):
      for m in _QUOTE.finditer(field):
        passage = " ".join((m.group(1) or m.group(2)).split())
        assert passage in text, f"{row.paper} / {row.item} / {row.setting!r}: {passage!r}"
        checked += 1
  assert checked >= 5


def _arxiv_sections(text: str) -> dict[str, str]:
  """The arXiv copy's numbered sections (``4.1 Training an ensemble...``), each to the next
  numbered heading, whitespace collapsed."""
  heading = re.compile(r"^(\d+(?:\.\d+)+) [A-Z]", re.M)
  starts = [(m.start(), m.group(1)) for m in heading.finditer(text)]
  ends = [s for s, _ in starts[1:]] + [len(text)]
  return {number: " ".join(text[start:end].split())
          for (start, number), end in zip(starts, ends)}


def test_a_pate_2017_rows_section_is_where_the_paper_prints_its_value():
  """A row whose item names "Section N.M" of PATE 2017 has its published value in that
  section of the arXiv copy. The copy lost its numbers, so the check finds the sentence
  that prints the value in the ICLR text and asks for its opening words (up to the first
  number or formula) in section N.M: the strong-composition values are in Section 3.2
  (Section 3.1 defers them to "the next subsection"), where the report had placed them in
  3.1."""
  papers = _papers_dir()
  if papers is None:
    pytest.skip("../shared/papers not found")
  arxiv = _arxiv_sections((papers / "pate-2017-arxiv-with-appendix-c.txt").read_text())
  iclr = " ".join((papers / "pate-2017-iclr.md").read_text().split())
  checked = 0
  for row in rp.ROWS:
    section = re.match(r"Section (\d+\.\d+)", row.item)
    if row.paper != "pate2017" or section is None:
      continue
    body = arxiv[section.group(1)]
    for number in rp.published_numbers(row.published):
      openings = []
      for m in re.finditer(rf"(?<![\d.]){re.escape(number)}(?!\d)", iclr):
        start = max(iclr.rfind(". ", 0, m.start()) + 2, 0)
        words = []
        for word in iclr[start:m.start()].split():
          if re.search(r"[\d$]", word):
            break
          words.append(word)
        if len(words) >= 4:
          openings.append(" ".join(words[:8]))
      assert openings, f"{row.item} / {row.setting!r}: no sentence prints {number}"
      assert any(o in body for o in openings), (
          f"{row.item} / {row.setting!r}: {number} is printed in a sentence opening "
          f"{openings} which is not in the arXiv copy's Section {section.group(1)}")
      checked += 1
  assert checked >= 4


def test_a_game_check_threshold_a_row_cites_is_the_configs_or_dated():
  """A row that cites the game check's threshold cites the PATE-G configs' own
  ``game_check.max_value``, or says it was the threshold at the run's commit (a row said
  "above the check's 40" after the threshold became 20)."""
  config = experiment.load_config(str(REPO / "configs" / "student_pate_g.py"))
  now = config.game_check.max_value
  cited = 0
  for row in rp.ROWS:
    for m in re.finditer(r"the check's (\d+(?:\.\d+)?)( at that commit)?", row.note or ""):
      assert m.group(2) or float(m.group(1)) == now, (
          f"{row.item} / {row.setting!r}: cites the check's {m.group(1)}; "
          f"configs/student_pate_g.py has {now:g}")
      cited += 1
  assert cited >= 1


def test_a_run_private_as_a_whole_marks_its_rows_and_figures_private(tmp_path):
  """A results.json whose disclosure says it is private as a whole (a research measurement)
  has every row and figure marked *(private)*, but for its data-independent ε; a row marked
  either way keeps its mark; privacy curves are private whatever their run."""
  run = rp.Run("toy", "python experiments/ablate.py --workdir runs/toy", "configs/ablation_mnist.py")
  experiment.write_results(tmp_path / "toy", {"accuracy": 0.9, "epsilon_data_independent": 2.0},
                           config={}, seed=0, disclosure=experiment.MEASUREMENT)
  (tmp_path / "toy" / "curve.png").write_bytes(b"png")
  (tmp_path / "toy" / "privacy.png").write_bytes(b"png")
  rows = (rp.Row("pate2017", "T", "accuracy", "—", "toy", "accuracy", "pct"),
          rp.Row("pate2017", "T", "data-independent", "—", "toy", "epsilon_data_independent",
                 "f2"),
          rp.Row("pate2017", "T", "marked public", "—", "toy", "accuracy", "pct",
                 marked_private=False))
  figures = (rp.Figure("pate2017", "T", "toy", "curve.png", "curve.png", "a curve"),)
  kwargs = dict(rows=rows, runs=(run,), figures=figures, optional_runs=(), optional_rows=())
  text = rp.render(tmp_path, **kwargs)
  assert "| accuracy | — | 90.0 % *(private)* |" in text
  assert "| data-independent | — | 2.00 |" in text and "| marked public | — | 90.0 % |" in text
  assert "*a curve* *(private)* (run toy)" in text
  # The same run written publishable: only what its keys or figure say is private.
  experiment.write_results(tmp_path / "toy", {"accuracy": 0.9, "epsilon_data_independent": 2.0},
                           config={}, seed=0)
  privacy = rp.Figure("pate2017", "T", "toy", "privacy.png", "privacy.png", "a privacy curve")
  text = rp.render(tmp_path, **{**kwargs, "figures": (*figures, privacy)})
  assert "| accuracy | — | 90.0 % |" in text and "*a curve* (run toy)" in text
  assert "*a privacy curve* *(private)* (run toy)" in text


def test_a_measurement_written_before_disclosures_and_its_timings(tmp_path):
  """A run of :data:`MEASUREMENTS_BEFORE_DISCLOSURE` whose file predates the disclosure field
  is private as a whole; seconds of compute are not private in any file."""
  name = rp.MEASUREMENTS_BEFORE_DISCLOSURE[0]
  run = rp.Run(name, f"python experiments/ablate.py --workdir runs/{name}", "c.py")
  d = tmp_path / name
  d.mkdir()
  (d / "results.json").write_text(json.dumps({"results": {"accuracy": 0.9, "loop_s": 4.2}}))
  rows = (rp.Row("pate2017", "T", "accuracy", "—", name, "accuracy", "pct"),
          rp.Row("pate2017", "T", "loop", "—", name, "loop_s", "s"))
  text = rp.render(tmp_path, rows=rows, runs=(run,), figures=(), optional_runs=(),
                   optional_rows=())
  assert "| accuracy | — | 90.0 % *(private)* |" in text and "*(private)*" not in (
      text.split("| loop | — | ")[1].split("|")[0])


def test_every_committed_run_that_answered_queries_before_disclosures_is_private():
  """Before results.json carried a disclosure, every noise was seeded (research noise): a
  committed run of that time that answered queries (or whose labels did) has its every
  value private, as the report marks it; attacks on synthetic or published histograms
  answer no private votes."""
  def answered(node):
    if isinstance(node, dict):
      return any(k in ("num_answered", "active_rounds", "accuracy_mean") for k in node) or any(
          answered(v) for v in node.values())
    return isinstance(node, list) and any(answered(v) for v in node)
  runs = REPO / "results" / "runs"
  unmarked = []
  for path in sorted(runs.glob("*/results.json")) + sorted(runs.glob("*/*/results.json")):
    name = path.relative_to(runs).parts[0]
    records = json.loads(path.read_text())
    for r in records if isinstance(records, list) else [records]:
      if ("disclosure" not in r and answered(r.get("results")) and not name.startswith("attack")
          and not rp.disclosed_private(r, name)):
        unmarked.append(str(path.relative_to(runs)))
  assert not unmarked, unmarked


def test_no_committed_file_holds_the_checkpoints_compressed_size_outside_private():
  """The teachers' checkpoints' size on disk is their trained parameters compressed, a
  function of the private data: the stage writes it in the private part, and so must every
  committed file (written before, amended)."""
  def outside(node, private=False):
    if isinstance(node, dict):
      return any((k == "bytes_deleted_at_completion" and not private)
                 or outside(v, private or k == "private") for k, v in node.items())
    return isinstance(node, list) and any(outside(v, private) for v in node)
  found = [str(p) for p in (REPO / "results" / "runs").rglob("*.json")
           if outside(json.loads(p.read_text()))]
  assert not found, found


def test_copies_of_private_figures_say_private_in_the_image(tmp_path):
  """The report copies a figure of a run private as a whole (or a private figure) under a
  red banner, same width, taller; a publishable run's figure byte for byte."""
  from pate_jax.reporting import _plots  # pylint: disable=g-import-not-at-top
  from pate_jax.stages import report  # pylint: disable=g-import-not-at-top
  import matplotlib.image  # pylint: disable=g-import-not-at-top
  for name, disclosure in (("toy", experiment.MEASUREMENT), ("open", None)):
    experiment.write_results(tmp_path / name, {"accuracy": 0.9}, config={}, seed=0,
                             **({"disclosure": disclosure} if disclosure else {}))
    fig = _plots._figure(figsize=(3, 2), dpi=50)
    fig.subplots().plot([0, 1], [0, 1])
    fig.savefig(tmp_path / name / "curve.png")
  runs = tuple(rp.Run(n, f"python experiments/ablate.py --workdir runs/{n}", "c.py")
               for n in ("toy", "open"))
  figures = (rp.Figure("pate2017", "T", "toy", "curve.png", "toy.png", "a curve"),
             rp.Figure("pate2017", "T", "open", "curve.png", "open.png", "a curve"),
             rp.Figure("pate2017", "T", "open", "curve.png", "votes.png", "a curve",
                       drawn_from_votes=True))
  out = tmp_path / "figures"
  copied = report.copy_figures(tmp_path, out, figures=figures, runs=runs)
  assert [p.name for p in copied] == ["toy.png", "open.png", "votes.png"]
  source = matplotlib.image.imread(str(tmp_path / "toy" / "curve.png"))
  assert (out / "open.png").read_bytes() == (tmp_path / "open" / "curve.png").read_bytes()
  for name in ("toy.png", "votes.png"):
    stamped = matplotlib.image.imread(str(out / name))
    assert stamped.shape[1] == source.shape[1] and stamped.shape[0] > source.shape[0]
    band = stamped[: stamped.shape[0] - source.shape[0], :, :3]
    red = (band[..., 0] > 0.6) & (band[..., 1] < 0.3) & (band[..., 2] < 0.3)
    assert red.any(), name
    assert (out / name).stat().st_mode & 0o777 == 0o600, name  # the owner's, as the report


def test_a_research_runs_data_independent_epsilon_is_private_where_the_votes_chose_the_count():
  """In a research-noise file the data-independent ε is left unmarked: a bound from the
  settings and the number of queries asked. Where Confident-GNMax's threshold chose how
  many were answered, that ε is one-to-one in the count, a function of the votes: marked."""
  research = {"public": True, "source": "research seed"}

  def record(mechanism):
    return {"disclosure": "publishable", "config": {"mechanism": mechanism}, "results": {
        "noise_source": research, "num_answered": 555,
        "epsilon": {"rdp_data_independent_improved": {"epsilon": 3.98}}}}

  row = rp.Row("beyond", "x", "ε (data-independent)", "—", "run",
               "epsilon.rdp_data_independent_improved.epsilon", "f2")
  count = rp.Row("beyond", "x", "answered", "—", "run", "num_answered", "int")
  assert not row.private_in(record("gnmax")) and count.private_in(record("gnmax"))
  assert row.private_in(record("confident_gnmax"))
  assert row.private_in([record("gnmax"), record("confident_gnmax")])  # any seed's
  secret = record("confident_gnmax")
  secret["results"]["noise_source"] = {"public": False, "source": "secret"}
  assert not row.private_in(secret)  # a release: the count is the mechanism's output
  tabular = rp.Row("pate2017", "x", "ε", "—", "run", "confident_gnmax.epsilon_data_independent")
  assert tabular.private_in({"disclosure": "private: a research measurement", "results": {}})


@pytest.mark.parametrize("field, value, match", [
    ("output", "", r"^config.output must name the report's file; got ''$"),
    ("output", "sub/", r"^config.output must name the report's file; got 'sub/'$"),
    ("output", "existing_dir", r"^config.output must name the report's file; .* is a directory$"),
    ("runs_dir", 3, r"^config.runs_dir must be a path \(a string\); got 3$"),
    ("copy_figures", "yes", r"^config.copy_figures must be a boolean; got 'yes'$"),
])
def test_a_bad_report_config_is_refused_naming_the_field(tmp_path, field, value, match):
  """An empty output (or a directory) failed as an IsADirectoryError once the report was
  rendered, a number for runs_dir as a TypeError, and copy_figures="yes" read as True.
  Refused naming the field before anything is written (and by --dry_run, but for the
  directory, which is the workdir's)."""
  from pate_jax.stages import report  # pylint: disable=g-import-not-at-top
  c = experiment.load_script(REPO / "configs" / "report.py").get_config()
  c.runs_dir = str(tmp_path / "runs")
  (tmp_path / "work" / "existing_dir").mkdir(parents=True)
  with c.ignore_type():
    c[field] = value
  with pytest.raises(ValueError, match=match):
    report.run(c, str(tmp_path / "work"))
  assert sorted(p.name for p in (tmp_path / "work").iterdir()) == ["existing_dir"]
  if value != "existing_dir":
    with pytest.raises(ValueError, match=match):
      report.plan(c)
