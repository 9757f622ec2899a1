"""Milvus Lite 3.x as a Milvus server: milvus-lite's own gRPC server, with its writes serialized.

kb-assets embedded it before the C++ engine (``milvus_engine``); it no longer starts it. It stays as a
server that answers the whole Milvus server API (aliases, collection properties, partition keys) without
Docker: the server profile's tests run on it (``KB_MILVUS_URI``), ``benchmarks/engines.py`` measures it
beside the engine, and it reads a ``KB_HOME``'s data folder of before the upgrade (``milvus-lite-3.2.2/``).

milvus-lite 3.2.2 answers every gRPC call on a thread pool, but its engine is not safe for concurrent
callers in two places (read in its source, reproduced here):

- the first calls into a collection after a (re)start each open it: ``MilvusLite.get_collection`` has
  no lock, so N concurrent first calls make N in-memory collections over one data directory (6 threads
  made 6). A delete made through one is never seen by the one kept, so a purged document's entities
  came back after a kill -9 while the service searched (a CI soak run);
- inserts, upserts, deletes and flushes share one WAL writer and one sequence counter without a lock,
  and ``Delete`` by filter queries the matches first, then flips the load state around it, racing a
  concurrent ``LoadCollection`` into a collection stuck in state ``loading``.

So this server opens a collection under one lock, and runs every call that changes data, indexes, load
state or names under another, one at a time. Searches and queries still run in parallel. Run as
``python -m kb_assets.services.milvus_lite_server --data-dir D --host 127.0.0.1 --port P``.
"""

from __future__ import annotations

import argparse
import functools
import signal
import threading
from concurrent import futures

import grpc
from milvus_lite.adapter.grpc.servicer import MilvusServicer
from milvus_lite.db import MilvusLite
from pymilvus.grpc_gen import milvus_pb2_grpc

MAX_WORKERS = 10  # milvus-lite's own
MAX_MESSAGE_BYTES = 256 * 1024 * 1024  # milvus-lite's own, as Milvus standalone
# Every RPC of milvus-lite's servicer that changes what a later call sees
WRITES = (
    "CreateCollection",
    "DropCollection",
    "Insert",
    "Upsert",
    "Delete",
    "CreateIndex",
    "DropIndex",
    "LoadCollection",
    "ReleaseCollection",
    "CreatePartition",
    "DropPartition",
    "Flush",
    "TruncateCollection",
    "CreateDatabase",
    "DropDatabase",
    "AlterDatabase",
    "RenameCollection",
    "CreateAlias",
    "AlterAlias",
    "DropAlias",
    "AlterCollection",
    "LoadPartitions",
    "ReleasePartitions",
    "ManualCompaction",
)


class OneOpeningMilvusLite(MilvusLite):
    """A collection is opened (recovered from its files) once, however many calls ask for it at once."""

    def __init__(self, data_dir: str):
        self._opening = threading.RLock()
        super().__init__(data_dir)

    def get_collection(self, *args, **kwargs):
        with self._opening:
            return super().get_collection(*args, **kwargs)


def _one_at_a_time(rpc):
    @functools.wraps(rpc)
    def call(self, request, context):
        with self._writing:
            return rpc(self, request, context)

    return call


class SerializedServicer(MilvusServicer):
    """milvus-lite's servicer; the ``WRITES`` run one at a time."""

    def __init__(self, db: MilvusLite):
        super().__init__(db)
        self._writing = threading.Lock()


for _name in WRITES:
    setattr(SerializedServicer, _name, _one_at_a_time(getattr(MilvusServicer, _name)))


def serve(data_dir: str, host: str, port: int) -> None:
    """Serve until SIGTERM or SIGINT, then drain calls for up to 5 s and close the data dir."""
    db = OneOpeningMilvusLite(data_dir)
    server = grpc.server(
        futures.ThreadPoolExecutor(max_workers=MAX_WORKERS),
        options=[
            ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
            ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
        ],
    )
    milvus_pb2_grpc.add_MilvusServiceServicer_to_server(SerializedServicer(db), server)
    server.add_insecure_port(f"{host}:{port}")
    server.start()
    print(
        f"kb-assets Milvus Lite server (writes serialized) listening on {host}:{port} (data dir {data_dir})", flush=True
    )
    stopping = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stopping.set())
    while not stopping.wait(1.0):
        pass
    server.stop(grace=5).wait()
    db.close()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", required=True)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    args = parser.parse_args(argv)
    serve(args.data_dir, args.host, args.port)


if __name__ == "__main__":
    main()
