"""PyPI's ``milvus`` 2.3.5 (an embedded Milvus standalone: the Go/C++ server with its etcd and rocksmq), the one
Milvus server that installs from PyPI, serving until SIGTERM; then the server half of the engine tests against it.

It predates sparse vectors and the BM25 function (Milvus 2.5), so it holds no kb-assets collection: creating one
fails (``create index on 104 field is not supported``) and the server then aborts (SIGABRT in cgo) at the first
insert into it. What it does hold are plain collections: ``kb_assets_tests/test_engines.py``'s publication test
(publish, swap and roll back through the alias, kb-assets's own calls) runs against it as ``KB_TEST_MILVUS_URI``.
Its own virtualenv (it pins old grpcio/protobuf), and a network namespace with loopback only (its coordinators
register on the machine's first non-loopback address otherwise), as root:

    python3.11 -m venv /tmp/milvus235 && /tmp/milvus235/bin/pip install milvus==2.3.5
    unshare -n bash -c 'ip link set lo up
        /tmp/milvus235/bin/python benchmarks/milvus_235.py /tmp/milvus235-data 19610 & sleep 60
        KB_TEST_MILVUS_URI=http://127.0.0.1:19610 .venv/bin/python -m pytest -q \\
            kb_assets_tests/test_engines.py -k published
        kill %1; wait'
"""

import signal
import sys
import threading

from milvus import MilvusServer

server = MilvusServer()
server.set_base_dir(sys.argv[1])
server.listen_port = int(sys.argv[2])
server.start()
version = __import__("milvus").__version__
print(f"milvus {version} standalone on 127.0.0.1:{sys.argv[2]}, data {sys.argv[1]}", flush=True)
stopping = threading.Event()
for sig in (signal.SIGTERM, signal.SIGINT):
    signal.signal(sig, lambda *_: stopping.set())
stopping.wait()
server.stop()
