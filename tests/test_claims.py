"""Claims of the README and of the reproduction catalogue against their sources: a paper's
number in the setting it is attributed to (Figure 4's row of its query count, Gao et al.'s
table cell of its dataset, n and method), the README's defaults and derived values
against the configs and the code that compute them, and the README's tables and paragraphs
of measured figures against the committed runs they cite. Each check fails if either side
drifts."""

from __future__ import annotations

import json
import pathlib
import re

import jax
import numpy as np
import pytest

from pate_jax import attacks, experiment, mechanisms, votes
from pate_jax import reproduction as rp
from pate_jax.attacks import _output_distribution
from pate_jax.stages import aggregate as aggregate_stage

from test_report import _papers_dir  # pylint: disable=g-bad-import-order

REPO = pathlib.Path(__file__).resolve().parent.parent
README = (REPO / "README.md").read_text()


def _paper(name: str) -> str:
  papers = _papers_dir()
  if papers is None:
    pytest.skip("../shared/papers not found")
  return (papers / name).read_text()


def _readme(pattern: str) -> re.Match:
  """The README's one passage matching ``pattern`` (whitespace-insensitive)."""
  text = " ".join(README.split())
  found = list(re.finditer(pattern, text))
  assert len(found) == 1, f"README: {len(found)} passages match {pattern!r}"
  return found[0]


def _config(spec: str):
  return experiment.load_config(str(REPO / "configs" / spec))


# ------------------------------------------------------------------ PATE 2017, Figure 4


def _figure_4() -> dict[tuple[str, int], dict[str, str]]:
  """PATE 2017's Figure 4 table (ICLR text): ``(dataset, queries)`` → its cells."""
  rows = {}
  for line in _paper("pate-2017-iclr.md").splitlines():
    m = re.match(r"(MNIST|SVHN)\t([\d.]+)\t\$10\^\{-(\d)\}\$\t(\d+)\t([\d.]+)%\t([\d.]+)%$",
                 line)
    if m:
      rows[m.group(1), int(m.group(4))] = {"epsilon": m.group(2), "delta": f"1e-{m.group(3)}",
                                           "baseline": m.group(5), "student": m.group(6)}
  assert len(rows) == 4, rows
  return rows


def test_figure_4_rows_print_the_values_of_their_dataset_and_query_count():
  """A Figure 4 row's published ε is the paper's ε for its dataset and number of queries,
  its accuracy the student's (the non-private baseline's where it says so), its δ the
  row's: "MNIST, 1,000 queries: ε" published as 2.04 (the 100-query row's) fails."""
  table = _figure_4()
  checked, context = 0, None
  for row in rp.ROWS:
    if row.paper != "pate2017" or row.item != "Figure 4" or row.published == "—":
      continue
    dataset = re.match(r"(MNIST|SVHN)\b", row.setting)
    queries = re.search(r"(\d[\d,]*) (?:class-balanced )?queries", row.setting)
    if dataset and queries:
      context = (dataset.group(1), int(queries.group(1).replace(",", "")))
    elif not row.setting.startswith("the same"):
      context = None
    parts = [p.strip() for p in row.published.split("/")]
    if "non-private" in row.setting:
      cells = {r["baseline"] for (d, _), r in table.items() if d == dataset.group(1)}
      assert len(cells) == 1 and parts == [cells.pop() + "%"], (row.setting, row.published)
      checked += 1
      continue
    assert context in table, f"Figure 4 / {row.setting!r}: no dataset and query count"
    cells = table[context]
    for part in parts:
      kind = "student" if part.endswith("%") else "epsilon"
      assert part.rstrip("%") == cells[kind], (
          f"Figure 4 / {row.setting!r}: published {part}; the paper's {kind} for "
          f"{context[0]} at {context[1]} queries is {cells[kind]}")
      checked += 1
    delta = re.search(r"δ = (1e-\d)", row.setting)
    assert delta is None or delta.group(1) == cells["delta"], (row.setting, cells["delta"])
  assert checked >= 12


def test_the_readmes_accuracy_at_a_figure_4_epsilon_is_that_rows_student():
  """Wherever the README pairs an accuracy with one of Figure 4's ε ("98.00 % at ε 2.04"),
  the two are one row of the table: "98.10 % at ε 2.04" fails."""
  by_epsilon = {r["epsilon"]: r["student"] for r in _figure_4().values()}
  text = " ".join(README.split())
  pairs = re.findall(r"(\d+\.\d+) % at ε (\d+\.\d+)", text)
  checked = 0
  for accuracy, epsilon in pairs:
    if epsilon in by_epsilon:
      assert accuracy == by_epsilon[epsilon], f"README: {accuracy} % at ε {epsilon}"
      checked += 1
  assert checked >= 6


# ------------------------------------------------------------------ Gao et al., Tables 1-2


def _gao_table_1() -> dict[tuple[str, int, str], str]:
  """Gao et al.'s Table 1: ``(dataset, n, "KD-only" | "joint")`` → accuracy. The columns
  are MNIST's, SVHN's and CIFAR-10's three each, in that order; the text's gains at n = 500
  (22.99 points for SVHN, 26.74 for CIFAR-10) say which is which."""
  text = _paper("gao-private-kd-gan.txt")
  header = re.search(r"^(n=\d+(?: n=\d+){8})$", text, re.M)
  kd = re.search(r"^KD-only \(%\) ((?:[\d.]+ ?){9})$", text, re.M)
  joint = re.search(r"^Joint \(%\) ((?:[\d.]+ ?){9})$", text, re.M)
  assert header and kd and joint
  ns = [int(x[2:]) for x in header.group(1).split()]
  datasets = ["MNIST"] * 3 + ["SVHN"] * 3 + ["CIFAR-10"] * 3
  table = {}
  for method, m in (("KD-only", kd), ("joint", joint)):
    for d, n, value in zip(datasets, ns, m.group(1).split()):
      table[d, n, method] = value
  for d, gain in (("SVHN", "22.99"), ("CIFAR-10", "26.74")):
    assert f"{gain}% accuracy improvement for {d}" in " ".join(text.split())
    assert f"{float(table[d, 500, 'joint']) - float(table[d, 500, 'KD-only']):.2f}" == gain
  return table


def test_gao_table_1_rows_print_the_cell_of_their_dataset_n_and_method():
  """A Table 1 row's published accuracies are the cells of its dataset, its n (in order)
  and its method: "MNIST, n = 1,000, joint" published as 93.57 (KD-only's) fails."""
  table = _gao_table_1()
  checked = 0
  for row in rp.ROWS:
    if row.paper != "gao" or not row.item.startswith("Table 1") or row.published == "—":
      continue
    dataset = re.match(r"(MNIST|SVHN|CIFAR-10)\b", row.setting)
    # The ablation is on MNIST (its rows name no dataset).
    dataset = dataset.group(1) if dataset else "MNIST" if "ablation" in row.item else None
    ns = re.search(r"n = ([\d,]+(?: / [\d,]+)*)", row.setting)
    method = re.search(r"\b(KD-only|joint)\b", row.setting)
    assert dataset and ns and method, f"Table 1 / {row.setting!r}"
    ns = [int(n.replace(",", "")) for n in ns.group(1).split(" / ")]
    published = [p.strip() for p in row.published.split("/")]
    assert len(published) == len(ns), (row.setting, row.published)
    for n, value in zip(ns, published):
      assert value == table[dataset, n, method.group(1)], (
          f"Table 1 / {row.setting!r}: published {value}; the paper's {dataset}, n = {n}, "
          f"{method.group(1)} is {table[dataset, n, method.group(1)]}")
      checked += 1
  assert checked >= 18


def test_the_readmes_kd_gan_table_quotes_table_1_for_its_n():
  """The README's KD-GAN table gives, per n, the paper's "KD-only / joint" of that n."""
  table = _gao_table_1()
  text = " ".join(README.split())
  rows = re.findall(r"\| ([\d,]+) \| [^|]+ \| [^|]+ \| ([\d.]+) / ([\d.]+) % \| [\d.]+ \|",
                    text)
  assert len(rows) == 3, rows
  for n, kd, joint in rows:
    n = int(n.replace(",", ""))
    assert (kd, joint) == (table["MNIST", n, "KD-only"], table["MNIST", n, "joint"]), n


def _gao_table_2() -> dict[tuple[str, str, str], str]:
  """Gao et al.'s Table 2: ``(dataset, framework, ε)`` → the student's accuracy."""
  text = _paper("gao-private-kd-gan.txt")
  start = text.index("Dataset Framework Privacy")
  table, dataset, framework = {}, None, None
  for line in text[start:text.index("Table 2:", start)].splitlines()[2:]:
    words = line.replace(" %", "%").split()
    if words and words[0] in ("MNIST", "SVHN", "CIFAR"):
      dataset = "CIFAR-10" if words[0] == "CIFAR" else words[0]
      words = words[1:]
    if words and words[0] in ("PATE", "Proposed", "RONA"):
      framework, words = words[0], words[1:]
    if words:
      table[dataset, framework, words[0]] = words[1].rstrip("%")
  assert len(table) == 12, table
  return table


def test_gao_table_2_rows_print_the_accuracy_of_their_framework_and_epsilon():
  """A Table 2 row that names frameworks at ε values ("SVHN, PATE at ε 5.04 / Proposed at
  ε 5.02") publishes those cells' student accuracies, in order."""
  table = _gao_table_2()
  checked = 0
  for row in rp.ROWS:
    if row.paper != "gao" or row.item != "Table 2" or "%" not in row.published:
      continue
    dataset = re.match(r"(MNIST|SVHN|CIFAR-10)\b", row.setting)
    cells = re.findall(r"\b(PATE|Proposed|RONA)\b,? (?:at )?ε ([\d.]+)", row.setting)
    published = [p.strip().rstrip("%").strip() for p in row.published.split("/")]
    assert dataset and len(cells) == len(published), (row.setting, row.published)
    for (framework, epsilon), value in zip(cells, published):
      paper = table[dataset.group(1), framework, epsilon]
      assert float(value) == float(paper), (
          f"Table 2 / {row.setting!r}: published {value}; the paper's {framework} at "
          f"ε {epsilon} ({dataset.group(1)}) is {paper}")
      checked += 1
  assert checked >= 6


# ------------------------------------------------------------------ the attack paper


def test_the_attack_budget_config_is_the_papers_parameterisation():
  """configs/attack_budget.py's budgets, σ and δ are the paper's ("budgets of 1.97 and
  4.96 for MNIST and SVHN and σ = 40"; δ 1e-5 for MNIST, 1e-6 for SVHN), and the README's
  attack table states the config's."""
  text = " ".join(_paper("pate-histogram-leakage-attack.txt").split())
  m = re.search(r"budgets of ([\d.]+) and ([\d.]+) for MNIST and SVHN and σ = (\d+)", text)
  d = re.search(r"δ is set as 10−(\d) for MNIST and 10−(\d) for SVHN", text)
  assert m and d
  config = _config("attack_budget.py")
  for name, budget, delta in (("mnist", m.group(1), d.group(1)),
                              ("svhn", m.group(2), d.group(2))):
    c = config.datasets[name]
    assert (c.budget, c.sigma, c.delta) == (float(budget), float(m.group(3)),
                                            float(f"1e-{delta}")), name
    row = _readme(rf"\| `budget`, {name.upper()} \(T (\d+), σ_T (\d+), σ (\d+), δ (1e-\d), "
                  r"ε ≤ ([\d.]+)\)")
    assert tuple(float(x) for x in row.groups()) == (
        c.threshold, c.sigma_threshold, c.sigma, c.delta, c.budget), name


# ------------------------------------------------------------------ the main job's budget


def test_the_main_jobs_budget_in_the_readme_and_config_is_the_one_computed():
  """The main job's publishable numbers are functions of its config alone: the labels'
  data-independent ε (1.48), the release's order (14) and β (0.0286) from the
  data-independent rule, σ_ss 10, and the budget's ε with the release (1.69 of ε_max 2).
  The README states them, and configs/pate_mnist.py's comment its budget's ε (it said 1.72)."""
  config = _config("pate_mnist.py:cpu").aggregate
  mechanism = mechanisms.get(config.mechanism)
  params = {"sigma": float(config.sigma)}
  spec = aggregate_stage.fixed_release(config.release, mechanism, params,
                                       config.num_queries, config.delta, None,
                                       config.conversion, num_classes=10)
  accountant = mechanisms.make_accountant(mechanism, None, config.conversion)
  orders = np.asarray(accountant.orders)
  per_query = np.asarray(mechanism.cost(np.zeros((1, 2), np.int32), np.ones(1, bool), params,
                                        orders, False))[0]
  with jax.enable_x64(True):
    labels, _ = accountant.compose(config.num_queries * per_query).epsilon(config.delta)
    budget, _ = accountant.compose(config.num_queries * per_query
                                   + spec.rdp_curve(orders)).epsilon(config.delta)
  m = _readme(r"ε at δ = 1e-5 of the labels, data-independent, ([\d.]+) \(improved "
              r"conversion; [\d.]+ classic\); \*\*ε released with smooth sensitivity [\d.]+\*\* "
              r"\(release 1; order (\d+) from the data-independent rule, where conditions C5 "
              r"and C6 hold, β ([\d.]+), σ_ss (\d+), fixed in the config\); the teachers' "
              r"budget: \*\*ε ([\d.]+) of ε_max (\d+) spent\*\*")
  assert float(m.group(1)) == round(float(labels), 2)
  assert float(m.group(2)) == spec.order
  assert float(m.group(3)) == round(spec.beta, 4)
  assert float(m.group(4)) == config.release.sigma_ss
  assert float(m.group(5)) == round(float(budget), 2)
  assert float(m.group(6)) == config.epsilon_max
  comment = re.search(r"private ε cost ε ≈ ([\d.]+) \(data-independent, improved conversion\)",
                      (REPO / "configs" / "pate_mnist.py").read_text())
  assert comment and float(comment.group(1)) == round(float(budget), 2), (
      f"configs/pate_mnist.py says ε ≈ {comment and comment.group(1)}; the budget's ε is "
      f"{float(budget):.4f}")


# ------------------------------------------------------------------ defaults and constants


def test_the_readmes_sampler_delta_examples_are_the_functions_values():
  """*Noise is secret*: "2.0e-10 for 100 GNMax answers, σ 40, 250 teachers, 10 classes,
  ε 2" and "at ε_max 20, 20 queries and a release add 0.15"."""
  m = _readme(r"`sampler_delta` \(([\d.]+e-\d+) for (\d+) GNMax answers, σ (\d+), (\d+) "
              r"teachers, (\d+) classes, ε (\d+);")
  value, queries, sigma, teachers, classes, eps = m.groups()
  got = mechanisms.sampler_delta(mechanisms.GNMAX, {"sigma": float(sigma)}, int(queries),
                                 int(classes), int(teachers), float(eps))
  assert f"{got:.1e}" == value
  m = _readme(r"\(at ε_max (\d+), (\d+) queries and a release add ([\d.]+)\)")
  eps, queries, value = float(m.group(1)), int(m.group(2)), m.group(3)
  got = (mechanisms.sampler_delta(mechanisms.GNMAX, {"sigma": float(sigma)}, queries,
                                  int(classes), int(teachers), eps)
         + mechanisms.release_sampler_delta(1, eps, eps))
  assert f"{got:.2f}" == value


def test_the_readmes_constants_are_the_codes():
  """The float64 sampler's CDF error (2^-46), the soft counts' total S (2^16) and the
  attack's trapezoid (49 nodes over ± 6σ) as the README states them."""
  m = _readme(r"its CDF within 2\^-(\d+) of the ideal")
  assert mechanisms.SAMPLER_CDF_ERROR == 2.0 ** -int(m.group(1))
  m = _readme(r"summing to at most S = 2\^(\d+) \(`votes.soft_counts`")
  assert votes.SOFT_COUNT_SCALE == 2 ** int(m.group(1))
  m = _readme(r"The default trapezoid Q\(H\) \((\d+) nodes over H_k ± (\d+)σ\)")
  assert _output_distribution.DEFAULT_POINTS["gaussian"] == int(m.group(1))
  assert "±6σ, 49 nodes" in (REPO / "pate_jax" / "attacks"
                             / "_answer_probabilities.py").read_text()
  assert int(m.group(2)) == 6


def test_the_readmes_settings_are_the_configs():
  """Settings the README attributes to a config are that config's values."""
  agg = _config("aggregate_mnist.py")
  m = _readme(r"Confident-GNMax instead \(T = (\d+), σ₁ = (\d+), σ₂ = (\d+), the 2018 "
              r"paper's MNIST setting")
  assert tuple(map(float, m.groups())) == (agg.threshold, agg.sigma_threshold, agg.sigma)

  ablation = _config("ablation_mnist.py")
  m = _readme(r"Confident-GNMax σ₂ = s with threshold ([\d.]+)·n and σ₁ = ([\d.]+)·n\. The "
              r"grid of (\d+) × (\d+) × (\d+) × (\d+) = \*\*([\d,]+) cells\*\*, ([\d,]+) "
              r"queries each")
  assert float(m.group(1)) == ablation.threshold_fraction
  assert float(m.group(2)) == ablation.sigma_threshold_fraction
  grid = (len(ablation.mechanisms), len(ablation.teacher_counts),
          len(ablation.noise_scales), ablation.num_seeds)
  assert tuple(int(x) for x in m.group(3, 4, 5, 6)) == grid
  assert int(m.group(7).replace(",", "")) == int(np.prod(grid))
  assert int(m.group(8).replace(",", "")) == ablation.num_queries

  release = _config("release_epsilon.py")
  m = _readme(r"at the order ([\d.]+), β ([\d.]+) and σ_ss ([\d.]+) fixed in the config")
  assert float(m.group(1)) == release.release.order
  assert float(m.group(2)) == round(0.4 / release.release.order, 4)  # β None: 0.4/order
  assert release.release.beta is None
  assert float(m.group(3)) == release.release.sigma_ss
  cgn = _config("student_confident_gnmax.py").aggregate
  assert (cgn.release.order, cgn.release.sigma_ss) == (release.release.order,
                                                      release.release.sigma_ss)

  kd = _config("kd_gan.py:cpu")
  m = _readme(r"τ ([\d.]+), C (\d+), σ ([\d.]+), λ ([\d.]+), (\d+) epochs \(the paper gives "
              r"none of C, λ, τ")
  assert tuple(map(float, m.groups())) == (kd.tau, kd.clip, kd.noise_multiplier, kd.curve.lam,
                                           kd.epochs)

  teachers, cpu = _config("mnist_250.py"), _config("mnist_250.py:cpu")
  m = _readme(r"\*\*The paper teachers train (\d+) steps, not")
  assert int(m.group(1)) == teachers.num_steps
  m = _readme(r"wall time, whole script \(training (\d+) steps \+ votes")
  assert int(m.group(1)) == cpu.num_steps


def test_the_student_seconds_the_main_job_config_and_readme_cite_are_the_committed_runs():
  """configs/pate_mnist.py and the README cite the main job's PATE-G training seconds: the
  README's run (``pate_mnist_cpu_secret``, 1,179 s; the config said 587 s, an earlier
  run's) and RESULTS.md's (``pate_mnist_cpu``)."""
  runs = REPO / "results" / "runs"
  readme_run = json.loads((runs / "pate_mnist_cpu_secret_student" / "results.json").read_text())
  report_run = json.loads((runs / "pate_mnist_cpu" / "results.json").read_text())
  readme_s = round(readme_run["results"]["train_seconds"])
  report_s = round(report_run["results"]["student"]["train_seconds"])
  comment = " ".join((REPO / "configs" / "pate_mnist.py").read_text().replace("#", "").split())
  m = re.search(r"([\d,]+) s of training in the README's main-job run, ([\d,]+) s in "
                r"RESULTS.md's", comment)
  assert m and [int(x.replace(",", "")) for x in m.groups()] == [readme_s, report_s], (
      m and m.groups(), readme_s, report_s)
  m = _readme(r"the PATE-G student ([\d,]+) s of training for its 300 epochs")
  assert int(m.group(1).replace(",", "")) == readme_s


def test_figure_9s_histogram_is_the_one_its_caption_names():
  """Figure 9's caption names "a median-consensus histogram (from H3) in SVHN", and Table 1
  labels every group's five histograms H1-5: the median group's third SVHN row, which
  configs/attack_edge.py attacks (``svhn/M3``). The report's note read the H as Table 1's
  high-consensus group."""
  text = _paper("pate-histogram-leakage-attack.txt")
  flat = " ".join(text.split())
  assert "Figure 9: Error rates with baselines of a median-consensus histogram (from H3) in " \
         "SVHN" in flat
  assert "denoted here by H1-5 in the different consensus groups" in flat
  block = text[text.index("Chosen histograms for evaluation"):text.index("Table 1: The 30")]
  groups = re.split(r"^(High|Median|Low) consensus$", block, flags=re.M)
  for body in groups[2::2]:
    assert re.findall(r"^H(\d)", body, re.M) == ["1", "2", "3", "4", "5"]
  median = groups[groups.index("Median") + 1]
  svhn = [[int(x) for x in r.split(",")] for r in re.findall(r"\[([\d, ]+)\]", median)][5:]
  config = _config("attack_edge.py")
  assert config.histogram == "svhn/M3"
  np.testing.assert_array_equal(attacks.table1_histogram(config.histogram), svhn[2])
  for row in rp.ROWS:
    if row.paper == "attack" and row.item == "Figure 9":
      assert "high-consensus" not in (row.note or ""), row.note


def test_the_layouts_script_lengths_are_the_scripts():
  """*Layout* gives the range of the scripts' lengths ("SCRIPTS, 14-29 lines each")."""
  m = _readme(r"experiments/ SCRIPTS, (\d+)-(\d+) lines each")
  lengths = [len(p.read_text().splitlines()) for p in (REPO / "experiments").glob("*.py")]
  assert (int(m.group(1)), int(m.group(2))) == (min(lengths), max(lengths))


# ------------------------------------------------------------------ the README against its runs


def _run(name: str, path: str = "results.json") -> dict:
  return json.loads((REPO / "results" / "runs" / name / path).read_text())["results"]


def _seeds(name: str) -> list[dict]:
  files = sorted((REPO / "results" / "runs" / name).glob("seed_*/results.json"))
  assert files, name
  return [json.loads(f.read_text())["results"] for f in files]


def _pct(x: float, digits: int = 1) -> str:
  return f"{100 * x:.{digits}f}"


def _table_row(start: str) -> list[str]:
  """The cells of the README's one table row whose first cell begins with ``start``."""
  rows = [line for line in README.splitlines() if line.startswith("| " + start)]
  assert len(rows) == 1, f"README: {len(rows)} table rows begin with {start!r}"
  return [c.strip() for c in rows[0].strip().strip("|").split(" | ")]


# The *Students* table's rows of three seeds: the start of the first cell → the run.
_STUDENT_ROWS = {
    "PATE-G (`student_pate_g`)": "pate_g_100",
    "PATE-G, the paper's 300 epochs": "pate_g_100_long",
    "PATE-G, 300 epochs, real images shifted": "pate_g_100_shift",
    "PATE-G (`--config.aggregate.num_queries=1000": "pate_g_1000",
    "PATE-G on Confident-GNMax labels, real images": "pate_g_cgn",
    "the same student and seeds on the pool's own labels of the same answered": (
        "pate_g_cgn_true_answered"),
    "PATE-G on the pool's own labels (`--config.labels=true`": "pate_g_true",
}


def test_the_readmes_student_table_rows_are_their_runs_seeds():
  """A *Students* row of three seeds gives its run's held-out accuracies in seed order,
  their mean ± standard error (one decimal), the seeds' training seconds as a range, and
  (for the LNMax rows) the private data-dependent ε: "90.5 ± 1.3 % (88.1, 92.4, 90.9)" with
  a seed's 92.4 written 92.1 fails."""
  for start, name in _STUDENT_ROWS.items():
    cells = _table_row(start)
    seeds = _seeds(name)
    acc = np.array([s["eval_accuracy"] for s in seeds])
    m = re.match(r"\**([\d.]+) ± ([\d.]+) %\** \(([\d.]+), ([\d.]+), ([\d.]+)", cells[3])
    assert m, (name, cells[3])
    se = acc.std(ddof=1) / np.sqrt(len(acc))
    assert [m.group(1), m.group(2)] == [_pct(acc.mean()), _pct(se)], (name, m.groups())
    assert list(m.group(3, 4, 5)) == [_pct(a) for a in acc], (name, m.groups())
    seconds = sorted(round(s["train_seconds"]) for s in seeds)
    first = re.match(r"([\d,]+)(?:–([\d,]+))?", cells[5])
    low = int(first.group(1).replace(",", ""))
    high = int((first.group(2) or first.group(1)).replace(",", ""))
    if name == "pate_g_cgn":  # "747 (1–2); 1,718, 1,725 (3, ...)": seed by seed
      listed = [int(x.replace(",", "")) for x in re.findall(r"\d{1,3}(?:,\d{3})+|\d{3,}",
                                                           cells[5])]
      assert sorted(listed) == seconds, (name, cells[5], seconds)
    else:
      assert (low, high) == (seconds[0], seconds[-1]), (name, cells[5], seconds)
    if "moments_data_dependent" in seeds[0].get("private", {}).get("epsilon", {}):
      eps = {f"{s['private']['epsilon']['moments_data_dependent']['epsilon']:.2f}"
             for s in seeds}
      assert eps == {cells[4]}, (name, cells[4], eps)


def test_the_readmes_kd_gan_table_is_its_runs():
  """The KD-GAN table's measured columns are run ``kd_gan_cpu``'s Table 1 cells: mean ±
  standard error over its seeds for KD-only (λ = 1) and joint (λ = 0.5), and the published
  ε of n."""
  cells = {(c["n"], c["lam"]): c for c in _run("kd_gan_cpu")["table1"]}
  text = " ".join(README.split())
  rows = re.findall(r"\| ([\d,]+) \| ([\d.]+) ± ([\d.]+) % \| ([\d.]+) ± ([\d.]+) % \| "
                    r"[\d.]+ / [\d.]+ % \| ([\d.]+) \|", text)
  assert len(rows) == 3, rows
  for n, *values, epsilon in rows:
    n = int(n.replace(",", ""))
    got = []
    for lam in (1.0, 0.5):
      acc = np.array(cells[n, lam]["accuracy"])
      got += [_pct(acc.mean(), 2), _pct(acc.std(ddof=1) / np.sqrt(len(acc)), 2)]
    assert values == got, (n, values, got)
    published = cells[n, 0.5]["epsilon_published"]
    assert float(epsilon) == float(f"{published:.{len(epsilon.split('.')[1])}f}"), (n, epsilon)


def test_the_readmes_adult_table_is_its_runs():
  """The Adult comparison table (*Why our Adult student is 1.2 points below the paper's*)
  gives each run's LNMax student, private ε, student on the true labels, random pools
  (mean ± SE, how many the first pool beats) and non-private forest."""
  for start, name in (("original files and split", "adult_uci_rf"),
                      ("original split, the offline copy's coding", "adult_uci_rf_coarse"),
                      ("the offline copy", "adult_rf")):
    cells = _table_row(start)
    r = _run(name)
    pools = r["reference_students"]["random_pools"]
    expected = [f"{_pct(r['lnmax']['student_accuracy'], 2)} %",
                f"{r['lnmax']['epsilon_data_dependent']:.2f}",
                f"{_pct(r['reference_students']['true_labels'], 2)} %",
                f"{_pct(pools['mean'], 2)} ± {_pct(pools['standard_error'], 2)} % "
                f"({pools['below_first_pool']} of {pools['num_pools']})",
                f"{_pct(r['non_private']['accuracy_eval'], 2)} %"]
    assert [c.strip("*") for c in cells[1:]] == expected, (name, cells[1:], expected)


def test_the_readmes_attack_table_is_its_runs():
  """The histogram-attack table's measured column: the budget setting's query range and
  mean errors, the fixed setting's error per σ and Pearson r, the edge setting's errors and
  the defense's errors and ε, each from its committed run."""
  budget = _run("attack_budget")["datasets"]
  for name in ("mnist", "svhn"):
    cells = _table_row(f"`budget`, {name.upper()}")
    allowed = budget[name]["queries_allowed"]
    assert cells[1].startswith(f"{min(allowed):,}–{max(allowed):,} queries"), cells[1]
  errors = budget["mnist"]["mean_error"]
  assert (f"mean error {errors['confident/paper']:.3f} ({errors['gnmax_all/paper']:.3f} with "
          "every query answered by GNMax)") in _table_row("`budget`, MNIST")[1]
  errors = budget["svhn"]["mean_error"]
  assert (f"{errors['confident/paper']:.3f} with the text's rules, "
          f"{errors['confident/paper_tol0']:.3f} with loss threshold 0"
          ) in _table_row("`budget`, SVHN")[1]

  fixed = _run("attack_fixed")
  by_sigma = " / ".join(f"{e:.3f}" for e in fixed["summary"]["paper"]["mean_error_by_sigma"])
  r = fixed["correlation"]["confident_gnmax"]["per_histogram_and_sigma"]
  assert _table_row("`fixed`, 10⁴ queries")[1] == (
      f"mean error {by_sigma}; Pearson r(error, ε) = −{abs(r['r']):.3f} over {r['n']} points")

  edge = _run("attack_edge")
  sigmas, errors = edge["sigmas"], edge["error_mean"]["paper"]
  best = int(np.argmin(errors))
  assert _table_row("`edge`")[1].startswith(
      f"error {errors[0]:.3f} for σ ≤ 1, min {min(errors):.3f} at σ = ")
  assert f"{errors[sigmas.index(400.0)]:.3f} at σ = 400" in _table_row("`edge`")[1]
  assert sigmas[best] in (80.0, 100.0)

  defense = _run("attack_defense")
  cells = _table_row("`defense` (consistent")
  fresh = defense["summary"]["fresh_noise/projected"]["mean_error"]
  consistent = defense["summary"]["consistent/projected"]["mean_error"]
  assert cells[1].startswith(f"error {fresh:.3f} → {consistent:.3f} (projected solver)"), cells
  top = defense["summary"]["top_class_only/projected"]["mean_error"]
  ledger = {c["consistent"]: c["epsilon"] for c in defense["ledger_check"]}
  assert (f"top class alone {top:.3f}; 10⁴ repeats charged once (ε {ledger[True]:.3f} vs "
          f"{ledger[False]:.2f})") in cells[1], cells[1]


def test_the_readmes_main_job_private_line_is_its_run():
  """*Main job*'s lines marked private (teachers, plurality, data-dependent ε, the attack's
  errors) are run ``pate_mnist_cpu_secret``'s."""
  r = _run("pate_mnist_cpu_secret")
  teachers, attack = r["private"]["teachers"], r["private"]["attack"]["mean_error"]
  acc = teachers["teacher_test_accuracy"]
  dependent = r["aggregate"]["private"]["epsilon"]
  m = _readme(r"250 teachers at ([\d.]+) % mean test accuracy \(([\d.]+)–([\d.]+) %\), "
              r"plurality ([\d.]+) %; the data-dependent ε ([\d.]+) \(order (\d+); ([\d.]+) "
              r"classic\); the attack on the 5 labelled queries with the fewest top-class "
              r"votes \(10⁴ repeats each\): mean error ([\d.]+) \(paper's estimator\) / "
              r"([\d.]+) \(MLE\) with fresh noise, ([\d.]+) / ([\d.]+) with consistent "
              r"answers, where guessing all votes on the top class gives ([\d.]+)")
  assert list(m.groups()) == [
      _pct(acc["mean"], 2), _pct(acc["min"], 2), _pct(acc["max"], 2),
      _pct(teachers["plurality_accuracy_test"], 2),
      f"{dependent['rdp_data_dependent_improved']['epsilon']:.2f}",
      f"{dependent['rdp_data_dependent_improved']['best_order']:.0f}",
      f"{dependent['rdp_data_dependent_classic']['epsilon']:.3f}",
      f"{attack['fresh_noise/paper']:.3f}", f"{attack['fresh_noise/mle']:.3f}",
      f"{attack['consistent/paper']:.3f}", f"{attack['consistent/mle']:.3f}",
      f"{r['private']['attack']['guess_all_votes_on_top_class']:.3f}"]


def test_the_readmes_adult_partitions_paragraph_is_its_runs():
  """*Over 5 teacher partitions* gives run ``adult_uci_rf_cgn_partitions``' five seeds: the
  LNMax students (mean ± standard error, seed by seed), their ε (mean ± SE, range), the
  answered counts (mean ± SE, range, the expected counts' range), the Confident-GNMax
  students (mean ± SE, range), their data-dependent ε and the expected classic ε's range,
  and the seeds' seconds: "524 ± 14" with a seed's 489 answered read as 499 fails."""
  seeds = _seeds("adult_uci_rf_cgn_partitions")
  assert [s["lnmax"]["num_queries"] for s in seeds] == [500] * 5

  def mean_se(values, scale=1.0, digits=1):
    x = np.asarray(values, float) * scale
    return [f"{x.mean():.{digits}f}", f"{x.std(ddof=1) / np.sqrt(len(x)):.{digits}f}"]

  def span(values, scale=1.0, digits=2):
    x = np.asarray(values, float) * scale
    return [f"{x.min():.{digits}f}", f"{x.max():.{digits}f}"]

  m = _readme(r"`adult_uci_rf_cgn_partitions`, `--config.seed=s`, (\d+)–(\d+) s each beside a "
              r"teachers run\) the LNMax student is \*\*([\d.]+) ± ([\d.]+) %\*\* \(([\d., ]+)\) "
              r"at ε ([\d.]+) ± ([\d.]+) \(([\d.]+)–([\d.]+); private\), so seed 0's ([\d.]+) % "
              r"above is the best of the five and the paper's 83.0 % at 2.66 lies within the "
              r"spread. Confident-GNMax answers (\d+) ± (\d+) \((\d+)–(\d+); expected "
              r"([\d.]+)–([\d.]+), private\) and its students reach \*\*([\d.]+) ± ([\d.]+) %\*\* "
              r"\(([\d.]+)–([\d.]+)\) at a data-dependent ε of ([\d.]+) ± ([\d.]+) \(private; the "
              r"paper's expected accounting with the classic conversion ([\d.]+)–([\d.]+)\)")
  g = list(m.groups())
  seconds = [s["timings"]["total_s"] for s in seeds]
  assert g[0:2] == span(seconds, digits=0), (g[0:2], seconds)
  lnmax = [s["lnmax"]["student_accuracy"] for s in seeds]
  assert g[2:4] == mean_se(lnmax, 100), (g[2:4], lnmax)
  assert g[4].split(", ") == [_pct(a, 2) for a in lnmax], g[4]
  eps = [s["lnmax"]["epsilon_data_dependent"] for s in seeds]
  assert g[5:7] + g[7:9] == mean_se(eps, digits=2) + span(eps), (g[5:9], eps)
  assert g[9] == _pct(lnmax[0], 2) == _pct(max(lnmax), 2), g[9]
  cgn = [s["confident_gnmax"] for s in seeds]
  answered = [c["num_answered"] for c in cgn]
  assert g[10:14] == mean_se(answered, digits=0) + span(answered, digits=0), (g[10:14], answered)
  expected = [c["private"]["expected_answered"] for c in cgn]
  assert g[14:16] == span(expected, digits=1), (g[14:16], expected)
  students = [c["student_accuracy_mean"] for c in cgn]
  assert g[16:20] == mean_se(students, 100) + span(students, 100), (g[16:20], students)
  dependent = [c["private"]["epsilon_data_dependent"] for c in cgn]
  assert g[20:22] == mean_se(dependent, digits=2), (g[20:22], dependent)
  classic = [c["private"]["expected_epsilon_data_dependent_classic"] for c in cgn]
  assert g[22:24] == span(classic), (g[22:24], classic)


def test_the_adult_tables_seconds_are_its_runs():
  """The Adult table's preamble gives its runs' ``timings.total_s`` and code: the two on the
  original files (105 and 95 s at bb83541) and the offline copy's (49 s at 6bc61c2)."""
  m = _readme(r"the two on the original files re-run on (\w+), .*?; (\d+) and (\d+) s by "
              r"`timings.total_s`, beside a teachers run; the offline copy's run is (\w+)'s, "
              r"(\d+) s\)")
  runs = {name: json.loads((REPO / "results" / "runs" / name / "results.json").read_text())
          for name in ("adult_uci_rf", "adult_uci_rf_coarse", "adult_rf")}
  seconds = {name: f"{r['results']['timings']['total_s']:.0f}" for name, r in runs.items()}
  assert runs["adult_uci_rf"]["git"].startswith(m.group(1))
  assert runs["adult_uci_rf_coarse"]["git"].startswith(m.group(1))
  assert [m.group(2), m.group(3)] == [seconds["adult_uci_rf"], seconds["adult_uci_rf_coarse"]]
  assert runs["adult_rf"]["git"].startswith(m.group(4)) and m.group(5) == seconds["adult_rf"]


def _s(x: float, digits: int = 1) -> str:
  return f"{x:,.{digits}f}"


def test_the_readmes_h200_table_is_its_runs():
  """*Measured on one H200*: each row's figures outside brackets are its committed run's
  (the main job's walls and stage seconds, its teachers' phases and plans, its student's
  seconds, the benchmarks, the stage-3 students' accuracies, peaks, ε and walls, the fast
  tier's counts): "teachers 67.4 s" written 76.4 fails."""
  main, teachers = _run("pate_mnist_gpu"), _run("pate_mnist_teachers_gpu")
  student = _run("pate_mnist_student_gpu")
  cells = _table_row("default paper config end to end")
  stages = main["stage_seconds"]
  assert (f"**{_s(main['private']['seconds']['wall_end_to_end'])} s wall**" in cells[2]
          and f"add up to {_s(stages['teachers'] + stages['labels_and_student'])} s" in cells[2]
          and f"teachers {_s(stages['teachers'])} s (" in cells[2]
          and f"labels and student {_s(stages['labels_and_student'])} s (" in cells[2]
          and f"{main['private']['seconds']['attack']:.2f} s after the student" in cells[2]
          and f"{_s(main['private']['seconds']['attack_beside_student'])} s beside" in cells[2]
          ), cells[2]

  cells = _table_row("its teachers")
  phases, gib = teachers["phase_seconds"], 2.0 ** 30
  plan, votes = teachers["train_plan"], teachers["predict_plan"]
  accuracy = teachers["private"]["teacher_test_accuracy"]
  for part in (f"stage wall {_s(teachers['wall_seconds'])} s (",
               f"data {_s(phases['data'])} s, init {_s(phases['init'])} s",
               f"compilation {_s(phases['plan'])} s**",
               f"took {_s(teachers['compiled_ahead_seconds']['training_beside_init'])} s",
               f"training {_s(teachers['train_seconds'])} s (",
               f"at {teachers['train_examples_per_second'] / 1e3:.0f}k examples/s",
               f"blocked {_s(teachers['checkpoints']['blocking_seconds'])} s (",
               f"votes {_s(teachers['votes_seconds'])} s (",
               f"compiled in {_s(teachers['compiled_ahead_seconds']['votes_beside_training'])} s",
               f"the last save's wait {_s(teachers['checkpoints']['final_wait_seconds'])} s",
               f"writing {_s(phases['write'])} s",
               f"{plan['teachers']} teachers per training chunk "
               f"({plan['estimate_bytes'] / gib:.2f} of {plan['budget_bytes'] / gib:.2f} GiB)",
               f"{votes['teachers']} teachers × {votes['queries']:,} queries per vote chunk "
               f"({votes['estimate_bytes'] / gib:.1f} of {votes['budget_bytes'] / gib:.2f} GiB)",
               f"**{_pct(accuracy['mean'], 2)} %** ({_pct(accuracy['min'], 2)}–"
               f"{_pct(accuracy['max'], 2)} %",
               f"plurality {_pct(teachers['private']['plurality_accuracy_test'], 2)} %"):
    assert part in cells[2], (part, cells[2])
  assert teachers["wall_seconds"] == main["private"]["teachers"]["wall_seconds"]

  cells = _table_row("its labels and student")
  for part in (f"{student['num_answered']} of {student['num_queries']} answered "
               f"({_pct(student['label_accuracy'], 0)} % correct)",
               f"released ε {student['epsilon_release']['epsilon_released']:.2f}",
               f"{student['ledger']['epsilon']:.2f} of the budget's "
               f"{student['ledger']['epsilon_max']:.0f} spent",
               f"the labels took {student['labels_seconds']:.2f} s (",
               "compiled ahead in "
               f"{_s(main['concurrent_seconds']['accounting_compiled_beside_teachers'])} s",
               f"({_s(main['concurrent_seconds']['student_compiled_beside_teachers'])} s beside",
               f"trained in {_s(student['train_seconds'])} s (",
               f"**{_pct(student['eval_accuracy'])} %** (",
               f"stage wall {_s(student['wall_seconds'])} s ("):
    assert part in cells[2], (part, cells[2])

  bench = _run("bench_teachers_gpu")
  vmap = bench["strategies"]["vmap"]
  cells = _table_row("teachers benchmark (`configs/bench_teachers.py:cnn`")
  assert cells[2].startswith(
      f"vmap **{vmap['examples_per_second']:,.0f} examples/s** (") and (
      f"{_s(vmap['achieved_tflops'])} TFLOP/s, {_pct(vmap['fraction_of_peak'])} % of the "
      f"{bench['peak_tflops']:.0f} TFLOP/s" in cells[2]) and (
      f"chunks of 25: {bench['strategies']['chunked']['examples_per_second']:,.0f};"
      in cells[2]), cells[2]

  acct = _run("bench_accounting_gpu")
  cells = _table_row("accounting of 10⁶ queries (`configs/bench_accounting.py`)")
  assert cells[2].startswith(
      f"kernel {1e3 * acct['jax_seconds_median']:.1f} ms; public API from device votes "
      f"{1e3 * acct['public_api_end_to_end_seconds_device_votes']:.1f} ms "
      f"({acct['public_api_over_kernel_device_votes']:.2f}×), from host numpy votes "
      f"{1e3 * acct['public_api_end_to_end_seconds_host_votes']:.1f} ms "
      f"(**{acct['public_api_over_kernel_host_votes']:.2f}×**"), cells[2]

  for start, name in (("PATE-G, 100 LNMax labels", "pate_g_100_gpu"),
                      ("PATE-G with real images shifted", "pate_g_shift_100_gpu"),
                      ("PATE-G, 1,000 LNMax labels", "pate_g_1000_gpu"),
                      ("the 2018 row: Confident-GNMax", "pate_g_cgn_gpu")):
    cells, r = _table_row(start), _run(name)
    history = [h["eval_accuracy"] for h in r["history"]]
    peak = max(history)
    step = r["history"][history.index(peak)]["step"]
    assert f"**{_pct(r['eval_accuracy'])} %** (" in cells[2], (name, cells[2])
    assert f"{_s(r['wall_seconds'])} s wall" in cells[2], (name, cells[2])
    assert (f"peak {_pct(peak)} % at step {step:,}" in cells[2]
            or f"its peak, {_pct(peak)} %, at step {step:,}" in cells[2]), (name, cells[2], step)
    dependent = r["private"]["epsilon"]
    if "moments_data_dependent" in dependent and "shift" not in name:
      assert (f"data-dependent ε of {dependent['moments_data_dependent']['epsilon']:.2f}"
              in cells[2]), (name, cells[2])
    if isinstance(r.get("epsilon_release"), dict):
      assert (f"{r['num_answered']} answered ({_pct(r['label_accuracy'])} % correct), released "
              f"ε **{r['epsilon_release']['epsilon_released']:.2f}**") in cells[2], cells[2]
  first = _run("pate_g_100_gpu")["history"][0]
  assert (f"from {_pct(first['eval_accuracy'])} % (step {first['step']:,})"
          in _table_row("PATE-G, 100 LNMax labels")[2])

  baseline = _run("mnist_baseline_gpu")
  cells = _table_row("non-private baseline: the CNN on all 60,000")
  assert cells[2].startswith(
      f"**{_pct(baseline['private']['teacher_test_accuracy']['mean'], 2)} %** (") and (
      f"{_s(baseline['wall_seconds'])} s wall" in cells[2]), cells[2]

  fast = _run("tests_fast_gpu")
  cells = _table_row("the fast tier under CUDA")
  assert cells[2].startswith(
      f"{fast['tests']} tests in {fast['wall_seconds']:.0f} s: **{fast['passed']} passed**, "
      f"{fast['skipped']} skipped, **{len(fast['failed'])} failed**"), cells[2]


def test_the_readmes_h100_table_is_its_runs():
  """*Measured on one H100*: the teachers benchmark's examples/s of each way of computing
  the CNN, their ratios to the stage-2 setting, and the default teachers' run."""
  def rate(name):
    return _run(name)["strategies"]["vmap"]["examples_per_second"]
  base = _run("bench_teachers_d_lax_window_gpu")["strategies"]["vmap"]
  cells = _table_row("teachers bench, vmap, 250 paper-CNN teachers")
  assert cells[2] == (f"**{base['examples_per_second']:,.0f} examples/s** "
                      f"({_pct(base['fraction_of_peak'])} % of the 989 TFLOP/s peak)"), cells[2]
  for start, name, bold in (("the same without deterministic", "n_lax_window", False),
                            ("deterministic, max-pools as maxima", "d_lax_views", True)):
    value = rate(f"bench_teachers_{name}_gpu")
    number = f"{value:,.0f}"
    assert _table_row(start)[2] == (f"**{number}**" if bold else number) + (
        f" ({value / base['examples_per_second']:.1f}×)"), (name, _table_row(start)[2])
  assert _table_row("deterministic, convolutions as matrix products")[2] == (
      f"{rate('bench_teachers_d_patches_window_gpu'):,.0f} / "
      f"{rate('bench_teachers_d_patches_views_gpu'):,.0f}")
  assert _table_row("default kernels, patches and view pools")[2] == (
      f"{rate('bench_teachers_n_patches_views_gpu'):,.0f}")
  assert _table_row("deterministic, 5×5 stride-2")[2] == (
      f"{rate('bench_teachers_d_patches_stride_gpu'):,.0f}")

  teachers = _run("mnist_250_gpu")
  accuracy = teachers["private"]["teacher_test_accuracy"]
  cells = _table_row("the default paper teachers alone")
  assert cells[2].startswith(
      f"training **{_s(teachers['train_seconds'])} s** "
      f"({teachers['train_examples_per_second'] / 1e3:.0f}k examples/s, checkpoint saves "
      f"included), votes {_s(teachers['votes_seconds'])} s, "
      f"**{teachers['wall_seconds']:.0f} s wall** ("), cells[2]
  assert (f"**{_pct(accuracy['mean'], 2)} %** ({_pct(accuracy['min'], 2)}–"
          f"{_pct(accuracy['max'], 2)} %), plurality "
          f"{_pct(teachers['private']['plurality_accuracy_test'], 2)} % (private)") in cells[2]


# ------------------------------------------------------------------ *Measured results*' paragraphs


def _whole(name: str, path: str = "results.json") -> dict:
  """A run's whole file: its results, config, seed and git hash."""
  return json.loads((REPO / "results" / "runs" / name / path).read_text())


def _git(name: str, path: str = "results.json") -> str:
  return _whole(name, path)["git"]


def test_the_readmes_main_job_paragraph_is_its_runs():
  """*Main job*'s publishable figures are run ``pate_mnist_cpu_secret``'s (its wall, the
  teachers' stage, the labels' accuracy, the classic ε, the released ε, the budget spent,
  the student), its curve the student stage's history, and its LNMax run
  ``pate_mnist_cpu_lnmax``'s: "ε released with smooth sensitivity 1.05" written 1.07 fails."""
  r, top = _run("pate_mnist_cpu_secret"), "pate_mnist_cpu_secret"
  agg = r["aggregate"]
  m = _readme(r"code (\w+), secret noise, nothing else running; its publishable `results.json` "
              r"is run `pate_mnist_cpu_secret`\): \*\*([\d,]+) s wall\*\* \(.*?; teachers (\d+) "
              r"s, the PATE-G student")
  assert _git(top).startswith(m.group(1)), m.group(1)
  assert m.group(2, 3) == (f"{r['private']['seconds']['wall_end_to_end']:,.0f}",
                           f"{r['stage_seconds']['teachers']:.0f}"), m.groups()
  m = _readme(r"(\d+) GNMax labels \(σ = (\d+)\) on a class-balanced subset of the public pool "
              r"\((\d+) per class, .*?\), (\d+) % correct; ε at δ = 1e-5 of the labels, "
              r"data-independent, [\d.]+ \(improved conversion; ([\d.]+) classic\); \*\*ε released "
              r"with smooth sensitivity ([\d.]+)\*\* \(release (\d+);.*?\*\*ε ([\d.]+) of ε_max "
              r"(\d+) spent\*\* .*?\*\*the student: ([\d.]+) % on the ([\d,]+) held-out images\*\*")
  eps = agg["epsilon"]["rdp_data_independent_classic"]["epsilon"]
  assert list(m.groups()) == [
      str(agg["num_answered"]), f"{agg['noise']['sigma']:.0f}", str(agg["labelled_per_class"][0]),
      _pct(agg["label_accuracy_answered"], 0), f"{eps:.2f}",
      f"{r['epsilon_release']['epsilon_released']:.2f}", str(r["epsilon_release"]["release"]),
      f"{r['ledger']['epsilon']:.2f}", f"{r['ledger']['epsilon_max']:.0f}",
      _pct(r["student"]["eval_accuracy"], 2), f"{r['student']['num_eval']:,}"], m.groups()
  assert set(agg["labelled_per_class"]) == {agg["labelled_per_class"][0]}
  assert agg["num_answered"] == agg["num_queries"]

  history = {h["step"]: h["eval_accuracy"] for h in _run(top + "_student")["history"]}
  m = _readme(r"Its curve in this run: ([\d.]+) % after ([\d,]+) steps, ([\d.]+) % at ([\d,]+), "
              r"([\d.]+) % at ([\d,]+), ([\d.]+) % at ([\d,]+) \(its student stage's file")
  points = [(m.group(i), int(m.group(i + 1).replace(",", ""))) for i in (1, 3, 5, 7)]
  for value, step in points:
    assert value == _pct(history[step]), (step, value, history[step])
  assert points[0][1] == min(history) and points[-1][1] == max(history)

  lnmax = _run("pate_mnist_cpu_lnmax")
  tight = lnmax["epsilon_tight"]["moments_data_dependent"]
  m = _readme(r"that run \(code (\w+), seeded noise, ([\d,]+) s at load ≈ [\d.]+\) labels "
              r"([\d.]+) % at a private data-dependent ε of ([\d.]+) \(moments 1\.\.8; ([\d.]+) "
              r"at moment (\d+) of 1\.\.128\), data-independent ([\d.]+), student ([\d.]+) %; it "
              r"is the `pate_mnist_cpu_lnmax` run")
  assert _git("pate_mnist_cpu_lnmax").startswith(m.group(1))
  assert list(m.groups()[1:]) == [
      f"{lnmax['wall_seconds']:,.0f}", _pct(lnmax["aggregate"]["label_accuracy_answered"]),
      f"{lnmax['epsilon']['moments_data_dependent']['epsilon']:.2f}", f"{tight['epsilon']:.3f}",
      str(tight["best_moment"]), f"{lnmax['epsilon']['moments_data_independent']['epsilon']:.2f}",
      _pct(lnmax["student"]["eval_accuracy"], 2)], m.groups()
  assert "1..128" in lnmax["aggregate"]["epsilon_convention"]


def test_the_readmes_main_job_release_settings_are_its_run():
  """*Main job*'s data-independent ε (improved conversion) and the release's order, β and
  σ_ss are run ``pate_mnist_cpu_secret``'s, the order the rule's (the least
  data-independent ε of the labels), β 0.4/order and σ_ss the config's."""
  whole = _whole("pate_mnist_cpu_secret")
  r, config = whole["results"], whole["config"]["aggregate"]["release"]
  improved = r["aggregate"]["epsilon"]["rdp_data_independent_improved"]
  release = r["epsilon_release"]
  m = _readme(r"data-independent, ([\d.]+) \(improved conversion; [\d.]+ classic\); \*\*ε released "
              r"with smooth sensitivity [\d.]+\*\* \(release \d+; order (\d+) from the "
              r"data-independent rule, where conditions C5 and C6 hold, β ([\d.]+), σ_ss (\d+), "
              r"fixed in the config\)")
  assert list(m.groups()) == [f"{improved['epsilon']:.2f}", f"{release['order']:.0f}",
                              f"{release['beta']:.4f}", f"{release['sigma_ss']:.0f}"], m.groups()
  assert config["order"] is None and config["beta"] is None
  assert release["order"] == improved["best_order"] and release["conversion"] == "improved"
  assert release["beta"] == pytest.approx(0.4 / release["order"])
  default = _config("pate_mnist.py:cpu").aggregate.release
  assert release["sigma_ss"] == config["sigma_ss"] == default.sigma_ss
  assert default.order is None and default.beta is None


def test_the_readmes_cpu_teachers_table_is_its_runs():
  """*Teachers, MNIST, 250 teachers (CPU config)*: the teachers and examples, the teachers'
  accuracy and gap (the main job's run), the plurality accuracies of ``pate_mnist_cpu`` and
  ``pate_mnist_cpu_secret``, the teachers' walls and the paper's 83.86 %."""
  secret = _run("pate_mnist_cpu_secret")
  teachers = secret["private"]["teachers"]
  report = _run("pate_mnist_cpu", "teachers/results.json")
  assert _table_row("teachers × examples")[1] == (
      f"{report['num_teachers']} × {report['examples_per_teacher']} "
      f"({report['dropped_examples']} dropped), seed "
      f"{_whole('pate_mnist_cpu', 'teachers/results.json')['seed']}")
  assert (teachers["num_teachers"], teachers["examples_per_teacher"]) == (
      report["num_teachers"], report["examples_per_teacher"])
  acc = teachers["teacher_test_accuracy"]
  cells = _table_row("teacher test accuracy, mean (min–max)")
  assert cells[1] == (f"{_pct(acc['mean'], 2)} % ({_pct(acc['min'], 2)}–{_pct(acc['max'], 2)} %) "
                      "*(private)*"), cells[1]
  paper = re.search(r"average test accuracy of individual teachers is ([\d.]+)% for MNIST",
                    " ".join(_paper("pate-2017-iclr.md").split()))
  assert cells[2] == f"{paper.group(1)} % (CNN)", cells[2]
  cells = _table_row("plurality accuracy, 1,000 evaluation images / full test set")
  private = report["private"]
  assert cells[1] == (f"{_pct(private['plurality_accuracy_eval'], 2)} % / "
                      f"{_pct(private['plurality_accuracy_test'], 2)} % in `pate_mnist_cpu` "
                      f"({_pct(teachers['plurality_accuracy_test'], 2)} % on the full test set in "
                      "`pate_mnist_cpu_secret`) *(private)*"), cells[1]
  assert private["num_eval"] == 1000
  cells = _table_row("mean normalized top-two gap (test set)")
  assert cells[1] == f"{teachers['mean_normalized_gap']:.3f} *(private)*", cells[1]
  assert f"{private['mean_normalized_gap']:.3f}" == f"{teachers['mean_normalized_gap']:.3f}"
  cells = _table_row("wall time, whole script (training 250 steps")
  assert cells[1].startswith(
      f"{teachers['wall_seconds']:.0f} s (its stage, with the hand-over, "
      f"{secret['stage_seconds']['teachers']:.0f} s) in the main job's run "
      f"`pate_mnist_cpu_secret` (idle machine), {report['wall_seconds']:.0f} s in "
      "`pate_mnist_cpu`;"), cells[1]


def test_the_readmes_figures_2_and_3_are_their_runs():
  """*Figure 3*'s gaps are run ``figure3``'s, at its commit, and the teachers' accuracies
  those of the three runs it reads (the 250 teachers': the run whose gap it plots);
  *Figure 2*'s grid is run ``figure2``'s and its γ = 0.05 point run ``figure2_g005``'s, with
  the paper's 93.18 %."""
  rows = {row["num_teachers"]: row for row in _run("figure3")["figure3"]}
  lnmax = _run("pate_mnist_cpu_lnmax", "teachers/results.json")
  assert rows[250]["mean_normalized_gap"] == lnmax["mean_normalized_gap"]
  m = _readme(r"re-measured on commit (\w+), after the named PRNG streams; the committed run "
              r"`figure3` read its 250 teachers from the main job's `([\w/]+)`, the same CPU "
              r"teachers at ([\d.]+) %\): ([\d.]+) / ([\d.]+) / ([\d.]+) \(before the streams: "
              r"[\d.]+ / [\d.]+ / [\d.]+\)\. Teachers' mean test accuracy ([\d.]+) % / "
              r"([\d.]+) % / ([\d.]+) %")
  assert _git("figure3").startswith(m.group(1))
  assert rows[250]["workdir"] == m.group(2), m.groups()
  assert m.group(3) == _pct(lnmax["teacher_test_accuracy"]["mean"], 2), m.groups()
  assert list(m.group(4, 5, 6)) == [f"{rows[n]['mean_normalized_gap']:.3f}"
                                    for n in (10, 100, 250)], m.groups()
  accuracies = [_run(f"mnist_n{n}")["teacher_test_accuracy"]["mean"] for n in (10, 100)]
  accuracies.append(lnmax["teacher_test_accuracy"]["mean"])
  assert list(m.group(7, 8, 9)) == [_pct(a, 2) for a in accuracies], m.groups()

  m = _readme(r"--workdir runs/figure2`; the committed runs `figure2` and `figure2_g005`, like "
              r"`figure3`, read their 250 teachers from `([\w/]+)`\)")
  for name in ("figure2", "figure2_g005"):
    curves = _run(name, "figure2.json")["curves"]
    assert {c["num_teachers"]: c["workdir"] for c in curves}[250] == m.group(1), name
  assert rows[250]["workdir"] == m.group(1)
  grid = _whole("figure2", "figure2.json")["config"]
  m = _readme(r"for γ ∈ \[([\d.]+), ([\d.]+)\], vmapped over the grid and (\d+) seeds")
  assert (float(m.group(1)), float(m.group(2)), int(m.group(3))) == (
      grid["eps_min"], grid["eps_max"], grid["num_seeds"])
  whole = _whole("figure2_g005", "figure2.json")
  config, r = whole["config"], whole["results"]
  curve = {c["num_teachers"]: c for c in r["curves"]}[250]
  m = _readme(r"with (\d+) teachers at γ = ([\d.]+) \(Laplace scale (\d+)\) it is ([\d.]+) % "
              r"\(mean of (\d+) seeds, full test set, re-measured on (\w+) with "
              r"`--config.eps_min=([\d.]+) --config.eps_max=([\d.]+) --config.num_points=(\d+) "
              r"--config.num_seeds=(\d+)`, run `figure2_g005` of `RESULTS.md`; [\d.]+ % before the "
              r"named streams, not committed; paper: ([\d.]+) %\)")
  assert int(m.group(1)) == curve["num_teachers"]
  assert float(m.group(2)) == pytest.approx(r["gamma"][0]) and float(m.group(3)) == round(
      1 / r["gamma"][0])
  assert m.group(4) == _pct(curve["accuracy_mean"][0], 2), (m.group(4), curve["accuracy_mean"])
  assert int(m.group(5)) == r["num_seeds"] == config["num_seeds"] == int(m.group(10))
  assert r["rows"] == "all" and whole["git"].startswith(m.group(6))
  assert (float(m.group(7)), float(m.group(8)), int(m.group(9))) == (
      config["eps_min"], config["eps_max"], config["num_points"])
  assert f"{m.group(11)}% for MNIST" in _paper("pate-2017-iclr.md")


def test_the_readmes_noisy_labels_paragraph_is_its_runs():
  """*Noisy labels and their privacy cost*: the table's rows are the students'
  ``supervised_100`` and ``supervised_1000`` label figures and Figure 4's ε of their query
  count; the class-balanced figures runs ``agg_q100``/``agg_q1000``'s; Confident-GNMax's
  run ``agg_cgn_1000``'s."""
  figure_4 = _figure_4()
  rows = re.findall(r"\| ([\d,]+) \| ([\d.]+) % \| ([\d.]+) \((\d)\) \| ([\d.]+) \| ([\d.]+) \| "
                    r"([\d.]+) \|", " ".join(README.split()))
  assert [r[0] for r in rows] == ["100", "1,000"], rows
  for row, name in zip(rows, ("supervised_100", "supervised_1000")):
    r = _run(name)
    eps = r["epsilon"]
    assert list(row) == [
        f"{r['num_queries']:,}", _pct(r["label_accuracy"]),
        f"{eps['moments_data_dependent']['epsilon']:.2f}",
        str(eps["moments_data_dependent"]["best_moment"]),
        f"{eps['moments_data_independent']['epsilon']:.2f}",
        f"{eps['strong_composition']['epsilon']:.2f}",
        figure_4["MNIST", r["num_queries"]]["epsilon"]], (name, row)
    assert r["mechanism"] == "lnmax" and r["noise"]["gamma"] == 0.05

  m = _readme(r"asks class-balanced rows: ([\d.]+) % at ([\d.]+) \(moment (\d)\) for 100 and "
              r"([\d.]+) % at ([\d.]+) \(moment (\d)\) for 1,000, runs `agg_q100` and `agg_q1000`")
  got = []
  for name in ("agg_q100", "agg_q1000"):
    r = _run(name)
    dependent = r["private"]["epsilon"]["moments_data_dependent"]
    assert r["query_selection"] == "balanced"
    got += [_pct(r["label_accuracy_answered"]), f"{dependent['epsilon']:.2f}",
            str(dependent["best_moment"])]
  assert list(m.groups()) == got, (m.groups(), got)

  r = _run("agg_cgn_1000")
  m = _readme(r"(\d+) of ([\d,]+) queries answered, ([\d.]+) % of them correctly, at a private "
              r"data-dependent ε of ([\d.]+) \(RDP, improved conversion; ([\d.]+) data-independent,"
              r".*? released with smooth sensitivity at the rule's order (\d+): ([\d.]+); the "
              r"budget's ε with the release ([\d.]+) — run `agg_cgn_1000` of `RESULTS.md`, code "
              r"(\w+), with `--config.noise_seed=(\d+)`")
  assert list(m.groups()[:-2]) == [
      str(r["num_answered"]), f"{r['num_queries']:,}", _pct(r["label_accuracy_answered"]),
      f"{r['private']['epsilon']['rdp_data_dependent_improved']['epsilon']:.2f}",
      f"{r['epsilon']['rdp_data_independent_improved']['epsilon']:.2f}",
      f"{r['epsilon_release']['order']:.0f}", f"{r['epsilon_release']['epsilon_released']:.2f}",
      f"{r['ledger']['epsilon']:.2f}"], m.groups()
  assert _git("agg_cgn_1000").startswith(m.group(9))
  assert int(m.group(10)) == r["noise_source"]["noise_seed"]


def test_the_readmes_ablation_paragraph_is_its_run():
  """*Vectorised ablations*: run ``ablation``'s seconds, speed-ups, agreement and load, and
  its cells at s = 20 (LNMax, 250 and 10 teachers) and σ₂ = 40 (Confident-GNMax); the
  100-query figure is ``pate_mnist_cpu_lnmax``'s and the one-draw figure the table's."""
  r = _run("ablation")
  m = _readme(r"runs in \*\*([\d.]+) s\*\* \(best of (\d)\) after a ([\d.]+) s compile; the same "
              r"cells one by one through the public API take \*\*([\d.]+) s\*\* after ([\d.]+) s "
              r"of first-call compiles: \*\*(\d+)×\*\* \(([\d.]+)× counting compilation\), with "
              r"the same labels and ε equal to (\de-\d+) \(idle machine, load ([\d.]+)–([\d.]+); "
              r"run `ablation`;")
  load = sorted(r["loadavg_1min"].values())
  assert list(m.groups()) == [
      f"{r['vectorised_s']:.3f}", str(len(r["vectorised_runs_s"])), f"{r['compile_s']:.1f}",
      f"{r['loop_s']:.2f}", f"{r['loop_compile_s']:.1f}", f"{r['speedup']:.0f}",
      f"{r['speedup_with_compile']:.1f}", f"{r['loop_vs_grid']['max_relative_difference']:.0e}",
      f"{load[0]:.1f}", f"{load[-1]:.1f}"], m.groups()
  assert r["vectorised_s"] == min(r["vectorised_runs_s"]) and r["loop_vs_grid"]["labels_equal"]
  assert not r["loop_extrapolated"] and r["loop_cells"] == r["grid_cells"]

  cells = {(c["mechanism"], c["teachers"], c["scale"]): c for c in r["table"]}
  m = _readme(r"At s = (\d+) with (\d+) teachers LNMax labels ([\d,]+) queries ([\d.]+) % right "
              r"\(the mean of the grid's (\d) noise seeds; the table above: ([\d.]+) %, one draw\) "
              r"at a private data-dependent ε of ([\d.]+), and 100 queries ([\d.]+) % at ([\d.]+) "
              r"\(a 100-query grid, not committed; the main job's LNMax figure, run "
              r"`pate_mnist_cpu_lnmax`, exactly\); Confident-GNMax at σ₂ = (\d+) answers (\d+) % "
              r"of 1,000 queries, ([\d.]+) % right, at ([\d.]+) \(private, data-dependent\); with "
              r"(\d+) teachers LNMax at s = (\d+) falls to ≈ (\d+) %")
  s, n = float(m.group(1)), int(m.group(2))
  lnmax, cgn = cells["lnmax", n, s], cells["confident_gnmax", n, float(m.group(10))]
  small = cells["lnmax", int(m.group(14)), float(m.group(15))]
  main = _run("pate_mnist_cpu_lnmax")["aggregate"]
  assert list(m.groups()[2:9]) + list(m.groups()[10:13]) + [m.group(16)] == [
      f"{r['num_queries']:,}", _pct(lnmax["accuracy"]["mean"]), str(r["grid_shape"]["seed"]),
      _pct(_run("supervised_1000")["label_accuracy"]), f"{lnmax['epsilon']['mean']:.2f}",
      _pct(main["label_accuracy_answered"]),
      f"{main['epsilon']['moments_data_dependent']['epsilon']:.2f}",
      _pct(cgn["answered"]["mean"], 0), _pct(cgn["accuracy"]["mean"]),
      f"{cgn['epsilon']['mean']:.2f}", _pct(small["accuracy"]["mean"], 0)], m.groups()
  assert lnmax["epsilon"]["min"] == lnmax["epsilon"]["max"]  # one ε for every seed


def test_the_readmes_moment_grid_paragraph_is_its_run():
  """*The moment grid*: the 2017 grid's ε and best moment (at the grid's end), the tight
  grid's end, ε and best moment are run ``pate_mnist_cpu_lnmax``'s, whose votes are its own
  main job's teachers (not ``runs/pate_mnist_cpu``'s, whose votes differ); the teachers'
  mean accuracy beside the paper's is the main job's; the strong-composition values are
  the paper's and run ``published_accounting``'s."""
  whole = _whole("pate_mnist_cpu_lnmax")
  agg = whole["results"]["aggregate"]
  loose, tight = (agg["epsilon"]["moments_data_dependent"],
                  agg["epsilon_tight"]["moments_data_dependent"])
  m = _readme(r"`epsilon` uses the 2017 code's moments l = 1\.\.(\d+) \(`max_moment`\), for "
              r"comparison with the paper's [\d.]+; on our CPU teachers the best moment is (\d+), "
              r"the end of that grid")
  assert (int(m.group(1)), int(m.group(2))) == (loose["grid"][1], loose["best_moment"])
  assert loose["best_at_grid_edge"] and "moments_data_dependent" in agg["epsilon_at_grid_edge"]
  m = _readme(r"\(moments 1\.\.`tight_max_moment` = (\d+)\): for the 100 queries above \(the first "
              r"pool rows, on the votes of the 250 CPU teachers, seed 0, that run "
              r"`pate_mnist_cpu_lnmax`'s own main job trained, its `([\w/]+)`: .*?\) ε is ([\d.]+) "
              r"with moments to (\d+), [\d.]+ to 16, [\d.]+ to 32 and ([\d.]+) \(moment (\d+)\) to "
              r"64, (\d+) or 256")
  config = whole["config"]["aggregate"]
  assert int(m.group(1)) == tight["grid"][1] == config["tight_max_moment"] == _config(
      "aggregate_mnist.py").tight_max_moment
  assert m.group(2) == config["votes_dir"] and agg["num_queries"] == 100
  assert list(m.group(3, 4, 5, 6, 7)) == [
      f"{loose['epsilon']:.3f}", f"{loose['grid'][1]:.0f}", f"{tight['epsilon']:.3f}",
      str(tight["best_moment"]), f"{tight['grid'][1]:.0f}"], m.groups()
  assert tight["best_moment"] < 64 and not tight["best_at_grid_edge"]
  # The votes are not runs/pate_mnist_cpu's: that run's teachers score differently.
  assert (_run("pate_mnist_cpu_lnmax", "teachers/results.json")["mean_normalized_gap"]
          != _run("pate_mnist_cpu")["private"]["teachers"]["mean_normalized_gap"])

  m = _readme(r"our CPU teachers agree more \(mean accuracy ([\d.]+) % vs ([\d.]+) %\)")
  teachers = _run("pate_mnist_cpu_secret")["private"]["teachers"]
  assert m.group(1) == _pct(teachers["teacher_test_accuracy"]["mean"])
  paper = " ".join(_paper("pate-2017-iclr.md").split())
  assert f"average test accuracy of individual teachers is {m.group(2)}% for MNIST" in paper
  strong = {(s["num_queries"], s["delta"]): s for s in _run("published_accounting")[
      "strong_composition"]}
  m = _readme(r"\(`pate-2017-iclr\.md`; ([\d.]+) for T = (\d+), δ = (1e-\d), as printed; for "
              r"T = (\d+), δ = (1e-\d) the appendix prints ε ≈ (\d+), ours is ([\d.]+) — tested\)")
  small, large = (strong[int(m.group(2)), float(m.group(3))],
                  strong[int(m.group(4)), float(m.group(5))])
  assert m.group(1) == f"{small['epsilon']:.2f}" == f"{small['paper_epsilon']:.2f}"
  assert m.group(7) == f"{large['epsilon']:.2f}" and float(m.group(6)) == large["paper_epsilon"]
  for value in (m.group(1), m.group(6)):
    assert f"\\varepsilon\\approx{value}$" in paper, value


def test_the_readmes_smooth_sensitivity_paragraph_is_its_runs():
  """*Releasing data-dependent ε*: the MNIST row is run ``release_mnist``'s (its queries,
  setting, answered count, released ε at the fixed order, data-independent ε, and the
  private comparisons), the speed run ``bench_smooth_sensitivity``'s."""
  whole = _whole("release_mnist")
  r, fixed, tf = whole["results"], whole["results"]["private"]["fixed"], (
      whole["results"]["private"]["expected_tf_privacy"]["release"])
  m = _readme(r"first (\d+) queries, Confident-GNMax T = (\d+), σ₁ = (\d+), σ₂ = (\d+), δ = "
              r"(1e-\d), (\w+) conversion: `python experiments/release_epsilon.py")
  noise = r["noise"]
  assert list(m.groups()) == [str(r["num_queries"]), f"{noise['threshold']:.0f}",
                              f"{noise['sigma_threshold']:.0f}", f"{noise['sigma']:.0f}",
                              f"{r['delta']:.0e}".replace("e-0", "e-"), r["conversion"]]
  assert whole["git"].startswith(_readme(r"--workdir runs/release_mnist` \(code (\w+),").group(1))
  m = _readme(r"→ (\d+) answered; \*\*released ε ([\d.]+)\*\* at the order ([\d.]+), β ([\d.]+) "
              r"and σ_ss ([\d.]+) fixed in the config; data-independent ([\d.]+)\. Private, for "
              r"comparison: the data-dependent ε ([\d.]+) \(([\d.]+) ± ([\d.]+) with the "
              r"release's cost\), and tf-privacy's analysis, which chooses the order and β on the "
              r"votes: ([\d.]+) → ([\d.]+) ± ([\d.]+) at λ = ([\d.]+)")
  release = r["release"]
  assert list(m.groups()) == [
      str(r["num_answered"]), f"{r['epsilon_released']:.3f}", f"{release['order']:g}",
      f"{release['beta']:.4f}", f"{release['sigma_ss']:g}",
      f"{r['epsilon_data_independent']:.3f}", f"{fixed['epsilon_before']:.3f}",
      f"{fixed['epsilon']:.3f}", f"{fixed['noise_std']:.3f}", f"{tf['epsilon_before']:.3f}",
      f"{tf['epsilon']:.3f}", f"{tf['noise_std']:.3f}", f"{tf['order']:g}"], m.groups()

  b = _run("bench_smooth_sensitivity")
  m = _readme(r"release of ([\d,]+) queries \((\d+) teachers, (\d+) classes, T = (\d+), σ₁ = "
              r"(\d+), σ₂ = (\d+), λ = (\d+); padded to [\d,]+ rows\) in ([\d.]+) s after "
              r"compilation \(median of (\d) calls, ([\d.]+) s CPU; goal ≤ 5 s; compilation and "
              r"first call ([\d.]+) s\) at load ([\d.]+), against (\d+) s extrapolated for a "
              r"per-query, per-distance Python loop of the same maths \(timed on (\d+) queries; "
              r"([\d.]+)×; the two agree to ([\d.]+e-\d+)\)")
  config = _whole("bench_smooth_sensitivity")["config"]
  assert list(m.groups()) == [
      f"{b['num_queries']:,}", str(b["num_teachers"]), str(b["num_classes"]),
      f"{config['threshold']:.0f}", f"{config['sigma_threshold']:.0f}",
      f"{config['sigma']:.0f}", f"{b['order']:.0f}", f"{b['jax_seconds_median']:.2f}",
      str(len(b["jax_seconds_all_runs"])), f"{b['jax_cpu_seconds_median']:.2f}",
      f"{b['jax_compile_and_first_run_seconds']:.1f}",
      f"{b['load_average_1_5_15min_at_end'][0]:.1f}", f"{b['loop_seconds_extrapolated']:.0f}",
      str(b["loop_queries_timed"]), f"{b['speedup_vs_loop']:.1f}",
      f"{max(b['loop_vs_jax_relative_difference_on_subset'].values()):.1e}"], m.groups()


def test_the_readmes_accounting_benchmark_is_its_run():
  """*Accounting benchmark*: run ``bench_accounting``'s setting, kernel seconds, speed-ups,
  public API seconds and ratios, each inside the bracketed range over the three runs it
  is one of."""
  r = _run("bench_accounting")
  m = _readme(r"data-dependent accounting of 10⁶ queries \(2017 LNMax moments and 2018 "
              r"Confident-GNMax RDP, (\d+) teachers, (\d+) classes, (\d+) orders\) in "
              r"\*\*([\d.]+) s\*\* \(([\d.]+)–([\d.]+)\) after compilation \(goal ≤ 2 s\), "
              r"\*\*(\d+)×\*\* \((\d+)–(\d+)\) faster than a per-query NumPy loop of the same "
              r"formulas \(the loop timed on ([\d,]+) queries and extrapolated: (\d+) s, "
              r"(\d+)–(\d+); (\d+)× in CPU time, since the compiled version uses both cores\); "
              r"through the public API \(validation and conversion included\) ([\d.]+) s "
              r"\(([\d.]+)–([\d.]+)\) from device votes")
  g = m.groups()
  assert r["num_queries"] == 10 ** 6
  assert list(g[:4]) + [g[6], g[9], g[10], g[13], g[14]] == [
      str(r["num_teachers"]), str(r["num_classes"]), str(r["num_orders"]),
      f"{r['jax_seconds_median']:.2f}", f"{r['speedup_vs_loop']:.0f}",
      f"{r['loop_queries_timed']:,}", f"{r['loop_seconds_extrapolated']:.0f}",
      f"{r['speedup_vs_loop_cpu_time']:.0f}",
      f"{r['public_api_end_to_end_seconds_device_votes']:.2f}"], g
  for value, low, high in ((g[3], g[4], g[5]), (g[6], g[7], g[8]), (g[10], g[11], g[12]),
                           (g[14], g[15], g[16])):
    assert float(low) <= float(value) <= float(high), (value, low, high)
  m = _readme(r"the public API cost ([\d.]+)–([\d.]+)× the compiled kernel \(in the committed "
              r"one ([\d.]+)× from device votes, ([\d.]+)× from host votes\)")
  device, host = r["public_api_over_kernel_device_votes"], r["public_api_over_kernel_host_votes"]
  assert m.group(3, 4) == (f"{device:.2f}", f"{host:.2f}"), m.groups()
  assert float(m.group(1)) <= float(m.group(4)) <= float(m.group(2))
  assert float(m.group(1)) <= float(m.group(3)) <= float(m.group(2))


def test_the_readmes_publishable_tabular_release_is_its_runs():
  """*A publishable tabular release*: the research run it repeated (``adult_rf``), the
  labels' run ``adult_rf_labels`` (answered, accuracy, released ε and its order, β and
  σ_ss, the budget) and the students' run ``adult_rf_student``."""
  research, labels, student = _run("adult_rf"), _run("adult_rf_labels"), _run("adult_rf_student")
  m = _readme(r"the first command repeated the paragraph above to the digit: ([\d.]+), ([\d.]+) "
              r"and ([\d.]+) %, ε ([\d.]+)\), GNMax \(σ = (\d+)\) answered the (\d+) pool rows, "
              r"([\d.]+) % right; the smooth-sensitivity release gave ε ([\d.]+) \(order (\d+) "
              r"from the config's data-independent rule, β = 0\.4/(\d+) = ([\d.]+), σ_ss (\d+) "
              r"from the config; one noisy draw\) and the budget holds ([\d.]+) of its ([\d.]+) "
              r"\(the data-independent bound of the labels and the release, δ = (1e-\d)\); the "
              r"student forests scored ([\d.]+) % \(([\d.]+), ([\d.]+), ([\d.]+) %: (\d) forests "
              r"on the one release\) on the other ([\d,]+) test rows")
  release = labels["epsilon_release"]
  assert list(m.groups()) == [
      _pct(research["non_private"]["accuracy_eval"], 2),
      _pct(research["lnmax"]["student_accuracy"], 2),
      _pct(research["gnmax"]["student_accuracy"], 2),
      f"{research['lnmax']['epsilon_data_dependent']:.2f}", f"{labels['noise']['sigma']:.0f}",
      str(labels["num_answered"]), _pct(labels["label_accuracy_answered"]),
      f"{release['epsilon_released']:.2f}", f"{release['order']:.0f}",
      f"{release['order']:.0f}", f"{release['beta']:.3f}", f"{release['sigma_ss']:.0f}",
      f"{labels['ledger']['epsilon']:.2f}", f"{labels['ledger']['epsilon_max']:.1f}",
      f"{labels['delta']:.0e}".replace("e-0", "e-"), _pct(student["student_accuracy_mean"], 2),
      *[_pct(a, 2) for a in student["student_accuracies"]], str(student["student_repeats"]),
      f"{student['num_eval']:,}"], m.groups()
  assert labels["num_answered"] == labels["num_queries"] == student["num_pool"]
  assert student["epsilon"] == labels["ledger"]["epsilon"]
  assert release["beta"] == pytest.approx(0.4 / release["order"])
  m = _readme(r"\(LNMax's (\d+) answers would cost ([\d.]+) data-independent, past that budget, "
              r"and LNMax has no smooth-sensitivity release: its ([\d.]+) above stays private\.\)")
  assert list(m.groups()) == [str(research["lnmax"]["num_queries"]),
                              f"{research['lnmax']['epsilon_data_independent']:.2f}",
                              f"{research['lnmax']['epsilon_data_dependent']:.2f}"]
  assert research["lnmax"]["epsilon_data_independent"] > labels["ledger"]["epsilon_max"]


def test_the_readmes_kd_gan_ablation_is_its_run():
  """*Why the discriminator stays at chance*: run ``kd_gan_ablation``'s setting, wall and
  code, every D setting's joint − KD-only gain (mean ± SE, in points), the distances the
  KD-only student keeps from the teacher, the λ 0 variant's D and students, the
  unlabelled variant's D and cost; the paper's gain is Table 1's."""
  whole = _whole("kd_gan_ablation")
  r = whole["results"]
  v = {x["name"]: x for x in r["variants"]}

  def gain(name):
    return f"{100 * v[name]['gain']['mean']:.2f}", f"{100 * v[name]['gain']['se']:.2f}"

  minus = lambda s: s.replace("−", "-")
  m = _readme(r"n = ([\d,]+), the setting above, (\d) seeds paired by key; (\d+) variants, (\d+) "
              r"s wall beside two other jobs, the teacher's training included; code (\w+)\)\. The "
              r"joint − KD-only gain stays within ±([\d.]+) points for every setting of D tried: "
              r".*?τ 1 \(([−\d.]+) ± ([\d.]+)\); our Table 1 setting, whose values the paper does "
              r"not give, gains ([−\d.]+) ± ([\d.]+) points \(the paper's gain is ([\d.]+)\)\. "
              r"Trained 5× longer \((\d+) epochs\) the gain stays at ([−\d.]+) ± ([\d.]+) points, "
              r"while KD-only itself rises from ([\d.]+) to ([\d.]+) %")
  g = [minus(x) for x in m.groups()]
  assert g[:5] == [f"{r['num_public']:,}", str(len(r["seeds"])), str(len(r["variants"])),
                   f"{r['wall_seconds']:.0f}", g[4]] and whole["git"].startswith(g[4]), g
  settings = ["paper", "lam_0.9", "lam_0.1", "k_d_5", "disc_lr_1e-2", "disc_lr_1e-4",
              "disc_512x2", "gumbel_0.1", "gumbel_2", "unconditional", "tau_1"]
  widest = max(abs(v[name]["gain"]["mean"]) for name in settings)
  assert g[5] == f"{100 * widest:.2f}", (g[5], widest)
  table = _gao_table_1()
  paper_gain = float(table["MNIST", 1000, "joint"]) - float(table["MNIST", 1000, "KD-only"])
  assert r["num_public"] == 1000
  assert g[6:11] == [*gain("tau_1"), *gain("paper"), f"{paper_gain:.2f}"], g[6:11]
  fits = r["kd_only_fits"]
  assert g[11:] == [str(v["epochs_100"]["overrides"]["epochs"]), *gain("epochs_100"),
                    _pct(fits["kd_only"]["accuracy_mean"], 2),
                    _pct(fits["kd_only_epochs100"]["accuracy_mean"], 2)], g[11:]

  distance = fits["kd_only"]["distance"]
  m = _readme(r"mean total variation ([\d.]+), ([\d.]+) % argmax agreement — so even the best D "
              r"of one-hot samples is right ([\d.]+) % of the time, while on the held-out images "
              r"the distance is ([\d.]+) \(([\d.]+) % agreement\)")
  assert list(m.groups()) == [
      f"{distance['public']['tv_mean']:.4f}", _pct(distance["public"]["agreement_mean"]),
      _pct(distance["public"]["oracle_hard_disc_accuracy"], 2),
      f"{distance['held_out']['tv_mean']:.3f}", _pct(distance["held_out"]["agreement_mean"])]

  m = _readme(r"with λ 0 \(no KD\) it reaches ([\d.]+) % over rounds (\d+)–(\d+) and the student "
              r"learns from D alone to ([\d.]+), ([\d.]+) and ([\d.]+) % in three seeds \(the "
              r"fourth stays at chance, ([\d.]+) %\), but with λ > 0 KD closes the gap within the "
              r"first hundred rounds, before D has learnt anything \(([\d.]+) % over rounds "
              r"1–(\d+)\)\. Drawing the student's samples on ([\d,]+) further images .*? lets D "
              r"reach (\d+) % but costs the student ([\d.]+) ± ([\d.]+) points")
  zero = v["lam_0"]
  assert zero["lam"] == 0.0
  rounds = [s["round"] for s in zero["segments"]]
  last = int(m.group(3))
  segment = zero["segments"][rounds.index(last)]
  assert int(m.group(2)) == rounds[rounds.index(last) - 1] + 1
  accuracies = zero["joint"]["accuracy"]
  chance = min(range(len(accuracies)), key=accuracies.__getitem__)
  others = [_pct(a) for i, a in enumerate(accuracies) if i != chance]
  unlabelled = v["unlabelled_10k"]
  assert list(m.groups()[3:]) == [
      *others, _pct(accuracies[chance]), _pct(v["paper"]["disc_first"]["accuracy"]),
      str(v["paper"]["disc_first"]["rounds"]), f"{unlabelled['num_unlabelled']:,}",
      _pct(unlabelled["disc_last"]["accuracy"], 0), f"{-100 * unlabelled['gain']['mean']:.2f}",
      f"{100 * unlabelled['gain']['se']:.2f}"], m.groups()
  assert m.group(1) == _pct(segment["disc_accuracy"]), (m.group(1), segment)


def test_the_readmes_sound_kd_gan_table_is_its_runs():
  """*Sound variant*: its seeds, code, walls and teacher are runs ``kd_gan_sound`` (n =
  3,000) and ``kd_gan_sound_n1000``'s; the table gives each run's sound accuracy and noise
  std per ε, and the published mechanism's curve point nearest each ε where it lies within
  1.5 times that ε, "—" where none does (its accuracy and ε to the digits written): "76.3 %"
  at ε 4 written 76.8 fails."""
  runs = {3000: _whole("kd_gan_sound"), 1000: _whole("kd_gan_sound_n1000")}
  m = _readme(r"(\d) seeds, code (\w+), secret noise; (\d+) s beside another job \(n = ([\d,]+)\), "
              r"(\d+) s \(n = ([\d,]+), `--config.curve.num_public=1000 .*?\), each with the "
              r"KD-GAN teacher's training \(([\d.]+) %\)")
  for whole in runs.values():
    r = whole["results"]
    assert whole["git"].startswith(m.group(2)) and int(m.group(1)) == len(r["seeds"])
    assert r["noise"]["public"] is False and m.group(7) == _pct(r["teacher_accuracy"], 2)
  assert m.group(3, 4, 5, 6) == (
      f"{runs[3000]['results']['wall_seconds']:.0f}", "3,000",
      f"{runs[1000]['results']['wall_seconds']:.0f}", "1,000"), m.groups()
  header = _table_row("ε | 1 | 2 | 4 | 8")
  epsilons = [float(x) for x in header[1:]]
  for n, whole in runs.items():
    r = whole["results"]
    assert r["sound_num_public"] == n
    sound = {s["target_epsilon"]: s for s in r["sound"]}
    cells = _table_row(f"sound, n = {n:,} (noise std")
    assert cells[0] == (f"sound, n = {n:,} (noise std "
                        + " / ".join(f"{sound[e]['noise_std']:.2f}" for e in epsilons) + ")")
    assert cells[1:] == [f"{_pct(sound[e]['accuracy_mean'])} %" for e in epsilons], (n, cells)
    cells = _table_row(f"published mechanism, n = {n:,}")
    for epsilon, cell in zip(epsilons, cells[1:]):
      nearest = min(r["curve"], key=lambda c, e=epsilon: abs(c["epsilon_published"] - e))
      near = nearest["epsilon_published"] <= 1.5 * epsilon
      assert near == (cell != "—"), (n, epsilon, cell, nearest["epsilon_published"])
      if not near:
        continue
      c = re.fullmatch(r"(\d+)\.(\d+) % \((?:ε )?([\d.]+)\)", cell)
      assert c, cell
      digits = len(c.group(2))
      assert f"{c.group(1)}.{c.group(2)}" == _pct(nearest["accuracy_mean"], digits), (n, cell)
      assert c.group(3) == f"{nearest['epsilon_published']:.2f}", (n, cell)
  m = _readme(r"n = 1,000 beats 3,000 at every ε here, by ([\d.]+) points at ε 8")
  big = {s["target_epsilon"]: s["accuracy_mean"] for s in runs[3000]["results"]["sound"]}
  small = {s["target_epsilon"]: s["accuracy_mean"] for s in runs[1000]["results"]["sound"]}
  assert all(small[e] > big[e] for e in epsilons)
  assert m.group(1) == _pct(small[8.0] - big[8.0]), (m.group(1), small[8.0] - big[8.0])


# ------------------------------------------------------------------ *Students*' prose, the tabular
# paragraphs, the attack's and the KD-GAN's prose


def _mean_se(values, digits: int = 1) -> list[str]:
  """Percentages' mean and standard error, as the README writes them."""
  x = 100 * np.asarray(values, float)
  return [f"{x.mean():.{digits}f}", f"{x.std(ddof=1) / np.sqrt(len(x)):.{digits}f}"]


def _half_up(x: float) -> str:
  """``x`` to the integer, halves up, with thousands separators ("1,894.5" → "1,895")."""
  return f"{int(np.floor(x + 0.5)):,}"


def test_the_readmes_students_preamble_speeds_are_their_runs():
  """*Students*' preamble: the Confident-GNMax rows alone on the idle CPU trained at 36–44
  steps/s (``pate_g_cgn`` seed 0, its unshifted run ``pate_g_cgn_plain`` and the secret-noise
  run ``pate_g_cgn_cnn_secret``), the earlier rows at 17–34 (their files' steps over training
  seconds)."""
  m = _readme(r"alone on the idle CPU they trained at (\d+)–(\d+) PATE-G steps/s — ([\d,]+) steps "
              r"in (\d+) s for `pate_g_cgn` seed 0, (\d+) s for the secret-noise run — against "
              r"(\d+)–(\d+) in the earlier rows `pate_g_100`, `pate_g_1000` and `pate_g_true`")
  cgn = _seeds("pate_g_cgn")[0]
  alone = [cgn, _run("pate_g_cgn_plain"), _run("pate_g_cgn_cnn_secret")]
  rates = [r["steps"] / r["train_seconds"] for r in alone]
  earlier = [s["steps"] / s["train_seconds"]
             for name in ("pate_g_100", "pate_g_1000", "pate_g_true") for s in _seeds(name)]
  assert list(m.groups()) == [
      f"{min(rates):.0f}", f"{max(rates):.0f}", f"{cgn['steps']:,}",
      f"{cgn['train_seconds']:.0f}", f"{alone[2]['train_seconds']:.0f}",
      f"{min(earlier):.0f}", f"{max(earlier):.0f}"], (m.groups(), rates, earlier)


def test_the_readmes_students_against_the_paper_is_their_runs():
  """*Against the paper*: the 150-epoch figure (``pate_g_100_long`` at step 13,500), the
  gaps to Figure 4's students, the CNN teachers' 1,000 labels (``pate_g_1000_cnn``), the H200's
  stage 3, the main job's students, the Confident-GNMax seeds (answered, released ε, the
  failed game's losses), the true-label reruns, the teachers' accuracies and the CNN
  teachers' rows: "150 epochs give 96.3 ± 0.8 %" written 96.8 fails."""
  paper = {q: float(_figure_4()["MNIST", q]["student"]) for q in (100, 1000)}
  long = _seeds("pate_g_100_long")
  at_150 = [next(h["eval_accuracy"] for h in s["history"] if h["step"] == 13_500) for s in long]
  assert all(s["epochs"] == 300 and s["steps"] == 27_000 for s in long)
  final = [s["eval_accuracy"] for s in long]
  m = _readme(r"At the paper's 300 epochs the authors' PATE-G reaches \*\*([\d.]+) ± ([\d.]+) "
              r"%\*\* over 3 seeds \(([\d.]+), ([\d.]+), ([\d.]+)\), ([\d.]+) points short of the "
              r"paper's ([\d.]+) % \(one run there\), at a private data-dependent ε of ([\d.]+) "
              r"\(paper ([\d.]+)\); 150 epochs give ([\d.]+) ± ([\d.]+) %")
  eps = {f"{s['private']['epsilon']['moments_data_dependent']['epsilon']:.2f}" for s in long}
  assert list(m.groups()) == [
      *_mean_se(final), *[_pct(a) for a in final],
      f"{paper[100] - float(_mean_se(final)[0]):.1f}", f"{paper[100]:.2f}", eps.pop(),
      _figure_4()["MNIST", 100]["epsilon"], *_mean_se(at_150)], m.groups()

  short = {q: _mean_se([s["eval_accuracy"] for s in _seeds(name)])
           for q, name in ((100, "pate_g_100"), (1000, "pate_g_1000"))}
  m = _readme(r"At the CPU config's 75 epochs the gap is ([\d.]+) points at 100 queries "
              r"\(([\d.]+) ± ([\d.]+) %\) and ([\d.]+) at 1,000 \(([\d.]+) ± ([\d.]+) % "
              r"against ([\d.]+) %\)")
  assert list(m.groups()) == [
      f"{paper[100] - float(short[100][0]):.1f}", *short[100],
      f"{paper[1000] - float(short[1000][0]):.1f}", *short[1000], f"{paper[1000]:.2f}"]

  cnn = _run("pate_g_1000_cnn")
  m = _readme(r"At 300 epochs on 1,000 labels of the CPU's CNN teachers \(([\d.]+) % correct\) the "
              r"authors' PATE-G reaches ([\d.]+) ± ([\d.]+) %, ([\d.]+) points short of the paper, "
              r"at a private data-dependent ε of ([\d.]+) \(paper ([\d.]+)\); the H200's stage 3 "
              r"gave ([\d.]+) % on its paper-CNN teachers' labels")
  accuracies = cnn["eval_accuracy_seeds"]
  assert list(m.groups()) == [
      _pct(cnn["label_accuracy"]), *_mean_se(accuracies),
      f"{paper[1000] - float(_mean_se(accuracies)[0]):.1f}",
      f"{cnn['private']['epsilon']['moments_data_dependent']['epsilon']:.2f}",
      _figure_4()["MNIST", 1000]["epsilon"], _pct(_run("pate_g_1000_gpu")["eval_accuracy"])]

  shift = [s["eval_accuracy"] for s in _seeds("pate_g_100_shift")]
  secret, research = _run("pate_mnist_cpu_secret"), _run("pate_mnist_cpu")
  cgn = _seeds("pate_g_cgn")
  released = [s["epsilon_release"]["epsilon_released"] for s in cgn]
  answered = [s["num_answered"] for s in cgn]
  m = _readme(r"reaches \*\*([\d.]+) ± ([\d.]+) %\*\* \(([\d.]+), ([\d.]+), ([\d.]+)\), the main "
              r"job's PATE-G \*\*([\d.]+) %\*\* on (\d+) GNMax labels at a released ε of ([\d.]+) "
              r"\(one run, secret noise, 300 epochs in [\d,]+ s; the research-seed run of "
              r"`RESULTS.md`: ([\d.]+) % at a released ε of ([\d.]+)\), and on Papernot et al\. "
              r"2018's Confident-GNMax labels \((\d+) queries; (\d+)–(\d+) answered, released ε "
              r"([\d.]+)–([\d.]+)\) the student reaches ([\d.]+) and ([\d.]+) % in two seeds of "
              r"three")
  assert list(m.groups()) == [
      *_mean_se(shift), *[_pct(a) for a in shift], _pct(secret["student"]["eval_accuracy"], 2),
      str(secret["aggregate"]["num_answered"]),
      f"{secret['epsilon_release']['epsilon_released']:.2f}",
      _pct(research["student"]["eval_accuracy"], 2),
      f"{research['epsilon_release']['epsilon_released']:.2f}", str(cgn[0]["num_queries"]),
      str(min(answered)), str(max(answered)), f"{min(released):.2f}", f"{max(released):.2f}",
      _pct(cgn[0]["eval_accuracy"]), _pct(cgn[2]["eval_accuracy"])], m.groups()

  failed = cgn[1]["history"]
  m = _readme(r"its unlabelled loss falls to ([\d.]+) while the feature-matching loss climbs from "
              r"(\d+) to (\d+)–(\d+)\) and the student stalls near \d+ % \(([\d.]+) % at the end; "
              r"mean ([\d.]+) ± ([\d.]+) %\)")
  first = next(h for h in failed if h["step"] >= 900)
  later = [h["loss_gen"] for h in failed if h["step"] > 3_600]
  assert list(m.groups()) == [
      f"{min(h['loss_unl'] for h in failed):.4f}", f"{first['loss_gen']:.0f}",
      f"{min(later):.0f}", f"{max(later):.0f}", _pct(cgn[1]["eval_accuracy"]),
      *_mean_se([s["eval_accuracy"] for s in cgn])], m.groups()

  true = [s["eval_accuracy"] for s in _seeds("pate_g_cgn_true_answered")]
  assert [s["num_labels"] for s in _seeds("pate_g_cgn_true_answered")] == answered
  m = _readme(r"the same student and seeds reach \*\*([\d.]+) ± ([\d.]+) %\*\* \(([\d.]+), "
              r"([\d.]+), ([\d.]+); `--config.labels=true_answered`, run `pate_g_cgn_true_answered`"
              r"\), and the game does not fail in seed 1; on the first (\d+) \((\d+)\) "
              r"class-balanced rows, ([\d.]+) % \(([\d.]+) %\)\. The answered labels are "
              r"([\d.]+)–([\d.]+) % correct")
  labels = [s["label_accuracy"] for s in cgn]
  first_rows = [_run("pate_g_cgn_true"), _run("pate_g_cgn_true100")]
  assert list(m.groups()) == [
      *_mean_se(true), *[_pct(a) for a in true],
      *[str(r["num_queries"]) for r in first_rows],
      *[_pct(r["eval_accuracy"], 2) for r in first_rows],
      _pct(min(labels)), _pct(max(labels))], m.groups()

  mlp = _run("pate_mnist_cpu", "teachers/results.json")["private"]
  m = _readme(r"the MLP teachers' mean accuracy is ([\d.]+) %\)\..*?against the MLPs' ([\d.]+) and "
              r"([\d.]+) %; private\)")
  assert list(m.groups()) == [_pct(mlp["teacher_test_accuracy"]["mean"]),
                              _pct(mlp["teacher_test_accuracy"]["mean"]),
                              _pct(mlp["plurality_accuracy_test"])], m.groups()

  gpu = _run("pate_g_cgn_gpu")
  m = _readme(r"on one H200, \*\*([\d.]+) % at a released ε of ([\d.]+)\*\* \((\d+) answered; "
              r"research noise seed (\d+); run `pate_g_cgn_gpu`")
  assert list(m.groups()) == [
      _pct(gpu["eval_accuracy"]), f"{gpu['epsilon_release']['epsilon_released']:.2f}",
      str(gpu["num_answered"]), str(gpu["noise_source"]["noise_seed"])], m.groups()

  teachers = _whole("mnist_cnn_cpu")["results"]
  cnn_cgn = _seeds("pate_g_cgn_cnn")
  cnn_secret = _run("pate_g_cgn_cnn_secret")
  m = _readme(r"unrolled segments; (\d+) s wall, CPU mostly idle; ([\d.]+) % mean, plurality "
              r"([\d.]+) %, private\) gives Confident-GNMax labels that are ([\d.]+)–([\d.]+) % "
              r"correct \((\d+), (\d+), (\d+) answered of (\d+)\), and the same student and seeds "
              r"reach \*\*([\d.]+) ± ([\d.]+) %\*\* \(([\d.]+), ([\d.]+), ([\d.]+)\) at released ε "
              r"([\d.]+), ([\d.]+) and ([\d.]+) \(research noise seeds, run `pate_g_cgn_cnn`\); "
              r"with secret noise, the release \(run `pate_g_cgn_cnn_secret`, student seed 0\), "
              r"\*\*([\d.]+) %\*\* at a released ε of \*\*([\d.]+)\*\* \((\d+) answered, "
              r"([\d.]+) % correct; (\d+) s wall on the idle CPU\)")
  labels = [s["label_accuracy"] for s in cnn_cgn]
  assert list(m.groups()) == [
      f"{teachers['wall_seconds']:.0f}",
      _pct(teachers["private"]["teacher_test_accuracy"]["mean"], 2),
      _pct(teachers["private"]["plurality_accuracy_test"], 2), _pct(min(labels)),
      _pct(max(labels)), *[str(s["num_answered"]) for s in cnn_cgn],
      str(cnn_cgn[0]["num_queries"]), *_mean_se([s["eval_accuracy"] for s in cnn_cgn]),
      *[_pct(s["eval_accuracy"]) for s in cnn_cgn],
      *[f"{s['epsilon_release']['epsilon_released']:.2f}" for s in cnn_cgn],
      _pct(cnn_secret["eval_accuracy"], 2),
      f"{cnn_secret['epsilon_release']['epsilon_released']:.2f}",
      str(cnn_secret["num_answered"]), _pct(cnn_secret["label_accuracy"], 2),
      f"{cnn_secret['wall_seconds']:.0f}"], m.groups()


def _games() -> dict[str, list[dict]]:
  """Every committed PATE-G game that reached step 3,600: its run and place → its history."""
  found = {}

  def walk(node, where):
    if isinstance(node, dict):
      h = node.get("history")
      if isinstance(h, list) and h and isinstance(h[0], dict) and "loss_gen" in h[0]:
        found[where] = h
      for k, v in node.items():
        walk(v, f"{where}/{k}")
    elif isinstance(node, list):
      for v in node:
        walk(v, where)

  for path in sorted((REPO / "results" / "runs").glob("**/results.json")):
    walk(json.loads(path.read_text()), str(path.parent.relative_to(REPO / "results" / "runs")))
  return {k: h for k, h in found.items() if h[-1]["step"] >= 3_600}


def test_the_readmes_game_check_bullet_is_the_committed_games():
  """*A failed game restarts*: ``pate_g_cgn`` seed 1's ``loss_gen`` at steps 900–3,600, the
  committed games that worked (how many, their range at step 3,600, their later maximum but
  for ``pate_g_true`` seed 1's spike), and the checked rerun ``pate_g_cgn_checked``."""
  failed = _seeds("pate_g_cgn")[1]["history"]
  m = _readme(r"\(`pate_g_cgn` seed 1\) `loss_gen` was (\d+), (\d+), (\d+), (\d+) at steps "
              r"([\d,]+)–([\d,]+)\.")
  steps = [int(m.group(5).replace(",", "")), int(m.group(6).replace(",", ""))]
  record = [h for h in failed if steps[0] <= h["step"] <= steps[1]]
  assert [h["step"] for h in record] == [900, 1_800, 2_700, 3_600] and steps == [900, 3_600]
  assert list(m.groups()[:4]) == [f"{h['loss_gen']:.0f}" for h in record], m.groups()

  games = _games()
  at_check = {k: next(e["loss_gen"] for e in h if e["step"] >= 3_600) for k, h in games.items()}
  worked = {k: v for k, v in at_check.items() if v <= 20}
  assert sorted(set(games) - set(worked)) == ["pate_g_cgn/seed_1/results"]
  m = _readme(r"at step 3,600 the (\d+) games of `results/runs` that worked were at "
              r"([\d.]+)–([\d.]+),")
  assert list(m.groups()) == [str(len(worked)), f"{min(worked.values()):.1f}",
                              f"{max(worked.values()):.1f}"], m.groups()
  spike = "pate_g_true/seed_1/results"
  later = {k: max(e["loss_gen"] for e in games[k] if e["step"] > 3_600) for k in worked}
  m = _readme(r"after step 3,600 the (\d+) working games stayed at or below ([\d.]+) but for one "
              r"spike, ([\d.]+) then ([\d.]+), which fell back to ([\d.]+) a segment later "
              r"\(`pate_g_true` seed 1\)")
  peak = max(range(len(games[spike])), key=lambda i: games[spike][i]["loss_gen"])
  assert list(m.groups()) == [
      str(len(worked)), f"{max(v for k, v in later.items() if k != spike):.1f}",
      *[f"{games[spike][i]['loss_gen']:.1f}" for i in (peak, peak + 1, peak + 2)]], m.groups()

  checked = _whole("pate_g_cgn_checked", "seed_1/results.json")
  r = checked["results"]
  m = _readme(r"\(run `pate_g_cgn_checked`, the same command and seed, code (\w+)\), that seed's "
              r"first try fails at step ([\d,]+) \(`loss_gen` ([\d.]+), the same trajectory as "
              r"before\) and the restarted student ends at \*\*([\d.]+) %\*\* instead of "
              r"([\d.]+) % \(([\d,]+) s wall for both tries, beside the test suite\) on the same "
              r"(\d+) labels, ([\d.]+) % of them correct")
  restart = r["game_restarts"][0]
  assert checked["git"].startswith(m.group(1))
  assert list(m.groups()[1:]) == [
      f"{restart['step']:,}", f"{restart['value']:.2f}", _pct(r["eval_accuracy"]),
      _pct(_seeds("pate_g_cgn")[1]["eval_accuracy"]), f"{r['wall_seconds']:,.0f}",
      str(r["num_labels"]), _pct(r["label_accuracy"])], m.groups()
  assert r["num_labels"] == _seeds("pate_g_cgn")[1]["num_answered"]


def test_the_readmes_student_comparisons_are_their_runs():
  """*Students*' bullets on active learning, distillation and VAT: runs ``active_500``,
  ``supervised_500``, ``distill_t1_100``, ``distill_t5_100``, ``plurality_100``, ``vat_100``
  and ``vat_only_100`` (their accuracies, ε, label accuracies, steps and curves); the
  differences in points are theirs."""
  active, supervised = _run("active_500"), _run("supervised_500")
  m = _readme(r"\*\*Active learning vs supervised at 500 queries: \+([\d.]+) points\*\* \(([\d.]+) "
              r"vs ([\d.]+) %\), far from the paper's 4–10, and at a much higher data-dependent ε "
              r"\(([\d.]+) vs ([\d.]+)\): .*? \(label accuracy ([\d.]+) % vs ([\d.]+) %\), so each "
              r"costs more and is more often wrong\. The active learner trains ([\d,]+) steps per "
              r"round against the supervised student's ([\d,]+)\.")
  a, s = float(_pct(active["eval_accuracy"])), float(_pct(supervised["eval_accuracy"]))
  assert list(m.groups()) == [
      f"{a - s:.1f}", f"{a:.1f}", f"{s:.1f}",
      f"{active['epsilon']['moments_data_dependent']['epsilon']:.2f}",
      f"{supervised['epsilon']['moments_data_dependent']['epsilon']:.2f}",
      _pct(active["label_accuracy"]), _pct(supervised["label_accuracy"]),
      f"{active['steps']:,}", f"{supervised['steps']:,}"], m.groups()
  assert active["num_queries"] == supervised["num_queries"] == 500

  t1, t5, plurality = (float(_pct(_run(n)["eval_accuracy"]))
                       for n in ("distill_t1_100", "distill_t5_100", "plurality_100"))
  m = _readme(r"\*\*Distillation vs plurality labels at 100 samples: \+([\d.]+) \(T = 1\) / "
              r"\+([\d.]+) \(T = 5\) points\*\* \(([\d.]+) / ([\d.]+) vs ([\d.]+) %\)")
  assert list(m.groups()) == [f"{t1 - plurality:.1f}", f"{t5 - plurality:.1f}", f"{t1:.1f}",
                              f"{t5:.1f}", f"{plurality:.1f}"], m.groups()

  vat, alone = _whole("vat_100"), _run("vat_only_100")
  history = {h["step"]: h["eval_accuracy"] for h in vat["results"]["history"]}
  m = _readme(r"\*\*VAT vs PATE-G at 100 queries: \+([\d.]+) points\*\* \(([\d.]+) vs ([\d.]+) %, "
              r"both one seed on the first 100 pool rows; PATE-G at code \w+, not committed; VAT "
              r"at (\w+), run `vat_100`\) in ([\d,]+) steps against ([\d,]+)")
  assert vat["git"].startswith(m.group(4))
  assert f"{float(m.group(2)) - float(m.group(3)):.1f}" == m.group(1)
  assert [m.group(2), m.group(5), m.group(6)] == [
      _pct(vat["results"]["eval_accuracy"]), f"{vat['results']['steps']:,}",
      f"{_seeds('pate_g_100')[0]['steps']:,}"], m.groups()
  m = _readme(r"VAT \+ entropy minimisation reaches ([\d.]+) % after (\d+) steps and ([\d.]+) % "
              r"after ([\d,]+) — above PATE-G at 75 epochs on the same rows \(([\d.]+) %.*?VAT "
              r"alone first peaks at ([\d.]+) % \((\d+) steps\), dips to ([\d.]+) % and ends at "
              r"([\d.]+) %")
  curve = [(h["step"], h["eval_accuracy"]) for h in alone["history"]]
  best = next(i for i in range(len(curve) - 1) if curve[i][1] > curve[i + 1][1])  # first peak
  assert list(m.groups()) == [
      _pct(history[int(m.group(2))]), str(min(history)), _pct(vat["results"]["eval_accuracy"]),
      f"{max(history):,}", m.group(5), _pct(curve[best][1]), str(curve[best][0]),
      _pct(min(a for _, a in curve)), _pct(alone["eval_accuracy"])], m.groups()
  assert m.group(5) == _readme(r"\*\*VAT vs PATE-G at 100 queries: \+[\d.]+ points\*\* \([\d.]+ vs "
                               r"([\d.]+) %").group(1)


def test_the_readmes_tabular_paragraph_is_its_run():
  """*Tabular PATE, UCI Adult*: run ``adult_rf``'s code and seconds, its forests, the
  non-private forest, teachers, plurality, LNMax and GNMax labels, students and ε, and the
  students' means over the stage's draws: "teachers 80.33 % mean" written 80.38 fails."""
  whole = _whole("adult_rf")
  r, config = whole["results"], whole["config"]
  m = _readme(r"re-measured on (\w+): (\d+) s, `timings.total_s`, beside a student run\): (\d+) "
              r"random forests of (\d+) trees \((\d+) rows each\); non-private forest ([\d.]+) %, "
              r"teachers ([\d.]+) % mean, plurality ([\d.]+) % on the (\d+) queries; LNMax \(γ = "
              r"([\d.]+)\) labels ([\d.]+) %, student forest ([\d.]+) % on the other ([\d,]+) test "
              r"rows at a private data-dependent ε of ([\d.]+) \(2017 moments, δ = (1e-\d); "
              r"([\d.]+) data-independent\); GNMax \(σ = (\d+)\) student ([\d.]+) % at a private "
              r"data-dependent ε of ([\d.]+) \(RDP, improved conversion\)\. Each student figure is "
              r"one forest on the first noise draw; over the stage's (\d) draws, each with its own "
              r"forest, ([\d.]+) and ([\d.]+) % \(`student_accuracy_mean`\)")
  ensemble, lnmax, gnmax = r["ensemble"], r["lnmax"], r["gnmax"]
  assert whole["git"].startswith(m.group(1))
  assert list(m.groups()[1:]) == [
      f"{r['timings']['total_s']:.0f}", str(ensemble["num_teachers"]), str(config["n_estimators"]),
      str(ensemble["examples_per_teacher"]), _pct(r["non_private"]["accuracy_eval"], 2),
      _pct(ensemble["teacher_accuracy_mean"], 2), _pct(ensemble["plurality_accuracy_pool"]),
      str(r["num_pool"]), f"{lnmax['gamma']:g}", _pct(lnmax["label_accuracy"]),
      _pct(lnmax["student_accuracy"], 2), f"{r['num_eval']:,}",
      f"{lnmax['epsilon_data_dependent']:.2f}", f"{lnmax['delta']:.0e}".replace("e-0", "e-"),
      f"{lnmax['epsilon_data_independent']:.2f}", f"{gnmax['sigma']:.0f}",
      _pct(gnmax["student_accuracy"], 2), f"{gnmax['epsilon_data_dependent']:.2f}",
      str(lnmax["student_repeats"]), _pct(lnmax["student_accuracy_mean"], 2),
      _pct(gnmax["student_accuracy_mean"], 2)], m.groups()
  assert lnmax["num_queries"] == gnmax["num_queries"] == r["num_pool"]
  assert gnmax["student_repeats"] == lnmax["student_repeats"]


def test_the_readmes_adult_bullets_are_their_runs():
  """*Why our Adult student is 1.2 points below the paper's*: the heading's gap to the paper's
  83.0 %, the coding's cost and the re-split's (random-pool means of ``adult_uci_rf``,
  ``adult_uci_rf_coarse`` and ``adult_rf``), the unlucky pool (how many pools it beats, the
  pools' mean, the true-label student), and the Confident-GNMax row (``adult_uci_rf_cgn``:
  seconds, answered, label accuracy, students, non-private forest, evaluation rows, the
  expected and drawn ε)."""
  uci, coarse, offline = _run("adult_uci_rf"), _run("adult_uci_rf_coarse"), _run("adult_rf")
  pools = {k: r["reference_students"]["random_pools"] for k, r in
           (("uci", uci), ("coarse", coarse), ("offline", offline))}
  m = _readme(r"\*\*Why our Adult student is ([\d.]+) points below the paper's, and the paper's "
              r"row reproduced\.\*\* Papernot et al\. 2018 \(Table 1\) give the appendix's Adult "
              r"row as ([\d.]+) % at ε ([\d.]+) \(LNMax, (\d+) queries")
  assert m.group(1) == f"{float(m.group(2)) - 100 * offline['lnmax']['student_accuracy']:.1f}"
  assert (m.group(3), int(m.group(4))) == ("2.66", offline["lnmax"]["num_queries"])
  # Neither of 2018's Adult numbers is in the papers' text ("neither number is in our text
  # copy"): the 2017 appendix's sentence lost its figures.
  appendix = " ".join(_paper("pate-2017-arxiv-with-appendix-c.txt").split())
  assert "our student model achieves an accuracy for an differential privacy bound" in appendix
  assert not re.search(r"\b83\.0\b|\b2\.66\b", appendix)

  m = _readme(r"\*\*The coding costs about ([\d.]+) points\*\* of a student on 500 true labels "
              r"\(random-pool means ([\d.]+) → ([\d.]+) %\) and raises the private ε \(([\d.]+) → "
              r"([\d.]+)\)")
  assert list(m.groups()) == [
      f"{100 * (pools['uci']['mean'] - pools['coarse']['mean']):.2f}",
      _pct(pools["uci"]["mean"], 2), _pct(pools["coarse"]["mean"], 2),
      f"{uci['lnmax']['epsilon_data_dependent']:.2f}",
      f"{coarse['lnmax']['epsilon_data_dependent']:.2f}"], m.groups()
  m = _readme(r"and only (\d+) of (\d+) random pools do worse \(([\d.]+) ± ([\d.]+) % on average "
              r"against ([\d.]+) % for the first 500\);.*? The re-split itself moves the pool mean "
              r"by ([\d.]+) points\.")
  assert list(m.groups()) == [
      str(pools["offline"]["below_first_pool"]), str(pools["offline"]["num_pools"]),
      _pct(pools["offline"]["mean"], 2), _pct(pools["offline"]["standard_error"], 2),
      _pct(offline["reference_students"]["true_labels"], 2),
      f"{100 * (pools['coarse']['mean'] - pools['offline']['mean']):.2f}"], m.groups()

  whole = _whole("adult_uci_rf_cgn")
  r = whole["results"]
  cgn = r["confident_gnmax"]
  m = _readme(r"`configs/adult_uci_rf\.py:cgn`: T (\d+), σ₁ (\d+), σ₂ (\d+), ([\d,]+) queries "
              r"asked, .*?; run `adult_uci_rf_cgn`, (\d+) s by `timings.total_s` beside a teachers "
              r"run, \d+ s on the idle CPU before\): (\d+) of the first ([\d,]+) test rows "
              r"answered, ([\d.]+) % of them correctly; the student forests on those rows "
              r"reach \*\*([\d.]+) "
              r"%\*\* \((\d) seeds: ([\d.]+), ([\d.]+), ([\d.]+); non-private ([\d.]+) % on the "
              r"same ([\d,]+) rows\) against the paper's ([\d.]+) %.*?The paper's (\d+) answered "
              r"and ε ([\d.]+) are expectations over the threshold noise with the classic "
              r"conversion; ours that way are ([\d.]+) and ([\d.]+), and this draw's "
              r"data-dependent ε is ([\d.]+) \(improved conversion; all three private\), its "
              r"data-independent bound ([\d.]+)")
  private = cgn["private"]
  g = list(m.groups())
  assert g[:15] + g[18:] == [
      f"{cgn['threshold']:.0f}", f"{cgn['sigma_threshold']:.0f}", f"{cgn['sigma']:.0f}",
      f"{cgn['num_queries']:,}", f"{r['timings']['total_s']:.0f}", str(cgn["num_answered"]),
      f"{cgn['num_queries']:,}", _pct(cgn["label_accuracy"], 2),
      _pct(cgn["student_accuracy_mean"], 2), str(cgn["student_repeats"]),
      *[_pct(a, 2) for a in cgn["student_accuracies"]], _pct(cgn["non_private_accuracy_eval"], 2),
      f"{cgn['num_eval']:,}", f"{private['expected_answered']:.1f}",
      f"{private['expected_epsilon_data_dependent_classic']:.2f}",
      f"{private['epsilon_data_dependent']:.2f}", f"{cgn['epsilon_data_independent']:.2f}"], g
  # The paper's figures (2018, not in ../shared/papers) are those the partitions bullet and
  # the heading's paragraph compare with.
  later = _readme(r"against the paper's ([\d.]+) % at ([\d.]+): [\d.]+ points short")
  early = _readme(r"their Confident-GNMax row is ([\d.]+) % at ([\d.]+)\)")
  assert [g[15], g[17]] == list(later.groups()) == list(early.groups()), g[15:18]


def test_the_readmes_attack_prose_is_its_runs():
  """*Histogram-leakage attack*: the SVHN gap (the text's stopping rule on the
  high-consensus histograms, the code's rule, the paper's averages), the `adult` row (run
  ``attack_adult``), and the speed paragraph's committed run ``attack_bench`` inside the
  ranges it is one of, against the paper's 2.5 hours."""
  budget = _run("attack_budget")
  svhn = budget["datasets"]["svhn"]
  unanimous = next(h for h in budget["histograms"]
                   if h["dataset"] == "svhn" and max(h["votes"]) == sum(h["votes"]))
  votes = sum(unanimous["votes"])
  m = _readme(r"which halts near-unanimous SVHN histograms at ≈ (\d+) top-class votes \(error "
              r"([\d.]+)\); the code uses threshold 0 and stops when an estimate turns negative, "
              r"which gives ([\d.]+) — while for MNIST's few hundred queries the text's early stop "
              r"is what gives ([\d.]+)\.")
  # The error is Σ|H - Ĥ| / 2N: a unanimous histogram's estimate keeps N (1 - error) on top.
  assert list(m.groups()[:3]) == [
      f"{votes * (1 - unanimous['error_mean']['confident/paper']):.0f}",
      f"{svhn['mean_error_by_group']['confident/paper']['high']:.3f}",
      f"{svhn['mean_error']['confident/paper_tol0']:.3f}"], m.groups()
  paper = " ".join(_paper("pate-histogram-leakage-attack.txt").split())
  averages = re.search(r"averaging ([\d.]+) on the MNIST setup and ([\d.]+) on the SVHN setup",
                       paper)
  assert m.group(4) == averages.group(1) and averages.group(2) == "0.05"
  assert _table_row("`budget`, SVHN")[2] == averages.group(2)

  adult = _whole("attack_adult")
  r, config = adult["results"], adult["config"]
  draws = r["balanced_precision_over_draws"]
  cells = _table_row("`adult` (`:cpu`)")
  assert cells[0] == (f"`adult` (`:cpu`) consensus < {100 * config['consensus_threshold']:.0f} "
                      "% ⇒ \"PhD\""), cells[0]
  assert cells[1] == (
      f"precision {r['balanced']['precision']:.3f} ({draws['mean']:.3f}, SD {draws['std']:.3f} "
      f"over {draws['num_draws']} redraws of the balanced set); end to end (σ "
      f"{config['sigma']:.0f}, budget {config['budget']:g}) all "
      f"{r['end_to_end']['num_individuals']} reconstructed members classified as from the true "
      "histograms"), cells[1]
  assert r["end_to_end"]["agreement_with_true_consensus_class"] == 1.0

  bench = _run("attack_bench")
  single, sweep = bench["single"], bench["sweep"]
  m = _readme(r"3 runs at load ([\d.]+)–([\d.]+), each the median of its repeats; median over the "
              r"runs, range in brackets\): one histogram end to end \(10⁴ Monte Carlo queries \+ "
              r"the paper's reconstruction\) \*\*([\d.]+) s\*\* \(([\d.]+)–([\d.]+)\) after a "
              r"([\d.]+) s compile \(([\d.]+)–([\d.]+)\); the 30 × 4σ sweep \*\*([\d.]+) s\*\* "
              r"\(([\d.]+)–([\d.]+)\) with the paper's estimator, ([\d.]+) s \(([\d.]+)–([\d.]+)\) "
              r"with the MLE \(goals 1 s and 60 s; the paper reports ≈ ([\d.]+) h per histogram\)")
  g = [float(x) for x in m.groups()]
  committed = [round(bench["load_average_before"][0], 1),
               round(single["median_wall_seconds"], 3), round(single["first_call_seconds"], 1),
               round(sweep["paper"]["median_wall_seconds"], 2),
               round(sweep["mle"]["median_wall_seconds"], 1)]
  for value, (low, high) in zip(committed, ((g[0], g[1]), (g[3], g[4]), (g[6], g[7]),
                                            (g[9], g[10]), (g[12], g[13]))):
    assert low <= value <= high, (value, low, high)
  assert single["num_queries"] == 10_000 and sweep["paper"]["num_attacks"] == 120
  hours = re.search(r"about ([\d.]+) hours to complete for a single histogram", paper)
  assert hours and float(hours.group(1)) == g[14]
  m = _readme(r"Of the 3 runs one is committed \(run `attack_bench`: ([\d.]+) s after a ([\d.]+) s "
              r"compile, sweep ([\d.]+) s with the paper's estimator and ([\d.]+) s with the MLE\)")
  assert list(m.groups()) == [
      f"{single['median_wall_seconds']:.3f}", f"{single['first_call_seconds']:.1f}",
      f"{sweep['paper']['median_wall_seconds']:.2f}",
      f"{sweep['mle']['median_wall_seconds']:.1f}"], m.groups()


def test_the_readmes_maximum_likelihood_bullets_are_their_runs():
  """*Beyond the paper*'s bullets: run ``attack_dirichlet``'s headline errors, its curve's
  last point (the MLE and the bound for α = 1, the paper's estimator per α), the share of
  histograms near the boundary, the queries for error 0.05 against the MNIST budget's and
  the affordable shares; ``attack_budget``'s SVHN ratio and ``attack_defense``'s cached-answer
  error: "0.0080 vs 0.0082" written 0.0085 fails."""
  d = _whole("attack_dirichlet")
  r = d["results"]
  s, sweep = r["summary"], r["query_sweep"]
  code = _readme(r"5 seeds, code (\w+); the histograms, means and bounds").group(1)
  assert all(_git(name).startswith(code) for name in ("attack_dirichlet", "attack_fixed",
                                                       "attack_budget", "attack_defense"))
  m = _readme(r"The MLE meets its target, a mean error ≤ ([\d.]+) on fresh histograms at 10⁴ "
              r"queries, σ (\d+) \(([\d.]+) against ([\d.]+) for the paper's estimator\)\. Error "
              r"vs queries \(([\d,]+) → ([\d,]+),")
  assert list(m.groups()[1:]) == [
      f"{r['sigma']:.0f}", f"{s['mle']['mean_error']:.4f}", f"{s['paper']['mean_error']:.3f}",
      f"{sweep['num_queries'][0]:,}", f"{sweep['num_queries'][-1]:,}"], m.groups()
  assert s["mle"]["mean_error"] <= float(m.group(1)) and r["num_queries"] == 10_000
  m = _readme(r"sits on the bound for α = 1 \(([\d.]+) vs ([\d.]+) at 3·10⁴\); the paper's "
              r"estimator stalls near ([\d.]+) / ([\d.]+) / ([\d.]+)\.")
  groups = ("dirichlet0.05", "dirichlet0.3", "dirichlet1")
  assert sweep["num_queries"][-1] == 30_000
  assert list(m.groups()) == [
      f"{sweep['error_mean_by_group']['mle']['dirichlet1'][-1]:.4f}",
      f"{sweep['cramer_rao_error_by_group']['dirichlet1'][-1]:.4f}",
      *[f"{sweep['error_mean_by_group']['paper'][g][-1]:.2f}" for g in groups]], m.groups()
  m = _readme(r"Near the boundary \((\d+) % of the Dirichlet histograms, all of Table 1\)")
  assert m.group(1) == _pct(s["cramer_rao"]["near_boundary_fraction"], 0)
  budget = _run("attack_budget")["datasets"]
  assert _run("attack_fixed")["cramer_rao"]["near_boundary_fraction"] == 1.0
  assert all(budget[k]["cramer_rao"][v]["near_boundary_fraction"] == 1.0
             for k in ("mnist", "svhn") for v in ("confident", "gnmax_all"))

  svhn = budget["svhn"]["mean_error"]
  m = _readme(r"On SVHN it wins by (\d+)×\. Queries for error 0\.05 from the bound \(median, zero "
              r"classes known\): ([\d,]+) / ([\d,]+) / ([\d,]+) for α = 0\.05 / 0\.3 / 1, against "
              r"what the MNIST budget allows \(([\d,]+) / ([\d,]+) / ([\d,]+)\): (\d+) % of "
              r"histograms are affordable at 0\.05, (\d+) % at 0\.10")
  needed = s["cramer_rao"]["median_queries_for_error_known_zeros_0.05_by_group"]
  allowed = s["budget"]["median_queries_allowed_by_group"]
  affordable = s["budget"]["fraction_affordable_queries_for_error_known_zeros"]
  assert list(m.groups()) == [
      f"{svhn['confident/paper'] / svhn['confident/mle']:.0f}",
      *[_half_up(needed[g]) for g in groups], *[_half_up(allowed[g]) for g in groups],
      _pct(affordable["0.05"], 0), _pct(affordable["0.1"], 0)], m.groups()
  assert s["budget"]["params"]["budget"] == _config("attack_budget.py").datasets["mnist"].budget

  defense = _run("attack_defense")["summary"]
  m = _readme(r"the MLE puts all votes on the cached answer \(([\d.]+) error when that answer is "
              r"the true top class")
  assert m.group(1) == f"{defense['top_class_only/mle']['mean_error']:.3f}"


def test_the_readmes_kd_gan_prose_is_its_runs():
  """*KD-GAN of Gao et al., audited*: run ``kd_gan_cpu``'s seeds, wall, code, teacher and
  its training images, the published ε of 20 epochs of 10,000 inputs, the discriminator's
  loss and accuracy in the joint runs, Table 2's cell (steps, ε both ways, accuracy) and the
  steps ε 8 needs (run ``published_accounting``); the paper's 20 runs, its teacher's 99.40 %
  and its 1.93 / 98.52 %: "its accuracy 51.3 / 50.3 / 50.0 %" written 51.8 fails."""
  whole = _whole("kd_gan_cpu")
  r, config = whole["results"], whole["config"]
  paper = " ".join(_paper("gao-private-kd-gan.txt").split())
  m = _readme(r"CPU, seed (\d+) and (\d) vmapped seeds \((\d+)–(\d+); the paper ran (\d+) with a "
              r"([\d.]+) % LeNet teacher; .*?\), (\d+) s wall beside another job "
              r"\(`configs/kd_gan\.py:cpu`, code (\w+)\): MLP teacher \(512-512\) ([\d.]+) % "
              r"trained on all ([\d,]+) private images")
  g = m.groups()
  assert list(g[:4]) == [str(whole["seed"]), str(len(r["seeds"])), str(min(r["seeds"])),
                         str(max(r["seeds"]))], g
  assert f"average accuracy over {g[4]} runs" in paper
  assert f"the teacher model has a {g[5]}% test accuracy" in paper
  assert g[6] == f"{r['wall_seconds']:.0f}" and whole["git"].startswith(g[7]), g
  assert g[8] == _pct(r["teacher_accuracy"], 2), g
  assert g[9] == "60,000" and r["public"] == "train" and "has 60000 grayscale images" in paper

  cells = {(c["n"], c["lam"]): c for c in r["table1"]}
  big = cells[10_000, 0.5]
  m = _readme(r"which gives its ([\d.]+) at (\d+) epochs of ([\d,]+) inputs")
  assert float(m.group(1)) == round(big["epsilon_published"], 2)
  assert int(m.group(3).replace(",", "")) * int(m.group(2)) == big["steps"] * r["batch_size"]
  assert f"{m.group(2)} training epochs" in paper and config["epochs"] == int(m.group(2))

  m = _readme(r"in the joint runs its loss averages ([\d.]+) / ([\d.]+) / ([\d.]+) \(n = 100 / "
              r"1,000 / 10,000; chance 2 ln 2 = ([\d.]+)\) and its accuracy ([\d.]+) / ([\d.]+) / "
              r"([\d.]+) %")
  joint = [cells[n, 0.5] for n in (100, 1_000, 10_000)]
  assert list(m.groups()) == [*[f"{c['disc']:.3f}" for c in joint], f"{2 * np.log(2):.3f}",
                              *[_pct(c["disc_accuracy"]) for c in joint]], m.groups()

  table2 = r["table2"][0]
  accounting = {s["epsilon"]: s["steps"]
                for s in _run("published_accounting")["gao_dp_sgd"]["steps_for_epsilon"]}
  m = _readme(r"Table 2 \(N = ([\d,]+)\): ([\d.]+) ± ([\d.]+) % at published ε ([\d.]+) \(([\d,]+) "
              r"steps, the paper's (\d+) epochs; ([\d.]+) under the improved conversion\), against "
              r"the paper's ([\d.]+) %; the ε = (\d+) row needs ([\d,]+) steps under the paper's "
              r"accounting")
  acc = np.array(big["accuracy"])
  assert list(m.groups()) == [
      f"{big['n']:,}", _pct(acc.mean(), 2), _pct(acc.std(ddof=1) / np.sqrt(len(acc)), 2),
      f"{table2['epsilon_published']:.2f}", f"{table2['steps']:,}", m.group(6),
      f"{table2['epsilon_improved']:.2f}", _pct(table2["paper_accuracy"], 2),
      f"{r['table2'][1]['paper_epsilon']:.0f}", f"{accounting[8.0]:,}"], m.groups()
  assert table2["accuracy_mean"] == big["accuracy_mean"]
  assert f"Proposed {table2['paper_epsilon']} {m.group(8)}%" in paper


def test_the_readmes_eq5_audit_is_its_runs():
  """*What the published mechanism protects*: the Eq. 5 audits written to ``results.json``
  (``kd_gan_cpu``: rounds, seeds, public inputs; each sound run's) leave the students
  bit-identical."""
  whole = _whole("kd_gan_cpu")
  audit = whole["results"]["audit"]
  m = _readme(r"\*\*bit-identical students \(max \|Δθ\| = ([\d.]+)\)\*\* over (\d+) rounds × (\d+) "
              r"seeds \(([\d,]+) public inputs\) and (\d+) × (\d+) in each sound run")
  sound = [_run(name)["audit"] for name in ("kd_gan_sound", "kd_gan_sound_n1000")]
  assert float(m.group(1)) == audit["max_abs_param_difference"] == 0.0
  assert [audit["rounds"], audit["runs"], whole["config"]["curve"]["num_public"]] == [
      int(m.group(i).replace(",", "")) for i in (2, 3, 4)], m.groups()
  assert audit["noise_multiplier"] == whole["config"]["noise_multiplier"] > 0
  for a in sound:
    assert [a["rounds"], a["runs"]] == [int(m.group(5)), int(m.group(6))], a
    assert a["max_abs_param_difference"] == 0.0


def test_the_readmes_diagnosis_bullets_are_their_runs():
  """*Why PATE-G learned slowly*'s bullets: the 300-epoch plateau of the unshifted students
  (``pate_g_100_long``; 359 Confident-GNMax labels, ``pate_g_cgn_plain``), and the shifted
  students' final accuracies, run by run (the paper's setting, the MLP teachers' other
  shifted runs whose game held, the CNN teachers', the checked rerun), and the pool's size."""
  long = [s["eval_accuracy"] for s in _seeds("pate_g_100_long")]
  plain = _run("pate_g_cgn_plain")
  m = _readme(r"move the 300-epoch plateau of ([\d.]+)–([\d.]+) %: .*?; (\d+) labels, ([\d.]+) % "
              r"correct, end at ([\d.]+) % against ([\d.]+) ± ([\d.]+) % with 100\.")
  assert list(m.groups()) == [
      _pct(min(long + [plain["eval_accuracy"]])), _pct(max(long + [plain["eval_accuracy"]])),
      str(plain["num_answered"]), _pct(plain["label_accuracy"]),
      _pct(plain["eval_accuracy"], 2), *_mean_se(long)], m.groups()

  cgn = _seeds("pate_g_cgn")
  held = [cgn[0], cgn[2], _run("pate_mnist_cpu_secret")["student"],
          _run("pate_mnist_cpu")["student"]]
  m = _readme(r"ends past 98 % in most runs \(([\d., ]+) % in the paper's setting; ([\d., ]+) % in "
              r"the other shifted runs on the MLP teachers' labels whose game did not fail, "
              r"([\d., ]+) % on the CNN teachers' and ([\d.]+) % in its secret-noise run; but the "
              r"restarted student of `pate_g_cgn_checked`, whose first game failed, ended at "
              r"([\d.]+) %\)\. Our reading, not tested further: the pool is small \(([\d,]+) "
              r"images;")
  assert [m.group(i).split(", ") for i in (1, 2, 3)] == [
      [_pct(s["eval_accuracy"]) for s in _seeds("pate_g_100_shift")],
      [_pct(s["eval_accuracy"]) for s in held],
      [_pct(s["eval_accuracy"]) for s in _seeds("pate_g_cgn_cnn")]], m.groups()
  checked = _run("pate_g_cgn_checked", "seed_1/results.json")
  assert list(m.groups()[3:]) == [
      _pct(_run("pate_g_cgn_cnn_secret")["eval_accuracy"]), _pct(checked["eval_accuracy"]),
      f"{checked['pool_size']:,}"], m.groups()


def test_the_readmes_h200_step_time_is_the_main_jobs():
  """*Students side by side*: one PATE-G step on one H200 is run ``pate_mnist_gpu``'s
  student training seconds over its steps: "0.8 ms" written 0.9 fails."""
  whole = _whole("pate_mnist_gpu")
  student, steps = whole["results"]["student"], whole["config"]["student"]["num_steps"]
  assert whole["device"]["device_kind"] == "NVIDIA H200"
  m = _readme(r"one PATE-G step is small \(([\d.]+) ms on one H200: run `pate_mnist_gpu`'s "
              r"([\d,]+) steps in ([\d.]+) s\)")
  assert list(m.groups()) == [f"{1e3 * student['train_seconds'] / steps:.1f}", f"{steps:,}",
                              _s(student["train_seconds"])], m.groups()


def test_the_readmes_attack_figures_beside_the_mle_table_are_its_runs():
  """*Beyond the paper*: the `budget` rows' queries for error 0.05 (run ``attack_budget``'s
  ``queries_for_error``, confident sampler, medians with the zero-vote classes known and
  plain, against ``queries_allowed``), the cached answer's share of true top classes (run
  ``attack_defense``) and the gradient checks (run ``attack_bench``): "(7/15 affordable)"
  written 8/15 fails."""
  budget = _run("attack_budget")
  cells = {}
  for dataset in ("mnist", "svhn"):
    rows = [h for h in budget["histograms"] if h["dataset"] == dataset]
    known = [h["queries_for_error"]["confident"]["0.05_known_zeros"] for h in rows]
    allowed = [h["queries_allowed"] for h in rows]
    cells[dataset] = {
        "known": _half_up(np.median(known)),
        "plain": _half_up(np.median([h["queries_for_error"]["confident"]["0.05"] for h in rows])),
        "allowed": f"{min(allowed):,}–{max(allowed):,}",
        "affordable": f"{sum(k <= a for k, a in zip(known, allowed))}/{len(rows)}"}
  mnist, svhn = cells["mnist"], cells["svhn"]
  assert (f"queries for 0.05: median {mnist['known']} ({mnist['plain']} with the plain bound) vs "
          f"{mnist['allowed']} allowed") in README, mnist
  assert (f"queries for 0.05: median {svhn['known']} vs {svhn['allowed']} allowed "
          f"({svhn['affordable']} affordable)") in README, svhn

  defense = _run("attack_defense")["summary"]
  m = _readme(r"when that answer is the true top class, (\d+) % of the time; run "
              r"`attack_defense`\)")
  assert m.group(1) == _pct(defense["consistent_answer_is_true_top_fraction"], 0), m.groups()

  gradients = {g["sigma"]: g for g in _run("attack_bench")["gradients"]}
  m = _readme(r"matches central differences of the accurate quadrature to (\S+) absolute \((\S+) "
              r"relative at σ (\d+)\); the Fisher information to (\S+) relative, enough for Newton "
              r"steps \(σ (\d+)–(\d+): the `gradients` of the committed run `attack_bench`\)")
  sigma = float(m.group(3))

  def rounded(written: str, x: float) -> float:  # x to the digits the README writes ("3.4e-6")
    mantissa = written.split("e")[0]
    return float(f"{x:.{len(mantissa.partition('.')[2])}e}")

  committed = [max(g["max_abs_jacobian_error"] for g in gradients.values()),
               gradients[sigma]["max_relative_jacobian_error"],
               max(g["fisher_relative_error_max"] for g in gradients.values())]
  written = [m.group(1), m.group(2), m.group(4)]
  assert [float(w) for w in written] == [rounded(w, x) for w, x in zip(written, committed)], (
      written, committed)
  assert [float(m.group(5)), float(m.group(6))] == [min(gradients), max(gradients)], m.groups()


# ------------------------------------------------------------------ *Students*' rows of one run,
# the diagnosis table, the attack's tables, the sound variant's data, the cited commits


def _one(values, digits: int = 1, sep: str = " / ") -> str:
  """Percentages as a *Students* cell lists them ("79.6 / 89.6 / 92.0")."""
  return sep.join(_pct(v, digits) for v in values)


def _epochs(r: dict) -> str:
  """A run's *Students* epochs cell: "33 (3,000)"."""
  return f"{r['epochs']:.0f} ({r['steps']:,})"


def test_the_readmes_student_table_rows_of_one_run_are_their_runs():
  """The *Students* rows the seed-by-seed check leaves: the supervised, active, plurality,
  distillation and VAT rows (queries, epochs, accuracy, ε, training and wall seconds), the
  Confident-GNMax rows' answered counts, label accuracies and released ε, the single runs
  on true labels and the CNN teachers' 1,000-query row; the preamble's codes are the runs'
  and the 3-seed rows' intermediate figures their histories': "79.6 / 89.6 / 92.0 %" with
  the 500-query student's 89.6 written 89.8 fails."""
  supervised = [_run(f"supervised_{q}") for q in (100, 500, 1000)]
  cells = _table_row("supervised, noisy labels only")
  assert {_epochs(r) for r in supervised} == {cells[2]}, cells
  assert [cells[1], cells[3]] == [" / ".join(f"{r['num_queries']:,}" for r in supervised),
                                  _one(r["eval_accuracy"] for r in supervised) + " %"], cells
  assert cells[4] == " / ".join(
      f"{r['epsilon']['moments_data_dependent']['epsilon']:.2f}" for r in supervised)
  assert cells[5].startswith(
      " / ".join(f"{r['train_seconds']:.0f}" for r in supervised) + "; wall "
      + " / ".join(f"{r['wall_seconds']:.0f}" for r in supervised) + " ("), cells[5]

  active = _run("active_500")
  cells = _table_row("active learning, 5 rounds × 100")
  assert cells[1:6] == [
      str(active["num_queries"]), f"{_epochs(active)} per round",
      f"{_pct(active['eval_accuracy'])} %",
      f"{active['epsilon']['moments_data_dependent']['epsilon']:.2f} (ledger)",
      f"{active['train_seconds']:.0f} (the last round); wall {active['wall_seconds']:.0f} (6–8)"
  ], cells

  plurality = _run("plurality_100")
  cells = _table_row("plurality labels, no noise")
  assert cells[1:4] == [str(plurality["num_queries"]), _epochs(plurality),
                        f"{_pct(plurality['eval_accuracy'])} % (private: un-noised labels)"]
  assert cells[5].startswith(f"{plurality['train_seconds']:.0f}; wall "
                             f"{plurality['wall_seconds']:.0f} ("), cells[5]
  distill = [_run(f"distill_t{t}_100") for t in (1, 5)]
  cells = _table_row("distillation T = 1 / T = 5")
  assert {_epochs(r) for r in distill} == {cells[2]}, cells
  assert cells[3] == _one(r["eval_accuracy"] for r in distill) + (
      " % (private: un-noised probabilities)"), cells
  assert cells[5].startswith(" / ".join(f"{r['train_seconds']:.0f}" for r in distill) + "; wall "
                             + " / ".join(f"{r['wall_seconds']:.0f}" for r in distill)), cells
  for start, name in (("VAT + entropy minimisation", "vat_100"), ("VAT alone", "vat_only_100")):
    r = _run(name)
    cells = _table_row(start)
    assert cells[1:6] == [
        str(r["num_queries"]), _epochs(r), f"{_pct(r['eval_accuracy'])} %",
        f"{r['epsilon']['moments_data_dependent']['epsilon']:.2f}",
        f"{_half_up(r['train_seconds'])} (8–15)"], (name, cells)

  for start, name in (("PATE-G on Confident-GNMax labels, real images", "pate_g_cgn"),
                      ("the same on the Confident-GNMax labels of the CPU's", "pate_g_cgn_cnn")):
    seeds = _seeds(name)
    cells = _table_row(start)
    assert cells[1] == (f"{seeds[0]['num_queries']} asked; "
                        + ", ".join(str(s["num_answered"]) for s in seeds) + " answered ("
                        + _one((s["label_accuracy"] for s in seeds), sep=", ")
                        + " % correct)"), (name, cells[1])
    assert cells[4].startswith("released " + ", ".join(
        f"{s['epsilon_release']['epsilon_released']:.2f}" for s in seeds)), (name, cells[4])
  plain = _run("pate_g_cgn_plain")
  assert _table_row("the same, the authors' PATE-G")[1:6] == [
      f"{plain['num_queries']} / {plain['num_answered']}", _epochs(plain),
      f"{_pct(plain['eval_accuracy'], 2)} %",
      f"{plain['epsilon_release']['epsilon_released']:.2f} released",
      f"{plain['train_seconds']:.0f} (1–2)"]
  for start, name in (("the same student on the pool's own labels of the first", "pate_g_cgn_true"),
                      ("the same on the first 100 class-balanced rows", "pate_g_cgn_true100")):
    r = _run(name)
    cells = _table_row(start)
    assert r["labels"] == "true"
    assert [cells[1], cells[2], cells[3].strip("*"), cells[5].split(" (")[0]] == [
        str(r["num_queries"]), _epochs(r), f"{_pct(r['eval_accuracy'], 2)} %",
        _half_up(r["train_seconds"])], (name, cells)

  cnn = _whole("pate_g_1000_cnn")
  r = cnn["results"]
  peak = max(r["history"], key=lambda h: h["eval_accuracy"])
  cells = _table_row("the same at 300 epochs on the CPU's CNN teachers' votes")
  assert cnn["git"].startswith(re.search(r"code (\w+); run `pate_g_1000_cnn`", cells[0]).group(1))
  assert [cells[1], cells[2], cells[4], cells[5].split(" (")[0]] == [
      f"{r['num_queries']:,} ({_pct(r['label_accuracy'])} % correct)", _epochs(r),
      f"{r['private']['epsilon']['moments_data_dependent']['epsilon']:.2f}",
      _half_up(r["train_seconds"])], cells
  assert cells[3].endswith(f"peak of the mean {_pct(peak['eval_accuracy'])} % at step "
                           f"{peak['step']:,})"), cells[3]

  def at(name, step):
    return [next(h["eval_accuracy"] for h in s["history"] if h["step"] == step)
            for s in _seeds(name)]

  assert "4,000 steps: {} ± {} %".format(*_mean_se(at("pate_g_true", 4_000))) in (
      _table_row("PATE-G on the pool's own labels (`--config.labels=true`")[3])
  m = _readme(r"The PATE-G rows are 3 seeds each .*?, code (\w+) \(the true-label row (\w+);.*? "
              r"The other rows are one run each, seed 0, on the first pool rows "
              r"\(`--config\.aggregate\.query_selection=first`\), code (\w+) \(after the student "
              r"key fix, \w+; the two VAT rows ran on earlier code, (\w+) and (\w+), as their "
              r"files record\)")
  codes = {
      1: ["pate_g_100/seed_0", "pate_g_100/seed_1", "pate_g_100/seed_2", "pate_g_1000/seed_0",
          "pate_g_100_long/seed_0"],
      2: ["pate_g_true/seed_0", "pate_g_true/seed_2"],
      3: ["supervised_100", "supervised_500", "supervised_1000", "active_500", "plurality_100",
          "distill_t1_100", "distill_t5_100"],
      4: ["vat_100"], 5: ["vat_only_100"]}
  for group, names in codes.items():
    for name in names:
      assert _git(name).startswith(m.group(group)), (name, m.group(group))


def test_the_readmes_diagnosis_table_is_its_runs():
  """*Why PATE-G learned slowly*'s table: each row's held-out accuracies at the steps its
  first cell names (mean ± standard error over its run's seeds, or the one run's), from
  ``pate_g_100`` and ``pate_g_100_long``, ``pate_g_true``, ``pate_g_cgn_plain``,
  ``pate_g_cgn`` seed 0, ``pate_g_100_shift`` and ``pate_mnist_cpu_secret_student``:
  "84.0 ± 1.2" read at step 2,700 instead of 3,150 fails."""
  rows = [[c.strip() for c in line.strip().strip("|").split("|")]
          for line in README.splitlines() if line.startswith("  | ours,")]
  assert len(rows) == 6, rows
  cgn_steps = [900, 2_700, 7_200, 27_000]
  expected = [
      (["pate_g_100"] * 3 + ["pate_g_100_long"], [900, 3_150, 6_750, 27_000], 1),
      (["pate_g_true"] * 3, [800, 2_800, 6_800], 1),
      (["pate_g_cgn_plain"] * 4, cgn_steps, 2),
      (["pate_g_cgn/seed_0"] * 4, cgn_steps, 2),
      (["pate_g_100_shift"] * 4, cgn_steps, 1),
      (["pate_mnist_cpu_secret_student", None, None, "pate_mnist_cpu_secret_student"],
       [900, None, None, 27_000], 2)]
  for cells, (names, steps, last_digits) in zip(rows, expected):
    named = re.search(r"steps? ([\d,]+(?: / [\d,]+)*)", cells[0])
    if named:  # the row's own steps ("the same labels" row: the row above's)
      named = [int(s.replace(",", "")) for s in named.group(1).split(" / ")]
      assert named == [s for s in steps if s is not None][:len(named)], (cells[0], steps)
    got = []
    for i, (name, step) in enumerate(zip(names, steps)):
      if name is None:
        got.append("")
        continue
      runs = (_seeds(name) if (REPO / "results" / "runs" / name / "seed_0").is_dir()
              else [_run(name)])
      acc = [next(h["eval_accuracy"] for h in r["history"] if h["step"] == step) for r in runs]
      digits = last_digits if i == 3 else 1
      got.append(" ± ".join(_mean_se(acc)) if len(acc) > 1 else _pct(acc[0], digits))
    assert cells[1:] == got + [""] * (4 - len(got)), (cells[0], cells[1:], got)
  plain = _run("pate_g_cgn_plain")
  assert re.search(r"ours, (\d+) Confident-GNMax labels, ([\d.]+) % correct",
                   rows[2][0]).groups() == (str(plain["num_answered"]),
                                            _pct(plain["label_accuracy"]))
  assert _run("pate_g_cgn", "seed_0/results.json")["num_answered"] == plain["num_answered"]


def test_the_readmes_count_of_unshifted_300_epoch_students_is_the_runs():
  """*Against the paper*: the early-failing game was seen only with the shifts, "in none of
  the 9 unshifted 300-epoch students of RESULTS.md, 2 of them on the H200; in 1 of the
  shifted ones": the committed 300-epoch PATE-G students without ``translate`` (each seed
  of a side-by-side run counted), those on an H200, and the committed games failing the
  check's step-3,600 bound."""
  unshifted, shifted = [], set()
  for path in sorted((REPO / "results" / "runs").glob("**/results.json")):
    whole = json.loads(path.read_text())
    r, config = whole.get("results") or {}, whole.get("config") or {}
    if r.get("student") != "pate_g" or r.get("steps") != 27_000:
      continue
    where = str(path.parent.relative_to(REPO / "results" / "runs"))
    if config.get("student", {}).get("kwargs", {}).get("translate"):
      shifted.add(where)
    else:
      unshifted += [(whole.get("device") or {}).get("device_kind")] * r.get("num_seeds", 1)
  at_check = {k: next(e["loss_gen"] for e in h if e["step"] >= 3_600)
              for k, h in _games().items()}
  failed = [k for k, v in at_check.items() if v > 20]
  m = _readme(r"We saw this only with the shifts \(in none of the (\d+) unshifted 300-epoch "
              r"students of `RESULTS.md`, (\d+) of them on the H200; in (\d+) of the shifted "
              r"ones\)")
  assert list(m.groups()) == [str(len(unshifted)), str(unshifted.count("NVIDIA H200")),
                              str(len(failed))], (m.groups(), unshifted, failed)
  assert all(k.rsplit("/", 1)[0] in shifted for k in failed), (failed, shifted)


def test_the_readmes_maximum_likelihood_table_is_its_runs():
  """*Beyond the paper*'s table: the paper's estimator, the MLE and the Cramér–Rao bound
  (plain, and with the zero-vote classes known) of runs ``attack_dirichlet`` (per α and
  overall), ``attack_fixed`` (per σ), ``attack_budget`` (confident / all-GNMax, per
  dataset) and ``attack_defense`` (fresh / consistent answers): "0.052 / 0.027 / 0.023 /
  0.024" with σ 60's 0.027 written 0.029 fails."""
  f3 = lambda xs: " / ".join(f"{x:.3f}" for x in xs)
  d = _run("attack_dirichlet")["summary"]
  alphas = ("dirichlet0.05", "dirichlet0.3", "dirichlet1")
  cr = d["cramer_rao"]
  assert _table_row("fresh Dirichlet(α·1) histograms")[1:] == [
      f"{f3(d['paper']['mean_error_by_group'][a] for a in alphas)} "
      f"({d['paper']['mean_error']:.3f})",
      f"{f3(d['mle']['mean_error_by_group'][a] for a in alphas)} "
      f"(**{d['mle']['mean_error']:.4f}**)",
      f"{f3(cr['mean_error_by_group'][a] for a in alphas)}, overall {cr['mean_error']:.3f} "
      f"({f3(cr['mean_error_known_zeros_by_group'][a] for a in alphas)}, overall "
      f"{cr['mean_error_known_zeros']:.3f})"]
  fixed = _run("attack_fixed")
  assert fixed["sigmas"] == [40.0, 60.0, 80.0, 100.0]
  assert _table_row("`fixed`, Table 1, σ 40 / 60 / 80 / 100")[1:] == [
      f3(fixed["summary"]["paper"]["mean_error_by_sigma"]),
      f3(fixed["summary"]["mle"]["mean_error_by_sigma"]),
      f"{f3(fixed['cramer_rao']['mean_error_by_sigma'])} "
      f"({fixed['cramer_rao']['mean_error_known_zeros']:.3f} over all σ)"]
  budget = _run("attack_budget")["datasets"]
  for start, name in (("`budget` MNIST, confident / all-GNMax", "mnist"),
                      ("`budget` SVHN, confident / all-GNMax", "svhn")):
    errors, bound = budget[name]["mean_error"], budget[name]["cramer_rao"]
    samplers = ("confident", "gnmax_all")
    cells = _table_row(start)
    assert cells[1:3] == [f3(errors[f"{s}/paper"] for s in samplers),
                          f3(errors[f"{s}/mle"] for s in samplers)], (name, cells)
    assert cells[3].startswith(
        f"{f3(bound[s]['mean_error'] for s in samplers)} "
        f"({f3(bound[s]['mean_error_known_zeros'] for s in samplers)}); "), (name, cells[3])
  defense = _run("attack_defense")["summary"]
  cells = _table_row("`defense`, fresh / consistent answers")
  assert cells[1] == f3(defense[f"{k}/paper"]["mean_error"] for k in ("fresh_noise", "consistent"))
  assert cells[2].startswith(
      f3(defense[f"{k}/mle"]["mean_error"] for k in ("fresh_noise", "consistent")) + " ("), cells
  assert cells[3] == (f"bound {defense['cramer_rao/fresh_noise']['mean_error']:.3f} vs "
                      f"{defense['cramer_rao/consistent']['mean_error']:.1f}"), cells


def test_the_attack_headers_repetitions_and_quadrature_are_the_configs_and_runs():
  """*Histogram-leakage attack*'s header: the Table-1 settings' Monte Carlo repetitions and
  `edge`'s (one histogram) are their configs' and committed runs' ``num_seeds``; the
  trapezoid's distance from the accurate quadrature is run ``attack_bench``'s for its
  default node count, over the σ it names."""
  m = _readme(r"the paper's 30 Table-1 histograms, 250 teachers, (\d+) Monte Carlo repetitions, "
              r"`edge` one histogram and (\d+);")
  for name in ("attack_budget", "attack_fixed", "attack_defense"):
    assert _config(f"{name}.py").num_seeds == int(m.group(1)) == _whole(name)["config"][
        "num_seeds"], name
  edge = _whole("attack_edge")["config"]
  assert _config("attack_edge.py").num_seeds == int(m.group(2)) == edge["num_seeds"]
  assert isinstance(edge["histogram"], str)
  bench = _whole("attack_bench")
  points = _output_distribution.DEFAULT_POINTS["gaussian"]
  error = next(q["max_abs_error"] for q in bench["results"]["quadrature"]
               if q["noise"] == "gaussian" and q["num_points"] == points)
  m = _readme(r"is within ([\d.]+e-\d+) of the accurate quadrature over σ ∈ \[([\d.]+), (\d+)\]")
  assert m.group(1) == f"{error:.1e}".replace("e-0", "e-"), (m.group(1), error)
  sigmas = bench["config"]["quadrature_sigmas"]
  assert [float(m.group(2)), float(m.group(3))] == [min(sigmas), max(sigmas)], sigmas


def test_the_readmes_adult_pool_positives_are_the_offline_copys():
  """*The offline copy's first 500 test rows are an unlucky pool*: their share of incomes
  above $50K and that of the rows the students are scored on (the offline copy's test
  split, in file order, cut at run ``adult_rf``'s pool size)."""
  from conftest import require_data  # pylint: disable=g-import-not-at-top
  from pate_jax import tabular  # pylint: disable=g-import-not-at-top
  _, queries, _ = tabular.load_task(jax.random.key(0), "adult", require_data("adult/test.csv"))
  r = _run("adult_rf")
  pool = r["num_pool"]
  assert len(queries.labels) - pool == r["num_eval"]
  m = _readme(r"They are ([\d.]+) % positive against ([\d.]+) % in the rows they are scored on")
  assert list(m.groups()) == [_pct(np.mean(queries.labels[:pool])),
                              _pct(np.mean(queries.labels[pool:]))], m.groups()


def test_the_sound_variants_public_inputs_are_the_pool_not_the_training_split():
  """*Sound variant*: its runs (and the published mechanism beside it) draw the public
  inputs from the pool of ``votes.npz``, while ``kd_gan_cpu``'s Table 1 draws them from the
  training split, as the README says of each."""
  assert _whole("kd_gan_cpu")["config"]["public"] == "train"
  for name in ("kd_gan_sound", "kd_gan_sound_n1000"):
    assert _whole(name)["config"]["public"] == "pool", name
  assert _config("kd_gan_sound.py:cpu").public == "pool"
  _readme(r"public inputs drawn from that training split, as in the paper;")
  m = _readme(r"both on the same public inputs: the ([\d,]+)-row pool of `votes\.npz`, not the "
              r"training split above")
  assert int(m.group(1).replace(",", "")) == _run("pate_g_100", "seed_0/results.json")[
      "pool_size"]


def test_every_commit_the_students_to_kd_gan_sections_cite_is_in_the_history():
  """Every commit hash from *Students, MNIST* to the KD-GAN's sound variant ("code 34eff1d",
  "at 8e3ec08", "as committed in 1bfab22") names a commit of this repository."""
  import shutil  # pylint: disable=g-import-not-at-top
  import subprocess  # pylint: disable=g-import-not-at-top
  if shutil.which("git") is None or not (REPO / ".git").exists():
    pytest.skip("no git history")
  shallow = subprocess.run(["git", "rev-parse", "--is-shallow-repository"], cwd=REPO,
                           capture_output=True, text=True, check=False).stdout.strip()
  if shallow != "false":
    pytest.skip("a shallow clone")
  text = README[README.index("**Students, MNIST**"):README.index("\n## Accelerators and")]
  cited = {c for c in re.findall(r"\b([0-9a-f]{7})\b", text)
           if re.search("[a-f]", c) and re.search("[0-9]", c)}
  assert len(cited) >= 30, sorted(cited)
  for commit in sorted(cited):
    found = subprocess.run(["git", "cat-file", "-e", f"{commit}^{{commit}}"], cwd=REPO,
                           capture_output=True, check=False)
    assert found.returncode == 0, f"README cites {commit}, which is no commit here"


def test_the_earlier_teachers_note_gives_the_gap_of_their_votes():
  """The note of the runs that read ``runs/main_job/teachers`` (Figures 2 and 3, the gap
  plot) names those teachers by their mean normalised gap: Figure 3's 250-teacher point,
  that of run pate_mnist_cpu_lnmax's teachers (same votes dir), not pate_mnist_cpu's."""
  note = rp._EARLIER_N250  # pylint: disable=protected-access
  quoted = float(re.search(r"gap, ([0-9.]+), is", note).group(1))
  point = {c["num_teachers"]: c for c in _run("figure3")["figure3"]}[250]
  lnmax = _whole("pate_mnist_cpu_lnmax")
  gap = _run("pate_mnist_cpu_lnmax", "teachers/results.json")["mean_normalized_gap"]
  assert point["workdir"] == lnmax["config"]["aggregate"]["votes_dir"] == "runs/main_job/teachers"
  assert point["mean_normalized_gap"] == gap == pytest.approx(quoted, abs=5e-8)
  assert _run("pate_mnist_cpu")["private"]["teachers"]["mean_normalized_gap"] != pytest.approx(
      quoted, abs=5e-8)
