"""A setting is declared once, on its field (``kb_assets/settings/declare.py``): the environment reader, the
Dagster resource ``stores`` (its fields, the UI's config schema) and ``docs/configuration.md`` follow."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import pytest

from kb_assets.defs.resources import run_leaves, stores_resource_class
from kb_assets.settings import Settings
from kb_assets.settings.declare import leaves, setting
from kb_assets.settings.reference import DOCUMENT, render

ROOT = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class WithProbe(Settings):
    """The settings with two more, each declared in one place, as a contributor adds one."""

    probe_limit: int = setting(7, "KB_PROBE_LIMIT", "how far the probe goes", runs=True, minimum=1)
    probe_token: str = setting("", "KB_PROBE_TOKEN", "what the probe shows its server", secret=True, runs=True)


def test_a_setting_declared_once_is_read_carried_to_runs_shown_and_documented(tmp_path, monkeypatch):
    monkeypatch.setenv("KB_HOME", str(tmp_path))
    monkeypatch.setenv("KB_PROBE_LIMIT", "9")
    monkeypatch.setenv("KB_PROBE_TOKEN", "probe-secret")
    read = WithProbe.from_env()
    assert isinstance(read, WithProbe) and (read.probe_limit, read.probe_token) == (9, "probe-secret")
    assert WithProbe.from_env({"KB_HOME": str(tmp_path)}).probe_limit == 7  # unset: the default
    with pytest.raises(ValueError, match="KB_PROBE_LIMIT='0': expected a whole number of at least 1"):
        WithProbe.from_env({"KB_HOME": str(tmp_path), "KB_PROBE_LIMIT": "0"})

    resource = stores_resource_class(WithProbe).from_settings(read)
    schema = resource.get_resource_definition().config_schema
    shown = json.loads(schema.default_value_as_json_str)  # what the UI and the launchpad show
    assert shown["probe_limit"] == 9 and shown["probe_token"] == {"env": "KB_PROBE_TOKEN"}
    assert "probe-secret" not in json.dumps(shown) and "probe-secret" not in repr(read)
    assert schema.config_type.fields["probe_limit"].description == "KB_PROBE_LIMIT: how far the probe goes"
    carried = resource.model_copy(update={"probe_token": "probe-secret"}).as_settings()  # Dagster resolves the EnvVar
    assert isinstance(carried, WithProbe) and (carried.probe_limit, carried.probe_token) == (9, "probe-secret")

    page = render(WithProbe)
    assert "| `KB_PROBE_LIMIT` | `7` | how far the probe goes | yes |" in page
    assert "| `KB_PROBE_TOKEN` | none | what the probe shows its server *(secret)* | yes |" in page


def test_the_configuration_page_is_rendered_from_the_declarations():
    assert (ROOT / DOCUMENT).read_text() == render(), (
        "docs/configuration.md is not what the settings declare: "
        "python -m kb_assets.settings.reference > docs/configuration.md"
    )


def test_every_setting_has_a_variable_or_is_one_runs_read_and_names_are_unique():
    found = list(leaves(Settings))
    variables = [leaf.variable for leaf in found if leaf.variable]
    assert len(variables) == len(set(variables))
    assert all(leaf.runs for leaf in found if not leaf.variable)  # else nothing could set it
    names = [leaf.name for leaf in run_leaves()]
    assert len(names) == len(set(names))
    assert all(leaf.declared.description for leaf in found)


def test_the_resource_carries_every_setting_a_run_reads(tmp_path):
    """Every setting declared ``runs`` goes from the settings through the resource and back unchanged."""
    from kb_assets.defs.resources import StoresResource

    env = {
        "KB_HOME": str(tmp_path),
        "KB_POSTGRES_URL": "postgres://u:p@db.example:5433/kb",
        "KB_POSTGRES_BINARIES": "debian",
        "KB_MILVUS_URI": "http://milvus.example:19530",
        "KB_MILVUS_ALIAS": "other_alias",
        "KB_MILVUS_DENSE_INDEX": "hnsw_sq",
        "KB_OBJECT_STORE_URL": "s3://b/objects",
        "KB_LAKE_URL": "s3://b/lake",
        "AWS_ACCESS_KEY_ID": "id",
        "AWS_SECRET_ACCESS_KEY": "secret",
        "AWS_ENDPOINT_URL": "http://s3.example",
        "AWS_REGION": "r",
        "KB_EMBEDDING_MODEL": "all-MiniLM-L6-v2@128",
        "KB_EMBEDDING_BATCH_SIZE": "9",
        "KB_ENCODER": "torch",
        "KB_CACHE_DIR": str(tmp_path / "cache"),
        "KB_SCRATCH_DIR": str(tmp_path / "scratch"),
        "KB_ENCODER_THREADS": "3",
        "KB_EMBEDDING_SLICE": "11",
        "KB_MAX_CHUNKS_PER_DOCUMENT": "19",
        "KB_PARTITIONING": "buckets:8",
        "KB_PARSE_WORKERS": "97",
        "KB_PARSE_MAX_FILE_BYTES": "1",
        "KB_PARSE_MAX_PAGES": "2",
        "KB_PARSE_MAX_UNPACKED_BYTES": "3",
        "KB_OCR_ENGINE": "tesseract",
        "KB_OCR_LANGUAGES": "deu",
        "TESSDATA_PREFIX": str(tmp_path / "tess"),
        "DOCLING_ARTIFACTS_PATH": str(tmp_path / "docling"),
        "KB_SUMMARIZER_URL": "http://llm.example/v1",
        "KB_SUMMARIZER_MODEL": "s",
        "KB_SUMMARIZER_API_KEY": "k1",
        "KB_SUMMARIZER_TIMEOUT_SECONDS": "4",
        "KB_CHUNK_CONTEXT_URL": "http://llm.example/v1",
        "KB_CHUNK_CONTEXT_MODEL": "c",
        "KB_CHUNK_CONTEXT_API_KEY": "k2",
        "KB_CHUNK_CONTEXT_TIMEOUT_SECONDS": "5",
        "KB_CHUNK_CONTEXT_CONCURRENCY": "6",
    }
    configured = Settings.from_env(env)
    carried = StoresResource.from_settings(configured).as_settings()
    runs = [leaf for leaf in run_leaves() if leaf.variable]
    assert [leaf.variable for leaf in runs if leaf.of(carried) != leaf.of(configured)] == []
    default = Settings.from_env({"KB_HOME": str(tmp_path / "elsewhere")})  # every one of them set above
    assert [leaf.variable for leaf in runs if leaf.of(default) == leaf.of(configured)] == []
