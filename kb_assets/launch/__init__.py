"""The launch layer: starts the runs of the Dagster definitions for ``kb-assets ingest``, ``migrate`` and
``verify --repair`` in process (no daemon needed; ``dagster dev`` shows every run, since they share the
instance at ``DAGSTER_HOME``), a run pool for ``KB_CONCURRENT_RUNS``, and the instance itself.

It stands above ``defs/`` (what it launches) and ``pipeline/`` (the plain plans it launches), beside
``cli/`` and ``service/``; with ``defs/`` it is the only part of kb-assets that imports Dagster.

- ``instance.py``: the instance, the definitions of a configuration, runs a killed process abandoned;
- ``runs.py``: one run in process, the planned runs one after another or N at a time;
- ``ingest.py``: ``kb-assets ingest`` (register, plan, run, report);
- ``store_changes.py``: purges, ``verify --repair`` and the collection migration as runs.
"""
