"""The harness: helpers shared by the stages and the entry scripts in ``experiments/``.

Everything here runs at the boundary (host side): resolving the work directory,
recording provenance and writing ``results.json``, reading configs, ``run_main``. The
core library never imports this package; the generic file and array helpers it needs
(:func:`data_digest`, :func:`progress`, :func:`write_text`) live in :mod:`pate_jax.io`
and are re-exported here.

The package's modules: ``_results`` (provenance, ``results.json``, the work directory's
lock), ``_config`` (configs and scripts by path, their fields, ``--help``), ``_dry_run``
(the devices and plan that ``--dry_run`` prints), ``_profile`` (one call under the
profiler, summarised) and ``_main`` (``run_main``, its errors
and outputs, deterministic kernels, the accounting's device, the benchmarks' timer, the
stages' :class:`PhaseClock`).
"""

from pate_jax.experiment._config import (HELP_FLAGS, RESTART_FLAG, _default_config_spec,
                                         check_restart_flag, closest_fields,
                                         config_fields, config_items, help_text, load_config,
                                         load_script, restart_hint, unknown_overrides)
from pate_jax.experiment._dry_run import (compiled_temp_bytes, dry_run, dry_run_text,
                                          format_bytes, mesh_info, votes_plan)
from pate_jax.experiment._main import (ACCOUNTING_DEVICES, DETERMINISTIC_FLAG, FAST_COMPILE_FLAG,
                                       PRIVATE_MARK,
                                       PRIVATE_TITLE, PhaseClock, accelerator_installed,
                                       accounting_device, backend_started,
                                       compiles_for_cpu_only, deterministic_ops_enabled,
                                       fast_compile_enabled,
                                       mark_private, output_files, print_outputs,
                                       print_private, printed_private,
                                       private_as_a_whole, python_path,
                                       quiet_backend_probe, report_marked, report_private,
                                       run_and_report,
                                       run_main, set_deterministic, set_fast_compile,
                                       side_thread, timed, user_errors,
                                       warnings_marked_private, without_deterministic_flag)
from pate_jax.experiment._profile import profile_call, trace_summary
from pate_jax.experiment._results import (MEASUREMENT, NO_PRIVATE_DATA, PUBLISHABLE,
                                          PrivateFigure, device_info, draw_private_figures,
                                          figure_seconds_file, git_hash, locked_workdir,
                                          noise_disclosure, package_versions, private_figures,
                                          read_results,
                                          remove_stale, to_jsonable, write_results)
from pate_jax.io import data_digest, progress, write_text  # re-exported: the harness's too

__all__ = [
    "ACCOUNTING_DEVICES",
    "accelerator_installed",
    "accounting_device",
    "backend_started",
    "DETERMINISTIC_FLAG",
    "FAST_COMPILE_FLAG",
    "HELP_FLAGS",
    "MEASUREMENT",
    "NO_PRIVATE_DATA",
    "PUBLISHABLE",
    "RESTART_FLAG",
    "check_restart_flag",
    "closest_fields",
    "compiles_for_cpu_only",
    "compiled_temp_bytes",
    "config_fields",
    "config_items",
    "data_digest",
    "deterministic_ops_enabled",
    "device_info",
    "draw_private_figures",
    "dry_run",
    "dry_run_text",
    "fast_compile_enabled",
    "figure_seconds_file",
    "format_bytes",
    "git_hash",
    "help_text",
    "load_config",
    "load_script",
    "locked_workdir",
    "mesh_info",
    "noise_disclosure",
    "output_files",
    "package_versions",
    "PhaseClock",
    "PrivateFigure",
    "private_figures",
    "PRIVATE_MARK",
    "PRIVATE_TITLE",
    "mark_private",
    "private_as_a_whole",
    "print_outputs",
    "print_private",
    "printed_private",
    "profile_call",
    "python_path",
    "progress",
    "quiet_backend_probe",
    "read_results",
    "remove_stale",
    "report_marked",
    "report_private",
    "restart_hint",
    "run_and_report",
    "run_main",
    "set_deterministic",
    "set_fast_compile",
    "side_thread",
    "timed",
    "to_jsonable",
    "trace_summary",
    "unknown_overrides",
    "user_errors",
    "votes_plan",
    "warnings_marked_private",
    "without_deterministic_flag",
    "write_results",
    "write_text",
]
