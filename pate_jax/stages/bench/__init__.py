"""The benchmarks: stages that time the library (``run(config, workdir)``, ``plan``, and
``report`` where it has one; one script each, ``experiments/bench_*.py``) and the loop
baselines they time it against.

* :mod:`teachers`: the ensemble's strategies (vmap, chunked, loop), examples/s and TFLOP/s;
* :mod:`student`: the students' training step, ms per step and FLOP/s;
* :mod:`accounting`: the accountants' kernels, the public API and the NumPy loops;
* :mod:`smooth_sensitivity`: the smooth-sensitivity release against its loop;
* :mod:`attack`: the histogram-leakage attack's Q(H), Monte Carlo and reconstruction;
* :mod:`reference_loops`: per-query scalar references of the accountants and the release
  (``math`` + SciPy), the benchmarks' baselines and the tests' oracle, never imported by
  the core.
"""
