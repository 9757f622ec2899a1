"""The ONNX encoder: a sentence-transformers folder exported once to ONNX, cached, checked, run by onnxruntime.

The export runs in a child process (``python -m kb_assets.embedding.export``), so that the process
that encodes never imports torch (the retrieval service stays small). It lands in
``KB_CACHE_DIR/onnx/<model>-<fingerprint>/``: ``model.onnx`` (fp32: the whole sentence-transformers
pipeline, pooling and normalization included; its weights in ``model.onnx.data``, which onnxruntime
maps from the file) and, on demand, ``model-int8.onnx``; each with a ``.json`` beside it that records
its sha256 (the weights' included), the probe's token ids and the probe vectors torch gave.

A cached model is used only when its sha256 matches and it reproduces the probe (fp32: cosine >=
``SAME_SPEC_COSINE`` to torch's vectors); a missing, corrupt or stale one is rebuilt under a file
lock (files are written to a temporary name and renamed, the ``.json`` last).
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import shutil
import subprocess
import sys
from contextlib import contextmanager
from functools import lru_cache
from pathlib import Path

import numpy as np

from kb_assets.lib.machine import DEFAULT_CACHE_DIR

# how export.py builds model.onnx (2: eager attention, 3: external weights): a new one re-exports
EXPORT_VERSION = "3"
SAME_SPEC_COSINE = 0.9999  # vectors this close to torch's are the same embedding spec
INT8_SANITY_COSINE = 0.8  # an int8 file further than this from torch's probe is broken, not just quantized
EXPORT_TIMEOUT_S = 900
VARIANTS = {None: "model.onnx", "int8": "model-int8.onnx"}


class OnnxUnavailable(RuntimeError):
    """The model cannot be exported to or run by onnxruntime here (the reason says why)."""


def model_fingerprint(source: Path) -> str:
    """What identifies a model folder's export: the exporter's version and the names, sizes and
    modification times of the folder's files (weights are not hashed: that would cost every process
    that loads the model ~0.3 s)."""
    digest = hashlib.sha256(f"export {EXPORT_VERSION}\n".encode())
    for file in sorted(p for p in source.rglob("*") if p.is_file()):
        stat = file.stat()
        digest.update(f"{file.relative_to(source)}\0{stat.st_size}\0{stat.st_mtime_ns}\n".encode())
    return digest.hexdigest()[:16]


def model_folder(source: Path, cache_dir: Path | None) -> Path:
    """The cache folder of a model's exports."""
    name = "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in f"{source.parent.name}-{source.name}")[-48:]
    return (cache_dir or DEFAULT_CACHE_DIR) / "onnx" / f"{name}-{model_fingerprint(source)}"


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def weights_file(model_file: Path) -> Path:
    """The external data file that holds a model file's weights (absent for a self-contained file)."""
    return model_file.with_name(model_file.name + ".data")


def export_sha256(model_file: Path) -> str:
    """The sha256 of a model file and, where it has one, of its weights file."""
    weights = weights_file(model_file)
    digest = file_sha256(model_file)
    return f"{digest}+{file_sha256(weights)}" if weights.exists() else digest


def open_session(model_file: Path, threads: int):
    """An onnxruntime session on the CPU: ``threads`` intra-op threads, full graph optimization."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = max(1, threads)
    options.inter_op_num_threads = 1
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.log_severity_level = 3
    # idle threads sleep instead of spinning: on shared or oversubscribed cores (parse workers beside
    # the encoder, concurrent runs) spinning threads take the CPU the others need
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    return ort.InferenceSession(str(model_file), options, providers=["CPUExecutionProvider"])


def padded(rows: list[list[int]]) -> tuple[np.ndarray, np.ndarray]:
    """Token id rows as one zero-padded batch and its attention mask."""
    width = max(len(row) for row in rows)
    input_ids = np.zeros((len(rows), width), dtype=np.int64)
    mask = np.zeros_like(input_ids)
    for n, row in enumerate(rows):
        input_ids[n, : len(row)] = row
        mask[n, : len(row)] = 1
    return input_ids, mask


@lru_cache(maxsize=1)
def shrinking_run_options():
    """Run options that hand the CPU arena's growth back after the run: the arena otherwise keeps the
    largest batch's activations for the process's lifetime (about 55 MB after the 4 x 256-token probe,
    in a service whose queries need a few MB). Only the probe uses them: shrinking after every batch
    cost 6-10% of the encode speed and made the peak erratic (2,000 inputs: 635-889 MB against 702;
    the dev-corpus ingest peaked at 1.5 GB against 1.18)."""
    import onnxruntime as ort

    options = ort.RunOptions()
    options.add_run_config_entry("memory.enable_memory_arena_shrinkage", "cpu:0")
    return options


def run_session(
    session, input_names: set[str], input_ids: np.ndarray, mask: np.ndarray, shrink: bool = False
) -> np.ndarray:
    feed = {"input_ids": input_ids, "attention_mask": mask, "token_type_ids": np.zeros_like(input_ids)}
    options = shrinking_run_options() if shrink else None
    return session.run(None, {k: v for k, v in feed.items() if k in input_names}, options)[0]


def probe_problem(model_file: Path, session, input_names: set[str], quantized: str | None) -> str | None:
    """Why a cached export cannot be used (None: it can): its record, sha256 and probe vectors."""
    record_file = model_file.with_name(model_file.name + ".json")
    try:
        record = json.loads(record_file.read_text())
    except (OSError, ValueError) as error:
        return f"no valid record {record_file.name} ({error})"
    if record.get("sha256") != export_sha256(model_file):
        return f"{model_file.name} does not match its recorded sha256 (corrupt or partly written)"
    expected = np.asarray(record["probe"]["vectors"], dtype=np.float32)
    # one probe text at a time: a padded batch of them grows the arena by tens of MB that the process keeps
    got = np.vstack(
        [run_session(session, input_names, *padded([row]), shrink=True) for row in record["probe"]["input_ids"]]
    )
    if got.shape != expected.shape or not np.isfinite(got).all():
        return f"{model_file.name} gives vectors of shape {got.shape}, expected {expected.shape}"
    got = got / np.maximum(np.linalg.norm(got, axis=1, keepdims=True), 1e-12)
    cosine = float((got * expected).sum(axis=1).min())
    floor = INT8_SANITY_COSINE if quantized else SAME_SPEC_COSINE
    if cosine < floor:
        return f"{model_file.name} reproduces the probe at cosine {cosine:.5f} (< {floor})"
    return None


@contextmanager
def folder_lock(folder: Path):
    """An exclusive lock on a model's cache folder (builds by concurrent processes wait for each other)."""
    folder.parent.mkdir(parents=True, exist_ok=True)
    with open(folder.with_name(folder.name + ".lock"), "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def remove_stale_exports(folder: Path) -> None:
    """Remove the exports of the same model made from other fingerprints (an older exporter, or model
    files that changed since): each costs ~150 MB. A folder whose lock another process holds (it is
    exporting there right now) is left; a process still encoding from a removed file keeps its mapping."""
    name = folder.name.rsplit("-", 1)[0]
    for other in folder.parent.glob(f"{name}-*"):
        if other == folder or not other.is_dir() or other.name.rsplit("-", 1)[0] != name:
            continue
        lock = other.with_name(other.name + ".lock")
        with open(lock, "a") as handle:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                continue
            shutil.rmtree(other, ignore_errors=True)
            lock.unlink(missing_ok=True)


def export_in_child(source: Path, folder: Path, quantized: str | None) -> None:
    """Export (and quantize) in a child process: torch is imported there, never here."""
    command = [sys.executable, "-m", "kb_assets.embedding.export", str(source), str(folder)]
    if quantized:
        command += ["--quantize", quantized]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=EXPORT_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        raise OnnxUnavailable(f"exporting {source} to ONNX took longer than {EXPORT_TIMEOUT_S} s") from None
    if done.returncode != 0:
        tail = (done.stderr or done.stdout).strip().splitlines()[-3:]
        raise OnnxUnavailable(f"exporting {source} to ONNX failed: {' | '.join(tail)}")


class OnnxRunner:
    """Runs a model's ONNX export (built or rebuilt on first use) on the CPU."""

    def __init__(self, source: Path, cache_dir: Path | None, threads: int, quantized: str | None = None):
        self.folder = model_folder(source, cache_dir)
        self.file = self.folder / VARIANTS[quantized]
        self.name = "onnx-int8" if quantized else "onnx"
        problem = self._open(threads, quantized) if self.file.exists() else "not exported yet"
        if problem:
            with folder_lock(self.folder):
                problem = self._open(threads, quantized) if self.file.exists() else "not exported yet"
                if problem:
                    for stale in (self.file, weights_file(self.file), self.file.with_name(self.file.name + ".json")):
                        stale.unlink(missing_ok=True)
                    export_in_child(source, self.folder, quantized)
                    problem = self._open(threads, quantized)
                    if problem is None:
                        remove_stale_exports(self.folder)
            if problem:
                raise OnnxUnavailable(problem)

    def _open(self, threads: int, quantized: str | None) -> str | None:
        try:
            self.session = open_session(self.file, threads)
        except Exception as error:  # onnxruntime refuses a truncated or foreign file with various errors
            return f"onnxruntime cannot load {self.file.name} ({type(error).__name__}: {error})"
        self.input_names = {i.name for i in self.session.get_inputs()}
        problem = probe_problem(self.file, self.session, self.input_names, quantized)
        if problem is None:
            self.dimension = int(self.run(*padded([[0, 0]])).shape[-1])
        return problem

    def run(self, input_ids: np.ndarray, mask: np.ndarray) -> np.ndarray:
        return run_session(self.session, self.input_names, input_ids, mask)
