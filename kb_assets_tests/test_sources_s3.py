"""Sources in object storage: ``ingest s3://bucket/prefix`` and ``KB_WATCH`` entries with s3:// prefixes,
on a real SeaweedFS (signatures enforced): objects listed page by page, new, changed and deleted objects
followed by the knowledge base, unchanged ones recognised by their ETag."""

from __future__ import annotations

import uuid
from dataclasses import replace

import pytest

from kb_assets.pipeline.identity import document_id_for
from kb_assets.settings import S3Settings
from kb_assets.stores.paths import list_objects

pytestmark = pytest.mark.services


@pytest.fixture
def prefix(s3) -> str:
    """A fresh key prefix (the 'folder' a team keeps its documents in)."""
    return f"docs-{uuid.uuid4().hex[:10]}"


@pytest.fixture
def s3_settings(settings, s3):
    """The session's embedded stores, reading sources with the server's credentials."""
    return replace(settings, s3=S3Settings(s3.access_key, s3.secret_key, s3.endpoint_url, s3.region))


def put(s3, key: str, text: str) -> None:
    s3.client().put_object(Bucket=s3.bucket, Key=key, Body=text.encode())


def test_objects_are_listed_page_by_page_relative_to_the_prefix(s3, prefix):
    for name in ("a.md", "b.md", "sub/c.md", "sub/d.md", "e.md"):
        put(s3, f"{prefix}/{name}", f"# {name}\n")
    put(s3, f"{prefix}/empty-folder/", "")  # a folder marker is not an object
    put(s3, f"{prefix}-sibling/x.md", "# not under the prefix\n")

    pages = list(list_objects(f"s3://{s3.bucket}/{prefix}", s3.storage_options(), page_size=2))

    assert len(pages) >= 3 and all(len(page) <= 2 for page in pages)  # 6 keys, 2 a page (marker dropped)
    listed = [item for page in pages for item in page]
    assert sorted(item.relative for item in listed) == ["a.md", "b.md", "e.md", "sub/c.md", "sub/d.md"]
    etag = s3.client().head_object(Bucket=s3.bucket, Key=f"{prefix}/sub/c.md")["ETag"].strip('"')
    assert next(i for i in listed if i.relative == "sub/c.md").etag == etag
    (single,) = [
        item for page in list_objects(f"s3://{s3.bucket}/{prefix}/sub/c.md", s3.storage_options()) for item in page
    ]
    assert single.relative == "c.md" and single.url == f"s3://{s3.bucket}/{prefix}/sub/c.md"


@pytest.mark.slow
def test_an_s3_prefix_is_ingested_and_the_knowledge_base_follows_changes_and_deletions(
    s3, prefix, s3_settings, catalog, stores
):
    from kb_assets.launch.ingest import ingest

    kb, url = "bucket-docs", f"s3://{s3.bucket}/{prefix}"
    put(s3, f"{prefix}/runbook.md", "# Runbook\n\nRestart the ingest workers with a rolling restart.\n")
    put(s3, f"{prefix}/policies/retention.md", "# Retention\n\nAudit logs are kept for 400 days.\n")
    put(s3, f"{prefix}/legacy.txt", "The legacy ftp bridge closes at the end of the quarter.\n")

    first = ingest([url], kb, s3_settings)

    assert first.as_json()["documents"] == {"new": 3, "changed": 0, "unchanged": 0, "deleted": 0, "failed": 0}
    docs = {d.source_path: d for d in catalog.list_documents([kb])}
    assert set(docs) == {"runbook.md", "policies/retention.md", "legacy.txt"}
    retention = docs["policies/retention.md"]
    assert retention.document_id == document_id_for(kb, url, "policies/retention.md")  # stable per (kb, root, key)
    assert (
        retention.source_root == url
        and retention.partition_key == f"{kb}/{prefix.rsplit('/', 1)[-1]}/policies/retention.md"
    )
    assert retention.source_uri == f"{url}/policies/retention.md" and retention.status == "published"
    assert "400 days" in " ".join(p["text"] for p in catalog.read_pages(retention.document_id))
    etags = catalog.source_etags([d.document_id for d in docs.values()])
    assert etags[retention.document_id] == (
        s3.client().head_object(Bucket=s3.bucket, Key=f"{prefix}/policies/retention.md")["ETag"].strip('"'),
        retention.version,
    )

    again = ingest([url], kb, s3_settings)  # ETags unchanged: nothing read again, no run
    assert again.as_json()["documents"]["unchanged"] == 3 and again.run_ids == []

    put(s3, f"{prefix}/policies/retention.md", "# Retention\n\nAudit logs are kept for 730 days.\n")
    s3.client().delete_object(Bucket=s3.bucket, Key=f"{prefix}/legacy.txt")
    put(s3, f"{prefix}/oncall.md", "# On call\n\nThe secondary answers pages within fifteen minutes.\n")

    third = ingest([url], kb, s3_settings)

    assert third.as_json()["documents"] == {"new": 1, "changed": 1, "unchanged": 1, "deleted": 1, "failed": 0}
    docs = {d.source_path: d for d in catalog.list_documents([kb])}
    assert docs["policies/retention.md"].document_id == retention.document_id
    assert docs["policies/retention.md"].version != retention.version
    text = " ".join(p["text"] for p in catalog.read_pages(retention.document_id))
    assert "730 days" in text and "400 days" not in text
    legacy = docs["legacy.txt"]
    assert legacy.status == "deleted" and catalog.read_pages(legacy.document_id) == []
    assert not stores.lake.exists("chunks", legacy.document_id)
    assert docs["oncall.md"].status == "published"


@pytest.mark.slow
def test_a_watched_s3_prefix_is_kept_current_by_the_sensor(s3, prefix, s3_settings, catalog):
    import dagster as dg

    from kb_assets.definitions import make_definitions
    from kb_assets.launch.instance import dagster_instance
    from kb_assets.launch.runs import QUIET_RUN_CONFIG

    kb = "watched-bucket"
    settings = replace(s3_settings, watch=f"{kb}=s3://{s3.bucket}/{prefix}")
    assert settings.watched_folders() == [(kb, f"s3://{s3.bucket}/{prefix}")]
    defs = make_definitions(settings)
    sensor, job = defs.get_sensor_def("watched_folders_sensor"), defs.resolve_job_def("ingest_documents")
    instance = dagster_instance(settings)
    put(s3, f"{prefix}/faq.md", "# FAQ\n\nThe staging database is refreshed every Sunday night.\n")

    result = sensor(dg.build_sensor_context(instance=instance, resources=defs.resources))
    (request,) = result.run_requests
    (add,) = result.dynamic_partitions_requests
    faq = document_id_for(kb, f"s3://{s3.bucket}/{prefix}", "faq.md")
    assert add.partition_keys == [f"{kb}/{prefix.rsplit('/', 1)[-1]}/faq.md"]
    instance.add_dynamic_partitions("documents", add.partition_keys)
    assert job.execute_in_process(instance=instance, tags=request.tags, run_config=QUIET_RUN_CONFIG).success
    assert catalog.get_document(faq).status == "published"

    unchanged = sensor(dg.build_sensor_context(instance=instance, resources=defs.resources))
    assert isinstance(unchanged, dg.SkipReason) and "nothing changed" in unchanged.skip_message

    s3.client().delete_object(Bucket=s3.bucket, Key=f"{prefix}/faq.md")
    (purge,) = sensor(
        dg.build_sensor_context(instance=instance, resources=defs.resources)
    ).run_requests  # the purge is a run
    assert purge.job_name == "purge_documents"
    assert (
        defs.resolve_job_def("purge_documents")
        .execute_in_process(instance=instance, run_config=purge.run_config, tags=purge.tags)
        .success
    )
    assert catalog.get_document(faq).status == "deleted"
