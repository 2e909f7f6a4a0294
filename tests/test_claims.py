"""Claims of the README and of the reproduction catalogue against their sources: a paper's
number in the setting it is attributed to (Figure 4's row of its query count, Gao et al.'s
table cell of its dataset, n and method), the README's defaults and derived values
against the configs and the code that compute them, and the README's tables of measured
figures against the committed runs they cite. Each check fails if either side drifts."""

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
