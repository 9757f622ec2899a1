"""The embedded vector engine: Milvus Lite 2.5.1's C++ core (the Milvus segment engine behind a gRPC
proxy, its data one SQLite file), run as a bare binary under a small supervisor.

The binary comes from PyPI's ``milvus-lite==2.5.1`` wheel, which cannot be installed beside the
pinned pymilvus (same distribution name as milvus-lite 3.x, and its Python part imports
``pkg_resources``); the binary and its bundled libraries need no Python at all. ``install`` downloads
the wheel with pip and unpacks its ``milvus_lite/lib/`` under the virtualenv (``ENGINE_DIR``):
``make install`` runs it, or ``python kb_assets/services/milvus_engine.py install`` (by its path: ``-m`` warns, since
the package ``kb_assets.services`` imports this module before ``-m`` runs it).

``supervise`` (``python .../milvus_engine.py serve --db FILE --port P``: run by its path, it imports
nothing but the standard library) is the process ``services.milvus`` starts. The binary takes no lock of
its own, so the supervisor:

- takes an exclusive, non-blocking ``lockf`` on ``.FILE.lock`` beside the data file: a second engine
  on the same data is refused;
- passes that lock file to the binary as its lifeline: the binary polls it and exits within ~1.5 s of
  the lock being free, so it never outlives its supervisor, even after a ``kill -9``;
- sets ``HOME`` to the data folder (the binary aborts without one, and writes ``$HOME/.cache``);
- forwards SIGTERM/SIGINT to the binary and exits with it.
"""

from __future__ import annotations

import argparse
import fcntl
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

ENGINE_VERSION = "2.5.1"
ENGINE_DIR = Path(sys.prefix) / f"milvus-lite-{ENGINE_VERSION}"  # lib/milvus and its .so files
WHEEL_LIB = "milvus_lite/lib/"
LOG_LEVEL = "ERROR"


def engine_binary() -> Path:
    """The engine's binary; raises with the command that installs it when it is missing."""
    binary = ENGINE_DIR / "lib" / "milvus"
    if not os.access(binary, os.X_OK):
        raise FileNotFoundError(
            f"the embedded Milvus engine (milvus-lite {ENGINE_VERSION}'s binary) is not installed at {binary}: "
            f"run `make install`, or `{sys.executable} {Path(__file__).resolve()} install`"
        )
    return binary


def install(target: Path = ENGINE_DIR) -> Path:
    """Download PyPI's milvus-lite wheel of ``ENGINE_VERSION`` with pip and unpack its ``lib/`` into
    ``target`` (the binary executable); a no-op when it is there. Returns the binary's path."""
    binary = target / "lib" / "milvus"
    if os.access(binary, os.X_OK):
        return binary
    with tempfile.TemporaryDirectory(prefix="milvus-lite-wheel-") as download:
        subprocess.run(
            [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--only-binary=:all:"]
            + ["--dest", download, f"milvus-lite=={ENGINE_VERSION}"],
            check=True,
        )
        [wheel] = Path(download).glob("milvus_lite-*.whl")
        staging = Path(tempfile.mkdtemp(prefix=".milvus-lite-", dir=target.parent))
        staging.chmod(0o755)
        with zipfile.ZipFile(wheel) as archive:
            for member in archive.infolist():
                if member.filename.startswith(WHEEL_LIB) and not member.is_dir():
                    path = staging / "lib" / member.filename[len(WHEEL_LIB) :]
                    path.parent.mkdir(parents=True, exist_ok=True)
                    with archive.open(member) as source, open(path, "wb") as out:
                        shutil.copyfileobj(source, out)
                    path.chmod(0o755)
        shutil.rmtree(target, ignore_errors=True)
        staging.rename(target)
    return engine_binary()


def lock_path(db: Path) -> Path:
    return db.parent / f".{db.name}.lock"


def supervise(db: Path, port: int) -> int:
    """Run the engine on ``db`` at 127.0.0.1:``port`` until it exits or this process is told to stop;
    returns its exit status (1 when another engine holds the data)."""
    binary = engine_binary()
    db.parent.mkdir(parents=True, exist_ok=True)
    lock = open(lock_path(db), "a")  # held (and the binary alive) for this process's life
    try:
        fcntl.lockf(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        print(f"{db} is in use by another engine (lock {lock_path(db)} held)", file=sys.stderr, flush=True)
        return 1
    env = {
        **os.environ,
        "HOME": str(db.parent),
        "LD_LIBRARY_PATH": os.pathsep.join([str(binary.parent), os.environ.get("LD_LIBRARY_PATH", "")]),
    }
    engine = subprocess.Popen(
        [str(binary), str(db), f"127.0.0.1:{port}", LOG_LEVEL, str(lock_path(db))], env=env, stdin=subprocess.DEVNULL
    )
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda number, _: engine.send_signal(number))
    print(f"kb-assets Milvus engine {ENGINE_VERSION} (pid {engine.pid}) on 127.0.0.1:{port}, data {db}", flush=True)
    status = engine.wait()
    print(f"Milvus engine {ENGINE_VERSION} exited with status {status}", flush=True)
    return 0 if status in (0, -signal.SIGTERM, -signal.SIGINT) else 1


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("install", help=f"download and unpack milvus-lite {ENGINE_VERSION}'s binary")
    serve = commands.add_parser("serve", help="run the engine on a data file until SIGTERM")
    serve.add_argument("--db", type=Path, required=True)
    serve.add_argument("--port", type=int, required=True)
    args = parser.parse_args(argv)
    if args.command == "install":
        print(install())
    else:
        sys.exit(supervise(args.db.absolute(), args.port))


if __name__ == "__main__":
    main()
