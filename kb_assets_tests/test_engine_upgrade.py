"""A KB_HOME of before the engine upgrades once, with nothing re-embedded: its Milvus Lite 3.2.2 server still
runs on ``milvus/`` (as kb-assets started it) with the published collection; the first command of the new
code stops that server, moves its folder aside untouched, starts the embedded engine and rebuilds the
published collection from the lake (the lake keeps every vector); search answers from chunks again, verify
is consistent, and the next command rebuilds nothing."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from kb_assets_tests.corpora import EXAMPLE_CORPUS, RETRIEVAL_CORPUS
from kb_assets_tests.databases import database_on
from kb_assets_tests.milvus_servers import lite3_server

pytestmark = [pytest.mark.services, pytest.mark.slow]
REPO = Path(__file__).resolve().parents[1]
FILES = ("architecture.md", "backups.md")
KB = "upgraded"


def kb_assets(*args: str, env: dict) -> subprocess.CompletedProcess:
    result = subprocess.run(
        [sys.executable, "-m", "kb_assets.cli", *args], env=env, capture_output=True, text=True, timeout=900
    )
    assert result.returncode == 0, f"kb-assets {args[0]}: exit {result.returncode}\n{result.stderr[-4000:]}"
    return result


def embeddings(home: Path) -> dict[str, str]:
    """chunk id -> the run that encoded its vector, from the lake's embeddings files."""
    import polars as pl

    frame = pl.concat([pl.read_parquet(f) for f in sorted((home / "lake").rglob("embeddings/*.parquet"))])
    return dict(zip(frame["chunk_id"].to_list(), frame["run_id"].to_list(), strict=True))


def test_a_milvus_lite_3_home_upgrades_once_with_nothing_re_embedded(catalog, tmp_path):
    from kb_assets.services import stop_milvus
    from kb_assets.services.milvus import LEGACY_DIR

    home = tmp_path / "home"
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "architecture.md").write_bytes((EXAMPLE_CORPUS / "architecture.md").read_bytes())
    (docs / "backups.md").write_text(RETRIEVAL_CORPUS["alpha"]["backups.md"])
    env = {k: v for k, v in os.environ.items() if not k.startswith(("KB_", "DAGSTER_"))}
    env.update(
        PYTHONPATH=str(REPO),
        KB_HOME=str(home),
        DAGSTER_HOME=str(home / "dagster"),
        DAGSTER_DISABLE_TELEMETRY="1",
        KB_POSTGRES_URL=database_on(catalog.dsn, f"upgrade_{uuid.uuid4().hex[:8]}", fresh=True),
    )
    (home / "dagster").mkdir(parents=True)
    try:
        with lite3_server(home / "milvus") as old:  # the old embedded server, as the old code ran it
            port = int(old.uri.rsplit(":", 1)[1])
            (home / "milvus.json").write_text(json.dumps({"pid": old.pid, "port": port}) + "\n")
            before = json.loads(
                kb_assets("ingest", str(docs), "--kb", KB, "--json", env={**env, "KB_MILVUS_URI": old.uri}).stdout
            )
            assert before["documents"]["new"] == len(FILES) and before["failures"] == []
            encoded = embeddings(home)

            upgraded = kb_assets("search", "How long are backups kept?", "--kb", KB, "--json", env=env)
            assert old.poll() is not None  # the old server was stopped, not left serving beside the engine
        answer = json.loads(upgraded.stdout)
        assert answer["results"] and answer["results"][0]["retrievalSource"] != "fallback_pages", answer["warnings"]
        assert "35 days" in answer["results"][0]["content"]
        assert (
            "rebuilt kb_chunks" in upgraded.stderr
            and "left out (run kb-assets verify --repair): none" in upgraded.stderr
        )
        assert (home / LEGACY_DIR / "collections").is_dir()  # kept, untouched
        assert (home / "milvus" / "milvus.db").exists()

        verify = json.loads(kb_assets("verify", "--json", env=env).stdout)
        assert verify["consistent"] is True, verify["problems"]
        assert verify["collection"] == before["published"]["collection"] and verify["entities"] > 0
        assert embeddings(home) == encoded  # nothing re-embedded: every vector of the lake as it was
        again = kb_assets("collections", "--json", env=env)
        assert "rebuilt" not in again.stderr  # once
        shown = json.loads(again.stdout)
        assert shown["published"] == before["published"]["collection"]
    finally:
        stop_milvus(home)
