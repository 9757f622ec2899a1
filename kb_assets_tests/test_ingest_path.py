"""The path from ``kb-assets ingest`` to the stores: the runs it executes come from job-only definitions
(no sensor, no schedule is built or imported) and get the ``Stores`` ingest built, so the settings reach
the stores once."""

from __future__ import annotations

import subprocess
import sys
from collections import OrderedDict

import pytest


def test_ingest_imports_no_sensor_schedule_or_code_location():
    probe = (
        "import sys, kb_assets.cli, kb_assets.launch.ingest, kb_assets.launch.runner;"
        "print(sorted(m for m in sys.modules if m in "
        "('kb_assets.definitions', 'kb_assets.defs.sensors', 'kb_assets.defs.schedules')))"
    )
    found = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert found.stdout.strip() == "[]"


def test_the_launch_path_runs_the_same_jobs_the_code_location_shows(tmp_path):
    from kb_assets.definitions import make_definitions
    from kb_assets.defs.job_definitions import job_definitions
    from kb_assets.settings import Settings

    settings = Settings.from_env({"KB_HOME": str(tmp_path)})
    jobs, location = job_definitions(settings), make_definitions(settings)
    assert not jobs.sensors and not jobs.schedules
    for name in ("ingest_documents", "purge_documents", "repair_stores", "publish_collection"):
        ours, shown = jobs.resolve_job_def(name), location.resolve_job_def(name)
        assert ours.get_job_snapshot().snapshot_id == shown.get_job_snapshot().snapshot_id, name


@pytest.mark.services
@pytest.mark.slow
def test_ingest_builds_its_stores_once_and_its_runs_get_them(settings, tmp_path, monkeypatch):
    import kb_assets.stores as stores_module
    from kb_assets.launch.ingest import ingest

    built: list[object] = []
    build = stores_module.Stores.__init__

    def counted(self, settings):
        built.append(self)
        build(self, settings)

    monkeypatch.setattr(stores_module, "_SHARED", OrderedDict())  # as in a fresh process
    monkeypatch.setattr(stores_module.Stores, "__init__", counted)
    folder = tmp_path / "notes"
    folder.mkdir()
    (folder / "once.md").write_text("# Once\n\nA note whose run gets the stores its ingest built.\n")
    report = ingest([folder], "stores-once", settings)
    assert report.failures == [] and len(report.run_ids) == 1
    assert len(built) == 1
