"""What a new user does first, on real parts: the project installed as a wheel (no editable install)
ingests a file against the embedded services it starts itself; every DOC argument takes what ingest
took; ``dagster definitions validate`` and ``dagster dev`` at the repository root need no environment
and show the runs that ingest made; Postgres URLs work in every form a console hands out."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import sysconfig
import tempfile
import time
import venv
from pathlib import Path

import httpx
import pytest

from kb_assets.services.milvus_engine import ENGINE_DIR
from kb_assets_tests.databases import database_on

pytestmark = pytest.mark.services

REPO = Path(__file__).resolve().parents[1]
DAGSTER = Path(sys.executable).parent / "dagster"
# what a new shell has: none of the project's variables
CLEAN_ENV = {k: v for k, v in os.environ.items() if not k.startswith(("KB_", "DAGSTER_", "PYTHONPATH"))}


def _run(cmd, cwd: Path, timeout: float = 600, env: dict | None = None) -> subprocess.CompletedProcess:
    result = subprocess.run(
        [str(c) for c in cmd], cwd=cwd, env=env or CLEAN_ENV, capture_output=True, text=True, timeout=timeout
    )
    assert result.returncode == 0, f"{cmd}: exit {result.returncode}\n{result.stdout[-2000:]}\n{result.stderr[-3000:]}"
    return result


@pytest.fixture(scope="module")
def wheel_python(tmp_path_factory) -> Path:
    """A fresh virtualenv holding the project's wheel. Its dependencies come from the project's
    environment through a .pth file (the same pinned packages; reinstalling torch and docling would
    only cost minutes), and so does the embedded Milvus engine (a link where ``milvus_engine install``
    unpacks it: ``make install`` runs that); that environment's editable install of kb_assets is not
    visible there."""
    root = tmp_path_factory.mktemp("wheel")
    _run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w", root / "dist", REPO],
        cwd=root,
        env=os.environ.copy(),
    )
    wheel = next((root / "dist").glob("kb_assets-*.whl"))
    venv.create(root / "venv", with_pip=False)
    python = root / "venv" / "bin" / "python"
    purelib = Path(
        _run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], cwd=root).stdout.strip()
    )
    (purelib / "project_dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    (root / "venv" / ENGINE_DIR.name).symlink_to(ENGINE_DIR)
    _run(
        [sys.executable, "-m", "pip", "--python", python, "install", "-q", "--no-deps", "--no-index", wheel],
        cwd=root,
        env=os.environ.copy(),
    )
    return python


@pytest.fixture(scope="module")
def fresh_root(wheel_python):
    """A repository root as a fresh clone has it (dagster.yaml, workspace.yaml), with a docs folder;
    its embedded services are stopped at the end."""
    root = Path(tempfile.mkdtemp(prefix="kb-test-fresh-root-"))  # outside pytest's 0700 basetemp (see conftest)
    root.chmod(0o755)
    for name in ("dagster.yaml", "workspace.yaml"):
        shutil.copy(REPO / name, root / name)
    (root / "docs").mkdir()
    (root / "docs" / "note.md").write_text("# Warm tier\n\nRestored copies stay in the warm tier for seven days.\n")
    yield root
    subprocess.run(
        [wheel_python.parent / "kb-assets", "services", "down"],
        cwd=root,
        env=CLEAN_ENV,
        capture_output=True,
        timeout=120,
    )
    shutil.rmtree(root, ignore_errors=True)


@pytest.mark.slow
def test_a_wheel_install_ingests_with_the_schema_it_carries(wheel_python, fresh_root):
    where = _run(
        [
            wheel_python,
            "-c",
            "import kb_assets, kb_assets.stores.catalog as c; "
            "print(kb_assets.__file__); print(c.SCHEMA_FILE.is_file())",
        ],
        cwd=fresh_root,
    )
    module, schema_found = where.stdout.split()
    assert Path(module).is_relative_to(wheel_python.parents[1]) and schema_found == "True"

    report = json.loads(
        _run([wheel_python.parent / "kb-assets", "ingest", "docs", "--kb", "fresh", "--json"], cwd=fresh_root).stdout
    )
    assert report["documents"]["new"] == 1 and report["failures"] == []
    assert (fresh_root / ".kb" / "dagster").is_dir()

    # every DOC argument takes what ingest took: a relative path, an absolute path, the source path, the id
    chunks = json.loads(
        _run([wheel_python.parent / "kb-assets", "chunks", "docs/note.md", "--json"], cwd=fresh_root).stdout
    )
    assert "seven days" in chunks["chunks"][0]["content"]
    for doc in (str(fresh_root / "docs" / "note.md"), "note.md", chunks["documentId"]):
        pages = json.loads(_run([wheel_python.parent / "kb-assets", "pages", doc, "--json"], cwd=fresh_root).stdout)
        assert pages["documentId"] == chunks["documentId"]


@pytest.mark.slow
def test_dagster_at_the_root_needs_no_environment_and_shows_the_ingest_runs(wheel_python, fresh_root):
    if not (fresh_root / ".kb" / "dagster").exists():
        _run([wheel_python.parent / "kb-assets", "ingest", "docs", "--kb", "fresh"], cwd=fresh_root)
    validated = _run([DAGSTER, "definitions", "validate", "-w", "workspace.yaml"], cwd=fresh_root)
    assert "All code locations passed validation" in validated.stdout + validated.stderr

    port = _free_port()
    server = subprocess.Popen(
        [str(DAGSTER), "dev", "-w", "workspace.yaml", "-p", str(port)],
        cwd=fresh_root,
        env=CLEAN_ENV,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        runs = _graphql_runs(port, server)
    finally:
        os.killpg(server.pid, signal.SIGINT)
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)
            server.wait()
    assert any(r["jobName"] == "ingest_documents" and r["status"] == "SUCCESS" for r in runs), runs


def _graphql_runs(port: int, server: subprocess.Popen) -> list[dict]:
    query = {"query": "{ runsOrError { ... on Runs { results { runId status jobName } } } }"}
    deadline = time.monotonic() + 240
    while True:
        assert server.poll() is None, "dagster dev exited"
        try:
            answer = httpx.post(f"http://127.0.0.1:{port}/graphql", json=query, timeout=10).json()
            return answer["data"]["runsOrError"]["results"]
        except (httpx.HTTPError, KeyError, TypeError, ValueError):
            assert time.monotonic() < deadline, "dagster dev did not answer GraphQL"
            time.sleep(1)


def _free_port() -> int:
    from kb_assets.services.local import free_port

    return free_port()


def test_every_form_of_postgres_url_reaches_the_same_server(catalog):
    from kb_assets.lib.urls import libpq_url, sqlalchemy_postgres_url
    from kb_assets.settings import Settings
    from kb_assets.stores.catalog import Catalog

    tail = catalog.dsn.partition("://")[2]
    for scheme in ("postgresql", "postgres", "postgresql+psycopg2", "postgresql+psycopg"):
        url = f"{scheme}://{tail}"
        assert libpq_url(url) == f"postgresql://{tail}"
        assert sqlalchemy_postgres_url(url) == f"postgresql+psycopg2://{tail}"
        assert Settings.from_env({"KB_POSTGRES_URL": url}).postgres_url == f"postgresql://{tail}"
        assert isinstance(Catalog(url).list_documents(), list)
    with pytest.raises(ValueError, match=r"not a Postgres URL .*mysql://kb:\*\*\*@db/x"):
        libpq_url("mysql://kb:secret@db/x")


def test_production_instance_config_accepts_plain_postgres_urls(catalog, tmp_path):
    """deploy/single-host/dagster.yaml with the URL a managed Postgres console gives: the instance
    stores runs and partitions in that real Postgres (over TCP)."""
    import dagster as dg

    database_on(catalog.dsn, "dagster_url_forms")
    server = catalog.dsn.partition("://")[2].rsplit("/", 1)[0]
    for scheme in ("postgresql", "postgres"):
        home = tmp_path / scheme
        home.mkdir()
        shutil.copy(REPO / "deploy" / "single-host" / "dagster.yaml", home / "dagster.yaml")
        os.environ["DAGSTER_POSTGRES_URL"] = f"{scheme}://{server}/dagster_url_forms"
        try:
            with dg.DagsterInstance.from_config(str(home)) as instance:
                instance.add_dynamic_partitions("url_forms", [scheme])
                assert scheme in instance.get_dynamic_partitions("url_forms")
        finally:
            del os.environ["DAGSTER_POSTGRES_URL"]


def test_the_engine_install_step_of_make_prints_no_warning():
    """``make demo`` on a fresh clone prints no warning a user must wonder about: the engine's install step, run
    as the Makefile runs it (a no-op here, where the engine is installed; the warning of ``python -m`` came
    before the module ran), writes nothing to stderr."""
    recipe = (REPO / "Makefile").read_text().split("$(ENGINE): $(BIN)/kb-assets\n", 1)[1].splitlines()[0]
    command = recipe.strip().replace("$(BIN)/python", sys.executable).split()
    result = _run(command, cwd=REPO, env=os.environ.copy())
    assert result.stderr == "" and result.stdout.strip().endswith("lib/milvus")
