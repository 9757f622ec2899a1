"""One path from settings to every client: each KB_* setting that configures a store or the encoder
reaches the client that a Dagster run of the product's definitions gets (the resource ``stores``), and
that client is the one the command line and the sensors get from the same settings."""

from __future__ import annotations

import json

import dagster as dg
import pytest

from kb_assets.stores import Stores

pytestmark = pytest.mark.services


def test_every_store_and_encoder_setting_reaches_its_client_inside_a_dagster_run(
    tmp_path, settings, catalog, milvus_client, monkeypatch
):
    from kb_assets.definitions import make_definitions
    from kb_assets.services import ensure_milvus
    from kb_assets.settings import Settings
    from kb_assets.stores import open_milvus

    milvus_uri = settings.milvus_uri or ensure_milvus(settings.home)
    env = {
        "KB_HOME": str(tmp_path / "home"),
        "KB_POSTGRES_URL": catalog.dsn,
        "KB_MILVUS_URI": milvus_uri,
        "KB_MILVUS_ALIAS": "probe_alias",
        "KB_MILVUS_DENSE_INDEX": "ivf_sq8",
        "KB_OBJECT_STORE_URL": "s3://probe-bucket/objects",
        "KB_LAKE_URL": str(tmp_path / "lake-probe"),
        "AWS_ACCESS_KEY_ID": "probe-key",
        "AWS_SECRET_ACCESS_KEY": "probe-secret",
        "AWS_ENDPOINT_URL": "http://127.0.0.1:9",
        "AWS_REGION": "eu-probe-1",
        "KB_EMBEDDING_MODEL": "all-MiniLM-L6-v2",
        "KB_ENCODER": "torch",
        "KB_ENCODER_THREADS": "1",
        "KB_EMBEDDING_BATCH_SIZE": "7",
        "KB_CACHE_DIR": str(tmp_path / "cache-probe"),
        "KB_EMBEDDING_SLICE": "13",
        "KB_MAX_CHUNKS_PER_DOCUMENT": "17",
        "KB_PARSE_WORKERS": "1",
        "KB_PARSE_MAX_FILE_BYTES": "12345",
        "KB_PARSE_MAX_PAGES": "23",
        "KB_OCR_ENGINE": "tesseract",
        "KB_OCR_LANGUAGES": "eng",
        "KB_SUMMARIZER_URL": "http://127.0.0.1:9/v1",
        "KB_SUMMARIZER_MODEL": "probe-summarizer",
        "KB_CHUNK_CONTEXT_URL": "http://127.0.0.1:9/v1",
        "KB_CHUNK_CONTEXT_MODEL": "probe-context",
        "KB_CHUNK_CONTEXT_CONCURRENCY": "3",
    }
    for name, value in env.items():  # the process environment, as the code location reads it
        monkeypatch.setenv(name, value)
    probed = Settings.from_env()
    seen: dict = {}

    @dg.asset
    def probe(stores: dg.ResourceParam[Stores]) -> None:
        model = stores.model()
        seen.update(
            dsn=stores.catalog.dsn,
            milvus=stores.milvus is open_milvus(stores.settings.home, milvus_uri),
            alias=stores.alias,
            dense_index=stores.settings.milvus_dense_index,
            objects=stores.objects.url,
            s3=dict(stores.objects.root.storage_options),
            lake=stores.lake.url,
            model=(model.model_id, model.encoder, model.threads, model.batch_size, model.cache_dir),
            slice=stores.settings.embedding_slice,
            max_chunks=stores.settings.max_chunks_per_document,
            parse=stores.parse_options(),
            summarizer=stores.summarizer().model,
            contextualizer=(stores.contextualizer().model, stores.contextualizer().concurrency),
        )

    resources = make_definitions(probed).resources
    assert dg.materialize([probe], resources=resources).success

    assert seen["dsn"] == catalog.dsn and seen["milvus"]
    assert (seen["alias"], seen["dense_index"]) == ("probe_alias", "ivf_sq8")
    assert seen["objects"] == "s3://probe-bucket/objects" and seen["lake"] == str(tmp_path / "lake-probe")
    assert seen["s3"]["key"] == "probe-key" and seen["s3"]["secret"] == "probe-secret"
    assert seen["s3"]["endpoint_url"] == "http://127.0.0.1:9"
    assert seen["s3"]["client_kwargs"] == {"region_name": "eu-probe-1"}
    assert seen["model"] == ("all-MiniLM-L6-v2", "torch", 1, 7, tmp_path / "cache-probe")
    assert (seen["slice"], seen["max_chunks"]) == (13, 17)
    parse = seen["parse"]
    assert (parse.workers, parse.max_file_bytes, parse.max_pages, parse.ocr_engine, parse.ocr_languages) == (
        1,
        12345,
        23,
        "tesseract",
        "eng",
    )
    assert parse.scratch_dir is not None and parse.scratch_dir.is_relative_to(probed.scratch_root)
    assert seen["summarizer"] == "probe-summarizer" and seen["contextualizer"] == ("probe-context", 3)
    # the command line and the sensors get the same clients from the same settings
    outside = Stores(probed)
    assert outside.catalog is not None and outside.catalog.dsn == seen["dsn"]
    assert (outside.model().threads, outside.model().batch_size) == (1, 7)
    # what the UI shows of the resource: its configuration, secrets by variable name only
    shown = json.loads(resources["stores"].get_resource_definition().config_schema.default_value_as_json_str)
    assert shown["milvus_alias"] == "probe_alias" and shown["parse_max_pages"] == 23
    assert shown["postgres_url"] == {"env": "KB_POSTGRES_URL"}
    assert shown["aws_secret_access_key"] == {"env": "AWS_SECRET_ACCESS_KEY"}
    assert "probe-secret" not in json.dumps(shown) and catalog.dsn not in json.dumps(shown)
