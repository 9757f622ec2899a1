"""Document identity across folders: the source root is part of a document's identity, purges touch only
the scope that was scanned, overlapping roots are refused, a moved root is relocated (not re-ingested),
partition keys are readable, and knowledge bases made before all this migrate once with nothing
re-processed."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import dagster as dg
import pytest

from kb_assets.pipeline.identity import MAX_KEY_CHARS, OverlappingRoots, place, readable_key

pytestmark = pytest.mark.slow

NOTE = "# {title}\n\n{body}\n"


def write(folder, name, body):
    path = folder / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(NOTE.format(title=name, body=body))
    return path


def counts(report) -> dict:
    return report.as_json()["documents"]


def test_readable_keys_are_short_normalised_and_unique():
    assert readable_key("hb", "/srv/corpus", "ops/backups.md", "doc-1") == "hb/corpus/ops/backups.md"
    odd = readable_key("hb", "/srv/docs", "a b/..../c,d.md", "doc-2")
    assert "..." not in odd and " " not in odd and "," not in odd and odd.rsplit("~", 1)[1]
    long = readable_key("hb", "/srv/docs", "x" * 300 + "/end-of-name.md", "doc-3")
    assert len(long) <= MAX_KEY_CHARS and long.split("~")[0].endswith("end-of-name.md")
    assert readable_key("hb", "/srv/docs", "a.md", "doc-4", taken={"hb/docs/a.md"}) != "hb/docs/a.md"
    assert readable_key("知识", "/srv/文档", "说明.md", "doc-5") == "知识/文档/说明.md"  # any script stays readable


def test_an_s3_prefix_has_one_spelling_whatever_its_scheme_and_slashes():
    from kb_assets.pipeline.identity import canonical_root

    assert (
        canonical_root("s3a://bucket//docs/team/") == canonical_root("s3://bucket/docs/team") == "s3://bucket/docs/team"
    )


def test_a_path_is_placed_in_the_root_that_holds_it_and_a_folder_holding_roots_is_refused():
    roots = ["/srv/ov", "/srv/other"]
    assert place("/srv/ov", "kb", roots) == ("/srv/ov", "")
    assert place("/srv/ov/sub", "kb", roots) == ("/srv/ov", "sub")
    assert place("/srv/ov2", "kb", roots) == ("/srv/ov2", "")  # a sibling with a common prefix
    with pytest.raises(OverlappingRoots, match="kb-assets relocate"):
        place("/srv", "kb", roots)


def test_two_folders_with_the_same_relative_path_are_two_documents(tmp_path, settings, catalog):
    from kb_assets.launch.ingest import ingest

    kb = "identity-two"
    write(tmp_path / "ov", "a.md", "The north gate opens at six.")
    write(tmp_path / "ov2", "a.md", "The south gate opens at nine.")

    assert counts(ingest([tmp_path / "ov"], kb, settings))["new"] == 1
    assert counts(ingest([tmp_path / "ov2"], kb, settings))["new"] == 1
    again = [counts(ingest([folder], kb, settings)) for folder in (tmp_path / "ov", tmp_path / "ov2")]

    assert all(c["unchanged"] == 1 and c["changed"] == 0 and c["deleted"] == 0 for c in again)  # no flip
    docs = catalog.list_documents([kb])
    assert {(d.source_root, d.status) for d in docs} == {
        (str((tmp_path / "ov").resolve()), "published"),
        (str((tmp_path / "ov2").resolve()), "published"),
    }
    assert len({d.partition_key for d in docs}) == 2 and all(d.partition_key.startswith(f"{kb}/ov") for d in docs)


def test_a_sub_folder_is_ingested_inside_its_root_and_purges_only_under_it(tmp_path, settings, catalog):
    from kb_assets.launch.ingest import ingest

    kb, ov = "identity-sub", tmp_path / "ov"
    write(ov, "top.md", "The top note names the roof access code.")
    write(ov, "sub/one.md", "Sub note one: the cellar is flooded in March.")
    write(ov, "sub/two.md", "Sub note two: the attic fan is loud.")
    assert counts(ingest([ov], kb, settings))["new"] == 3

    assert counts(ingest([ov / "sub"], kb, settings)) == {
        "new": 0,
        "changed": 0,
        "unchanged": 2,
        "deleted": 0,
        "failed": 0,
    }
    (ov / "sub" / "two.md").unlink()
    (ov / "top.md").unlink()  # outside the scanned scope: not purged by it
    assert counts(ingest([ov / "sub"], kb, settings))["deleted"] == 1
    statuses = {d.source_path: d.status for d in catalog.list_documents([kb])}
    assert statuses == {"top.md": "published", "sub/one.md": "published", "sub/two.md": "deleted"}
    assert {d.source_root for d in catalog.list_documents([kb])} == {str(ov.resolve())}

    assert counts(ingest([ov / "sub" / "one.md"], kb, settings))["unchanged"] == 1  # a file: the same document
    assert counts(ingest([ov], kb, settings))["deleted"] == 1  # the root's own ingest purges


def test_a_folder_that_holds_a_root_of_the_knowledge_base_is_refused(tmp_path, settings, catalog):
    from kb_assets.launch.ingest import ingest

    kb, ov = "identity-outer", tmp_path / "ov"
    write(ov, "sub/one.md", "The boiler is serviced in October.")
    write(ov, "top.md", "The roof is inspected in spring.")
    assert counts(ingest([ov / "sub"], kb, settings))["new"] == 1

    with pytest.raises(OverlappingRoots) as refused:
        ingest([ov], kb, settings)
    assert str((ov / "sub").resolve()) in str(refused.value)
    assert [d.status for d in catalog.list_documents([kb])] == ["published"]  # nothing touched

    cli = subprocess.run(
        [sys.executable, "-m", "kb_assets.cli", "ingest", str(ov), "--kb", kb],
        capture_output=True,
        text=True,
        env=os.environ.copy(),
    )
    assert cli.returncode == 1 and "Traceback" not in cli.stderr and "relocate" in cli.stderr


def test_concurrent_ingests_of_a_folder_and_its_sub_folder_lose_nothing(tmp_path, settings, catalog):
    kb, ov = "identity-concurrent", tmp_path / "ov"
    for i in range(3):
        write(ov, f"top-{i}.md", f"Top note {i} about the loading dock schedule.")
        write(ov, f"sub/inner-{i}.md", f"Inner note {i} about the freezer temperature.")
    from kb_assets.launch.ingest import ingest

    assert counts(ingest([ov], kb, settings))["new"] == 6
    write(ov, "sub/inner-new.md", "A new inner note about the forklift charger.")
    command = [sys.executable, "-m", "kb_assets.cli", "ingest", "--kb", kb, "--json"]
    children = [
        subprocess.Popen(
            [*command, str(path)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=os.environ.copy()
        )
        for path in (ov, ov / "sub")
    ]
    reports = [json.loads(child.communicate(timeout=600)[0]) for child in children]

    assert all(r["documents"]["deleted"] == 0 and r["documents"]["failed"] == 0 for r in reports)
    docs = catalog.list_documents([kb])
    assert len(docs) == 7 and all(d.status == "published" for d in docs)


def test_a_moved_root_is_relocated_and_nothing_is_processed_again(tmp_path, settings, catalog):
    from kb_assets.launch.ingest import ingest

    kb, old, new = "identity-move", tmp_path / "before", tmp_path / "after"
    write(old, "a.md", "Visitors sign in at the front desk.")
    write(old, "deep/b.md", "Badges are returned on leaving.")
    ingest([old], kb, settings)
    before = {d.source_path: d for d in catalog.list_documents([kb])}
    old.rename(new)

    moved = subprocess.run(
        [sys.executable, "-m", "kb_assets.cli", "relocate", str(old), str(new), "--kb", kb, "--json"],
        capture_output=True,
        text=True,
        env=os.environ.copy(),
    )
    assert moved.returncode == 0, moved.stderr
    assert json.loads(moved.stdout)["documents"] == 2
    report = ingest([new], kb, settings)

    assert counts(report) == {"new": 0, "changed": 0, "unchanged": 2, "deleted": 0, "failed": 0}
    assert report.run_ids == []  # nothing ran again
    after = {d.source_path: d for d in catalog.list_documents([kb])}
    for path, doc in after.items():
        assert (doc.document_id, doc.partition_key, doc.version) == (
            before[path].document_id,
            before[path].partition_key,
            before[path].version,
        )
        assert doc.source_root == str(new.resolve()) and doc.source_uri == f"{new.resolve()}/{path}"


def test_a_knowledge_base_made_before_roots_and_readable_keys_migrates_once(tmp_path, settings, catalog):
    """The old layout: no source_root (derived from source_uri by the schema), no partition_key, and the
    document id as the Dagster partition key. The next ingest gives readable keys, carries the partitions'
    materializations over and re-processes nothing."""
    from kb_assets.launch.ingest import ingest
    from kb_assets.launch.instance import dagster_instance
    from kb_assets.stores.catalog import Catalog

    kb, folder = "identity-legacy", tmp_path / "legacy"
    write(folder, "a.md", "Legacy note about the parking permits.")
    write(folder, "b/c.md", "Legacy note about the bicycle shed.")
    ingest([folder], kb, settings)
    docs = catalog.list_documents([kb])
    instance = dagster_instance(settings)
    # make it look as an earlier version left it
    with catalog.connect() as conn, conn.cursor() as cur:
        cur.execute("ALTER TABLE documents ALTER COLUMN source_root DROP NOT NULL")
        cur.execute("UPDATE documents SET source_root = NULL, partition_key = NULL WHERE knowledge_base_id = %s", (kb,))
    for doc in docs:
        instance.delete_dynamic_partition("documents", doc.partition_key)
    instance.add_dynamic_partitions("documents", [doc.document_id for doc in docs])
    for doc in docs:
        instance.report_runless_asset_event(dg.AssetMaterialization("milvus_collection", partition=doc.document_id))

    Catalog(catalog.dsn).ensure_schema()  # what the next start of any command does
    report = ingest([folder], kb, settings)

    assert counts(report)["unchanged"] == 2 and report.run_ids == []
    after = {d.document_id: d for d in catalog.list_documents([kb])}
    partitions = set(instance.get_dynamic_partitions("documents"))
    done = instance.get_materialized_partitions(dg.AssetKey("milvus_collection"))
    for doc in docs:
        migrated = after[doc.document_id]
        assert migrated.source_root == str(folder.resolve()) and migrated.partition_key == doc.partition_key
        assert migrated.partition_key in partitions and doc.document_id not in partitions
        assert migrated.partition_key in done
