"""The Dagster UI shows the same assets, checks, descriptions, code versions, partitions, jobs, sensors
and schedules as ``definitions_shape.json`` records (written from the definitions before the launch
layer and the asset factory were introduced). A change to what the UI shows updates the file in the
same commit, on purpose: ``python -m kb_assets_tests.definitions_shape`` prints it."""

from __future__ import annotations

import json
from pathlib import Path

from kb_assets_tests.definitions_shape import definitions_shape

RECORDED = Path(__file__).with_name("definitions_shape.json")


def test_the_ui_shows_the_recorded_assets_checks_and_jobs(tmp_path):
    from kb_assets.definitions import make_definitions
    from kb_assets.settings import Settings

    settings = Settings.from_env({"KB_HOME": str(tmp_path)})  # the defaults, whatever this process has set
    assert definitions_shape(make_definitions(settings)) == json.loads(RECORDED.read_text())


def test_the_comparison_sees_a_changed_code_version(tmp_path):
    from dataclasses import replace

    from kb_assets.definitions import make_definitions
    from kb_assets.settings import Settings

    bumped = Settings.from_env({"KB_HOME": str(tmp_path)})
    bumped = replace(bumped, versions=replace(bumped.versions, chunks="bumped"))
    shape = definitions_shape(make_definitions(bumped))
    assert shape["assets"]["chunks"]["code_version"] == "bumped"
    assert shape != json.loads(RECORDED.read_text())
