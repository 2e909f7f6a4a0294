"""Stages: each reads a config and a work directory, runs one step of an experiment through
the core library, and writes its outputs (``run(config, workdir)``, ``plan(config)`` for
``--dry_run``, ``report(results)`` for the printed headline). Scripts in ``experiments/``
call one stage each; stages never import scripts."""
