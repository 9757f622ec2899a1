"""What a script and the Dagster UI read after the sample corpus and one broken file are ingested: the exit
status (a known quarantined file is one line, not a failure, unless ``--strict``) and Dagster's own staleness
(no partition "Unsynced" after a no-op, only the edited file's after an edit, every one after a code version).

One knowledge base for the module: the tests run in order, each leaving it as the next expects."""

from __future__ import annotations

import shutil
from dataclasses import replace

import dagster as dg
import pytest
from click.testing import CliRunner

pytestmark = pytest.mark.services

KB = "operator"
ASSETS = ("source_files", "raw_files", "parsed_pages", "pageindex_trees", "chunks", "embeddings", "milvus_collection")


@pytest.fixture(scope="module")
def folder(tmp_path_factory, corpus_dir):
    target = tmp_path_factory.mktemp("operator") / "corpus"
    shutil.copytree(corpus_dir, target)
    (target / "broken.pdf").write_bytes(b"%PDF-1.4 this is not really a pdf")
    return target


def ingest(folder, *options):
    from kb_assets.cli import main

    return CliRunner().invoke(main, ["ingest", str(folder), "--kb", KB, *options])


def lines_naming(result, name: str) -> list[str]:
    return [line for line in result.stderr.splitlines() if name in line]


def test_the_first_ingest_exits_1_naming_the_broken_file(folder, settings):
    result = ingest(folder)

    assert result.exit_code == 1, result.output
    (line,) = lines_naming(result, "broken.pdf")
    assert line.startswith(f"FAILED {folder / 'broken.pdf'}: ")
    assert "ingested into operator: 8 new, 0 changed, 0 unchanged, 0 deleted, 1 failed" in result.stdout


def test_a_quarantined_file_that_has_not_changed_is_one_line_and_exit_0(folder):
    result = ingest(folder)

    assert result.exit_code == 0, result.output
    (line,) = lines_naming(result, "broken.pdf")
    assert line.startswith(f"QUARANTINED {folder / 'broken.pdf'}: ") and "--retry-failed" in line
    assert "Traceback" not in result.output


def test_strict_fails_on_a_quarantined_file(folder):
    result = ingest(folder, "--strict")

    assert result.exit_code == 1
    assert lines_naming(result, "broken.pdf")[0].startswith("QUARANTINED ")


def test_the_exit_statuses_are_in_the_help():
    from kb_assets.cli import main

    shown = CliRunner().invoke(main, ["ingest", "-h"]).output

    for line in ("0  nothing failed in this run", "1  a document failed in this run", "2  a usage error", "3  a store"):
        assert line in shown


def stale(settings, assets=ASSETS, defs=None) -> dict[tuple[str, str], tuple[str, list[str]]]:
    """Dagster's stale status (what the UI's "Unsynced" shows) of every sample partition of these assets."""
    from kb_assets.definitions import make_definitions
    from kb_assets.defs.dagster_internals import stale_status
    from kb_assets.launch.instance import dagster_instance
    from kb_assets.stores import Stores

    docs = [d for d in Stores.shared(settings).catalog.list_documents([KB]) if d.source_path != "broken.pdf"]
    keys = [(dg.AssetKey(asset), doc.partition_key) for asset in assets for doc in docs]
    found = stale_status(dagster_instance(settings), defs or make_definitions(settings), keys)
    return {(key.to_user_string(), partition): status for (key, partition), status in found.items()}


def test_after_a_no_op_ingest_dagster_reports_no_partition_of_the_sample_stale(folder, settings):
    assert ingest(folder).exit_code == 0

    statuses = stale(settings)

    assert len(statuses) == 8 * len(ASSETS)
    assert {status for status, _ in statuses.values()} == {"FRESH"}, statuses


def test_an_edited_file_is_unsynced_alone_until_its_run(folder, settings):
    """The folder sensor's scan registers the edit (and observes the file's new version): Dagster shows that
    file's ``raw_files`` partition stale, nothing else; the ingest that runs it leaves nothing stale."""
    from kb_assets.defs.sensors import plan_watched_folders
    from kb_assets.launch.instance import dagster_instance
    from kb_assets.stores import Stores

    note = folder / "architecture.md"
    note.write_text(note.read_text() + "\nOne more line about the lake.\n")
    watching = replace(settings, watch=f"{KB}={folder}")
    plan = plan_watched_folders(watching, Stores.shared(settings), dagster_instance(settings))
    (edited,) = {doc.partition_key for run in plan.runs for doc in run.documents}

    unsynced = {key: status for key, status in stale(settings).items() if status[0] != "FRESH"}

    assert unsynced == {("raw_files", edited): ("STALE", ["has a new dependency data version"])}
    assert ingest(folder).exit_code == 0
    assert {status for status, _ in stale(settings).values()} == {"FRESH"}


def test_a_newer_code_version_makes_its_step_stale_for_every_partition(settings):
    from kb_assets.definitions import make_definitions

    bumped = replace(settings, versions=replace(settings.versions, chunks="bumped"))

    statuses = stale(settings, defs=make_definitions(bumped))

    assert {key for key, (status, _) in statuses.items() if status != "FRESH"} == {
        key for key in statuses if key[0] == "chunks"
    }
    assert {tuple(causes) for key, (_, causes) in statuses.items() if key[0] == "chunks"} == {
        ("has a new code version",)
    }


def test_a_changed_file_that_fails_exits_1(folder):
    (folder / "broken.pdf").write_bytes(b"%PDF-1.4 still not a pdf, but another one")

    result = ingest(folder)

    assert result.exit_code == 1
    (line,) = lines_naming(result, "broken.pdf")
    assert line.startswith("FAILED ")
