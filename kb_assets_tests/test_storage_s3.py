"""The object store and the lake on a real S3 server (SeaweedFS ``weed mini``, signatures enforced; no mocks)."""

import hashlib
import io
import json
import uuid

import polars as pl
import pytest
from polars.testing import assert_frame_equal

from kb_assets.chunking.schema import CHUNKS_SCHEMA
from kb_assets.embedding.schema import EMBEDDINGS_SCHEMA
from kb_assets.settings import Settings
from kb_assets.stores import Stores
from kb_assets.stores.lake import Lake
from kb_assets.stores.objects import ObjectStore

pytestmark = pytest.mark.services


@pytest.fixture
def prefix(s3):
    """A fresh key prefix in the bucket, so that tests do not see each other's objects."""
    return f"s3://{s3.bucket}/{uuid.uuid4().hex[:12]}"


def keys_under(s3, url: str) -> list[str]:
    """Every key below an s3:// URL, listed by boto3 (an independent client, no fsspec caches)."""
    key_prefix = url.removeprefix(f"s3://{s3.bucket}/").rstrip("/") + "/"
    listing = s3.client().list_objects_v2(Bucket=s3.bucket, Prefix=key_prefix)
    return sorted(item["Key"].removeprefix(key_prefix) for item in listing.get("Contents", []))


def chunks_frame(document_id: str, n: int = 3) -> pl.DataFrame:
    rows = []
    for i in range(n):
        content = f"Paragraph {i} of {document_id}: pump P-{100 + i} runs at {1450 + i} rpm."
        rows.append(
            {
                "chunk_id": f"{document_id}-c{i}",
                "document_id": document_id,
                "knowledge_base_id": "kb-a",
                "document_version": "v1",
                "document_title": f"Manual {document_id}",
                "source_uri": f"file:///docs/{document_id}.pdf",
                "source_kind": "file",
                "mime": "application/pdf",
                "page_index": i,
                "page_end": i,
                "page_label": str(i + 1),
                "chunk_index": i,
                "kind": "table" if i == 2 else "paragraph",
                "section_title": "Operation",
                "content": content,
                "embedding_input": f"Manual {document_id} > Operation\n{content}",
                "embedding_input_sha": hashlib.sha256(content.encode()).hexdigest(),
                "table_header": "| pump | rpm |" if i == 2 else None,
                "image_key": None,
                "run_id": "run-1",
                "pipeline_version": "1",
            }
        )
    return pl.DataFrame(rows, schema=CHUNKS_SCHEMA)


def embeddings_frame(document_id: str, n: int = 3, dimension: int = 4) -> pl.DataFrame:
    return pl.DataFrame(
        {
            "chunk_id": [f"{document_id}-c{i}" for i in range(n)],
            "document_id": [document_id] * n,
            "embedding_input_sha": [hashlib.sha256(f"{document_id}{i}".encode()).hexdigest() for i in range(n)],
            "model": ["all-MiniLM-L6-v2"] * n,
            "dimension": [dimension] * n,
            "vector": [[0.5 * i + j / 8 for j in range(dimension)] for i in range(n)],
            "run_id": ["run-1"] * n,
            "pipeline_version": ["1"] * n,
        },
        schema=EMBEDDINGS_SCHEMA,
    )


# -- the server itself -----------------------------------------------------------------------------


def test_server_rejects_requests_signed_with_a_wrong_secret(s3):
    import boto3
    from botocore.exceptions import ClientError

    wrong = boto3.client(
        "s3",
        endpoint_url=s3.endpoint_url,
        aws_access_key_id=s3.access_key,
        aws_secret_access_key="not-the-secret",
        region_name=s3.region,
    )
    with pytest.raises(ClientError):
        wrong.list_objects_v2(Bucket=s3.bucket)


# -- object store ----------------------------------------------------------------------------------


def test_object_store_puts_gets_and_deletes_content_addressed_originals_on_s3(s3, prefix):
    store = ObjectStore(f"{prefix}/objects", s3.storage_options())
    data = b"%PDF-1.7\n" + bytes(range(256)) * 64
    sha = hashlib.sha256(data).hexdigest()
    key = ObjectStore.original_key(sha, ".PDF")

    assert not store.exists(key)
    assert store.put(key, data) == key
    assert store.exists(key)
    assert store.get(key) == data
    assert keys_under(s3, f"{prefix}/objects") == [f"originals/{sha[:2]}/{sha}.pdf"]

    store.delete(key)
    assert not store.exists(key)
    assert keys_under(s3, f"{prefix}/objects") == []
    store.delete(key)  # deleting what is gone is a no-op


def test_object_store_put_keeps_the_existing_object_under_a_content_address(s3, prefix):
    store = ObjectStore(f"{prefix}/objects", s3.storage_options())
    store.put("originals/ab/abc.txt", b"first")
    store.put("originals/ab/abc.txt", b"second")  # same key = same content: not rewritten
    assert store.get("originals/ab/abc.txt") == b"first"


def test_object_store_delete_prefix_removes_everything_below_it_and_nothing_else(s3, prefix):
    store = ObjectStore(f"{prefix}/objects", s3.storage_options())
    for key in ("pages/doc-1/0001.png", "pages/doc-1/0002.png", "figures/doc-1/f1.png", "pages/doc-2/0001.png"):
        store.put(key, key.encode())

    store.delete_prefix("pages/doc-1")

    assert not store.exists("pages/doc-1/0001.png")
    assert not store.exists("pages/doc-1/0002.png")
    assert store.get("pages/doc-2/0001.png") == b"pages/doc-2/0001.png"
    assert keys_under(s3, f"{prefix}/objects") == ["figures/doc-1/f1.png", "pages/doc-2/0001.png"]
    store.delete_prefix("pages/doc-1")  # a prefix with nothing under it is a no-op


def test_object_store_sees_objects_written_and_removed_by_another_client(s3, prefix):
    store = ObjectStore(f"{prefix}/objects", s3.storage_options())
    store.put("pages/doc-1/0001.png", b"one")
    assert store.exists("pages/doc-1/0001.png")  # primes any listing cache

    key_prefix = prefix.removeprefix(f"s3://{s3.bucket}/")
    client = s3.client()
    client.put_object(Bucket=s3.bucket, Key=f"{key_prefix}/objects/pages/doc-1/0002.png", Body=b"two")
    client.delete_object(Bucket=s3.bucket, Key=f"{key_prefix}/objects/pages/doc-1/0001.png")

    assert store.exists("pages/doc-1/0002.png")
    assert store.get("pages/doc-1/0002.png") == b"two"
    assert not store.exists("pages/doc-1/0001.png")


# -- lake ------------------------------------------------------------------------------------------


def test_lake_writes_and_reads_back_chunks_and_embeddings_with_their_schemas(s3, prefix):
    lake = Lake(f"{prefix}/lake", s3.storage_options())
    chunks, embeddings = chunks_frame("doc-1"), embeddings_frame("doc-1")

    lake.write("chunks", "doc-1", chunks)
    lake.write("embeddings", "doc-1", embeddings)

    read_chunks, read_embeddings = lake.read("chunks", "doc-1"), lake.read("embeddings", "doc-1")
    assert read_chunks.schema == CHUNKS_SCHEMA
    assert read_embeddings.schema == EMBEDDINGS_SCHEMA
    assert_frame_equal(read_chunks, chunks)
    assert_frame_equal(read_embeddings, embeddings)
    keys = keys_under(s3, f"{prefix}/lake")
    assert [key.split("/")[0] for key in keys] == ["chunks", "embeddings"] and all(k.endswith(".parquet") for k in keys)

    # the stored objects are plain Parquet that any reader understands
    key_prefix = prefix.removeprefix(f"s3://{s3.bucket}/")
    body = s3.client().get_object(Bucket=s3.bucket, Key=f"{key_prefix}/lake/{keys[0]}")["Body"].read()
    assert_frame_equal(pl.read_parquet(io.BytesIO(body)), chunks)


def test_lake_batch_writes_one_file_a_table_and_compaction_removes_dead_rows_on_s3(s3, prefix, monkeypatch):
    import kb_assets.stores.lake as lake_module

    monkeypatch.setattr(lake_module, "COMPACT_AFTER_S", 0.0)
    lake = Lake(f"{prefix}/lake", s3.storage_options())
    with lake.batch():
        for document_id in ("doc-a", "doc-b", "doc-c"):
            lake.write("chunks", document_id, chunks_frame(document_id, n=10 if document_id == "doc-a" else 3))
            lake.write("embeddings", document_id, embeddings_frame(document_id))
    assert len(keys_under(s3, f"{prefix}/lake/chunks")) == 1
    assert len(keys_under(s3, f"{prefix}/lake/embeddings")) == 1

    monkeypatch.setattr(lake_module, "MAX_FILES", 99)  # so that only dead rows make it compact
    reader = Lake(f"{prefix}/lake", s3.storage_options())  # another process: the files' footers say it all
    with lake.batch():
        lake.write("chunks", "doc-c", chunks_frame("doc-c", n=4))
    assert reader.dead_rows("chunks") == (3, 20)  # doc-c's 3 old rows: under a quarter of their file's, kept
    assert len(keys_under(s3, f"{prefix}/lake/chunks")) == 2

    with lake.batch():  # doc-a rewritten, doc-b deleted: the first file all dead, compacted on the flush
        lake.write("chunks", "doc-a", chunks_frame("doc-a", n=1))
        lake.delete("chunks", "doc-b")
    assert reader.document_ids("chunks") == ["doc-a", "doc-c"]
    assert reader.read("chunks", "doc-a")["chunk_id"].to_list() == ["doc-a-c0"]
    assert reader.dead_rows("chunks") == (0, 5)
    [key] = keys_under(s3, f"{prefix}/lake/chunks")
    key_prefix = prefix.removeprefix(f"s3://{s3.bucket}/")
    body = s3.client().get_object(Bucket=s3.bucket, Key=f"{key_prefix}/lake/chunks/{key}")["Body"].read()
    assert sorted(pl.read_parquet(io.BytesIO(body))["chunk_id"].to_list()) == [
        "doc-a-c0",
        *(f"doc-c-c{i}" for i in range(4)),
    ]
    assert_frame_equal(reader.read("chunks", "doc-c"), chunks_frame("doc-c", n=4))


def test_lake_write_replaces_a_documents_rows(s3, prefix):
    lake = Lake(f"{prefix}/lake", s3.storage_options())
    lake.write("chunks", "doc-1", chunks_frame("doc-1", n=3))
    lake.write("chunks", "doc-1", chunks_frame("doc-1", n=1))
    assert lake.read("chunks", "doc-1")["chunk_id"].to_list() == ["doc-1-c0"]


def test_lake_reads_a_missing_document_as_an_empty_frame_of_the_table_schema(s3, prefix):
    lake = Lake(f"{prefix}/lake", s3.storage_options())
    assert not lake.exists("chunks", "nope")
    empty = lake.read("chunks", "nope")
    assert empty.height == 0 and empty.schema == CHUNKS_SCHEMA
    assert lake.document_ids("chunks") == []


def test_lake_lists_document_ids_and_forgets_a_deleted_document(s3, prefix):
    lake = Lake(f"{prefix}/lake", s3.storage_options())
    for document_id in ("doc-b", "doc-a", "doc-c"):
        lake.write("chunks", document_id, chunks_frame(document_id))
    lake.write("embeddings", "doc-a", embeddings_frame("doc-a"))
    assert lake.document_ids("chunks") == ["doc-a", "doc-b", "doc-c"]
    assert lake.document_ids("embeddings") == ["doc-a"]

    lake.delete("chunks", "doc-b")

    assert not lake.exists("chunks", "doc-b")
    assert lake.document_ids("chunks") == ["doc-a", "doc-c"]
    assert lake.read("chunks", "doc-b").height == 0
    lake.delete("chunks", "doc-b")  # deleting what is gone is a no-op

    lake.delete("embeddings", "doc-a")
    assert lake.document_ids("embeddings") == []


def test_lake_sees_documents_written_and_deleted_by_another_process(s3, prefix):
    """Another writer (a second Dagster run) must not be hidden by this process's listing cache."""
    lake = Lake(f"{prefix}/lake", s3.storage_options())
    lake.write("chunks", "doc-1", chunks_frame("doc-1"))
    assert lake.document_ids("chunks") == ["doc-1"]  # primes any listing cache

    other = Lake(f"{prefix}/lake", s3.storage_options())
    other.write("chunks", "doc-2", chunks_frame("doc-2"))
    other.delete("chunks", "doc-1")

    assert lake.document_ids("chunks") == ["doc-2"]
    assert lake.exists("chunks", "doc-2")
    assert_frame_equal(lake.read("chunks", "doc-2"), chunks_frame("doc-2"))
    assert not lake.exists("chunks", "doc-1")
    assert lake.read("chunks", "doc-1").height == 0


def test_lake_rejects_a_frame_with_the_wrong_schema_and_writes_nothing(s3, prefix):
    lake = Lake(f"{prefix}/lake", s3.storage_options())
    wrong_type = chunks_frame("doc-1").with_columns(pl.col("page_index").cast(pl.Int64))
    missing_column = chunks_frame("doc-1").drop("run_id")
    extra_column = embeddings_frame("doc-1").with_columns(pl.lit("x").alias("extra"))
    reordered = chunks_frame("doc-1").select(list(reversed(CHUNKS_SCHEMA.names())))

    for table, frame in (
        ("chunks", wrong_type),
        ("chunks", missing_column),
        ("embeddings", extra_column),
        ("chunks", reordered),
        ("embeddings", chunks_frame("doc-1")),
    ):
        with pytest.raises(ValueError, match=f"lake table {table}"):
            lake.write(table, "doc-1", frame)

    assert not lake.exists("chunks", "doc-1")
    assert not lake.exists("embeddings", "doc-1")
    assert lake.document_ids("chunks") == [] and lake.document_ids("embeddings") == []
    assert keys_under(s3, f"{prefix}/lake") == []


# -- configuration ---------------------------------------------------------------------------------


def test_settings_from_s3_urls_and_aws_env_give_a_working_object_store_and_lake(s3, prefix, tmp_path):
    settings = Settings.from_env(
        {
            "KB_HOME": str(tmp_path / "kb"),
            "KB_OBJECT_STORE_URL": f"{prefix}/objects",
            "KB_LAKE_URL": f"{prefix}/lake",
            **s3.env(),
        }
    )
    assert settings.object_store_url == f"{prefix}/objects"
    assert settings.lake_url == f"{prefix}/lake"
    assert settings.storage_options() == s3.storage_options()

    store = ObjectStore(settings.object_store_url, settings.storage_options())
    lake = Lake(settings.lake_url, settings.storage_options())
    store.put("originals/00/00abc.txt", b"hello")
    lake.write("chunks", "doc-1", chunks_frame("doc-1"))

    assert store.get("originals/00/00abc.txt") == b"hello"
    assert_frame_equal(lake.read("chunks", "doc-1"), chunks_frame("doc-1"))
    assert keys_under(s3, f"{prefix}/objects") == ["originals/00/00abc.txt"]
    [key] = keys_under(s3, f"{prefix}/lake")
    assert key.startswith("chunks/") and key.endswith(".parquet")
    assert not (tmp_path / "kb").exists()  # nothing went to the local default folders


def test_object_store_and_lake_fail_on_s3_with_wrong_credentials(s3, prefix):
    options = {**s3.storage_options(), "secret": "not-the-secret"}
    with pytest.raises((PermissionError, OSError)):
        ObjectStore(f"{prefix}/objects", options).put("originals/00/x.txt", b"x")
    with pytest.raises((PermissionError, OSError)):
        Lake(f"{prefix}/lake", options).write("chunks", "doc-1", chunks_frame("doc-1"))


def test_dagster_resources_reach_s3_with_explicit_credentials_shown_only_by_name(s3, prefix, tmp_path, monkeypatch):
    """The ``stores`` resource passes key, secret, endpoint and region to the stores themselves (botocore
    reading AWS_* on its own is not what makes this work: the variables are gone when the stores are
    used), and what the Dagster UI shows of it names the credentials, never their values."""
    import dagster as dg

    from kb_assets.defs.resources import build_resources

    for name, value in {
        **s3.env(),
        "KB_HOME": str(tmp_path / "kb"),
        "KB_OBJECT_STORE_URL": f"{prefix}/objects",
        "KB_LAKE_URL": f"{prefix}/lake",
    }.items():
        monkeypatch.setenv(name, value)
    resources = build_resources(Settings.from_env())
    shown = json.loads(resources["stores"].get_resource_definition().config_schema.default_value_as_json_str)
    assert s3.secret_key not in json.dumps(shown) and s3.access_key not in json.dumps(shown)
    assert shown["aws_secret_access_key"] == {"env": "AWS_SECRET_ACCESS_KEY"}
    assert shown["aws_access_key_id"] == {"env": "AWS_ACCESS_KEY_ID"}
    assert shown["object_store_url"] == f"{prefix}/objects"

    @dg.asset
    def roundtrip(stores: dg.ResourceParam[Stores]) -> None:
        for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_ENDPOINT_URL", "AWS_REGION"):
            monkeypatch.delenv(name)  # the settings were read before: the stores carry them from now on
        stores.objects.put("originals/00/00abc.txt", b"hello")
        stores.lake.write("chunks", "doc-r", chunks_frame("doc-r"))

    result = dg.materialize([roundtrip], resources=resources)
    assert result.success
    assert keys_under(s3, f"{prefix}/objects") == ["originals/00/00abc.txt"]
    [key] = keys_under(s3, f"{prefix}/lake")
    assert key.startswith("chunks/") and key.endswith(".parquet")
    assert not (tmp_path / "kb").exists()
