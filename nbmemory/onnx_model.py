"""A sentence-transformers model run by ONNX Runtime: the same vectors, without torch.

Measured on these 2 cores with all-MiniLM-L6-v2: importing torch and sentence-transformers
and loading the model took 7.5-9 s, ONNX Runtime and the tokenizer 0.45 s; a short query
took 16-20 ms on one torch thread and 8-9 ms here; bulk encoding 138 notes/s on one thread
and 241 on two (torch: 127-187 on one); the owner held about 500 MB less. The vectors
differ from torch's by at most 3e-7 (empty, long, non-ASCII and padded texts alike).

The model is exported once per machine, from the torch model the first time it loads
(``torch.onnx``; needs the ``onnx`` package), into the model cache (:func:`model_cache`),
and is used only if it gives torch's vectors on :data:`PROBES`. A model that cannot be
exported, or whose export differs, keeps running on torch.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
import threading
import warnings
from pathlib import Path
from typing import Sequence

import numpy as np

from .address import cache_root

FORMAT = 1  # of a cached export; a new one is made when it changes
TOLERANCE = 1e-4  # largest difference from torch's (normalised) vectors on the probes
PROBES = ["", "  spaces around  ", "Ünïcödé naïve café 東京", "word " * 400,
          "def parse_retry_after(header): return int(header)", "\n\ttabs\nand lines\n"]


def model_cache(environ: dict | None = None) -> Path:
    """Where exported models are kept: ``NBMEMORY_MODEL_CACHE``, else ``models`` below the
    cache root."""
    environ = os.environ if environ is None else environ
    if environ.get("NBMEMORY_MODEL_CACHE"):
        return Path(environ["NBMEMORY_MODEL_CACHE"]).expanduser().resolve()
    return cache_root(environ) / "models"


def cache_problem() -> str | None:
    """Why exported models cannot be kept (the cache cannot be made or written), or None."""
    cache = model_cache()
    if cache.exists() and not cache.is_dir():
        return f"the model cache {cache} is a file, not a directory"
    try:
        cache.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=cache):
            pass
    except OSError as exc:
        return f"the model cache {cache} cannot be written ({exc.strerror or exc})"
    return None


def export_key(source: str) -> str:
    """Names a model's export: its files (path, size, time) and this format."""
    digest = hashlib.sha256(f"{FORMAT}\0{source}".encode())
    root = Path(source)
    if root.is_dir():
        for path in sorted(root.rglob("*")):
            if path.is_file():
                info = path.stat()
                digest.update(f"\0{path.relative_to(root)}\0{info.st_size}\0{info.st_mtime_ns}"
                              .encode())
    name = root.name if root.is_dir() else source
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in name)[-40:]
    return f"{safe}-{digest.hexdigest()[:16]}"


class OnnxModel:
    """An exported model: ``model.onnx``, ``tokenizer.json`` and ``meta.json`` in a directory."""

    def __init__(self, directory: Path, *, threads: int = 1):
        import onnxruntime
        from tokenizers import Tokenizer

        self.directory = Path(directory)
        meta = json.loads((self.directory / "meta.json").read_text(encoding="utf-8"))
        self.inputs: list[str] = meta["inputs"]
        self.dims = int(meta["dims"])
        self.tokenizer = Tokenizer.from_file(str(self.directory / "tokenizer.json"))
        self.tokenizer.enable_truncation(int(meta["max_length"]))
        self.tokenizer.no_padding()  # batches are padded here, after sorting by length
        self.pad_id = int(meta["pad_id"])
        self._ort = onnxruntime
        self._sessions: dict[int, object] = {}
        self._lock = threading.Lock()
        self.threads = threads
        self._session(threads)  # a broken file fails here, not at the first query

    def _session(self, threads: int):
        with self._lock:
            if threads not in self._sessions:
                options = self._ort.SessionOptions()
                options.intra_op_num_threads = threads
                options.inter_op_num_threads = 1
                # Idle threads otherwise spin for a while after each run, taking a core
                # from the kernel beside them.
                options.add_session_config_entry("session.intra_op.allow_spinning", "0")
                self._sessions[threads] = self._ort.InferenceSession(
                    str(self.directory / "model.onnx"), options,
                    providers=["CPUExecutionProvider"])
            return self._sessions[threads]

    def set_threads(self, threads: int) -> None:
        """Run on ``threads`` from now on. Its session is created here, not in the next
        encode, which the thread tuner times: a first batch of 256 short notes on two
        threads that also created the session was timed at 294 notes/s against 291 on one
        thread (about 400 afterwards), and the tuner could settle on one thread. Without
        the creation it is timed at 333."""
        self.threads = max(1, int(threads))
        self._session(self.threads)

    def encode(self, texts: Sequence[str], batch_size: int = 16) -> np.ndarray:
        """Normalised float32 vectors. Texts are batched by length, as sentence-transformers
        does, so that a batch pads little."""
        texts = [str(text) for text in texts]
        out = np.zeros((len(texts), self.dims), dtype=np.float32)
        if not texts:
            return out
        session = self._session(self.threads)
        encodings = self.tokenizer.encode_batch(texts)
        order = np.argsort([-len(e.ids) for e in encodings], kind="stable")
        for start in range(0, len(order), batch_size):
            rows = order[start:start + batch_size]
            width = len(encodings[rows[0]].ids)
            feed = {name: np.zeros((len(rows), width), dtype=np.int64) for name in
                    ("input_ids", "attention_mask", "token_type_ids")}
            feed["input_ids"].fill(self.pad_id)
            for row, index in enumerate(rows):
                encoding = encodings[index]
                length = len(encoding.ids)
                feed["input_ids"][row, :length] = encoding.ids
                feed["attention_mask"][row, :length] = 1
                feed["token_type_ids"][row, :length] = encoding.type_ids
            (vectors,) = session.run(None, {name: feed[name] for name in self.inputs})
            out[rows] = vectors
        return out


def load(source: str, *, threads: int = 1) -> OnnxModel | None:
    """The cached export of ``source``, or None when there is none (or ONNX Runtime is
    not installed, or the cached files are unreadable: the model is then exported again)."""
    directory = model_cache() / export_key(source)
    if not (directory / "meta.json").is_file():
        return None
    try:
        return OnnxModel(directory, threads=threads)
    except ImportError:
        return None
    except Exception:  # noqa: BLE001 - a damaged export: make it again
        shutil.rmtree(directory, ignore_errors=True)
        return None


def export(model, source: str, *, threads: int = 1) -> OnnxModel | None:
    """Export a loaded ``SentenceTransformer`` to the model cache and load it, or None if
    it cannot be exported or its export does not give the model's vectors."""
    try:
        import onnxruntime  # noqa: F401
        import torch

        tokenizer = model.tokenizer
        backend = tokenizer.backend_tokenizer  # only fast tokenizers have one
    except (ImportError, AttributeError):
        return None
    if getattr(model, "default_prompt_name", None):
        return None  # a prompt is added to every text: not part of the export
    final = model_cache() / export_key(source)
    temporary = final.with_name(f".{final.name}.{os.getpid()}.{threading.get_ident()}")
    try:
        shutil.rmtree(temporary, ignore_errors=True)
        temporary.mkdir(parents=True)
        tokenize = getattr(model, "preprocess", None) or model.tokenize
        features = {name: value for name, value in tokenize(["an example", "two"]).items()
                    if hasattr(value, "shape")}
        names = [name for name in ("input_ids", "token_type_ids", "attention_mask")
                 if name in features]

        class Embedding(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.model = model

            def forward(self, *values):
                return self.model(dict(zip(names, values)))["sentence_embedding"]

        with warnings.catch_warnings(), torch.no_grad():
            warnings.simplefilter("ignore")
            torch.onnx.export(
                Embedding(), tuple(features[name] for name in names),
                str(temporary / "model.onnx"), input_names=names, output_names=["embedding"],
                dynamic_axes={**{name: {0: "batch", 1: "tokens"} for name in names},
                              "embedding": {0: "batch"}},
                opset_version=17, dynamo=False)
        backend.save(str(temporary / "tokenizer.json"))
        (temporary / "meta.json").write_text(json.dumps({
            "format": FORMAT, "source": source, "inputs": names,
            "dims": int((getattr(model, "get_embedding_dimension", None)
                         or model.get_sentence_embedding_dimension)()),
            "max_length": int(model.max_seq_length),
            "pad_id": int(tokenizer.pad_token_id or 0),
            "pad_token": str(tokenizer.pad_token or "[PAD]")}), encoding="utf-8")
        exported = OnnxModel(temporary, threads=threads)
        expected = model.encode(PROBES, convert_to_numpy=True, normalize_embeddings=True)
        if float(np.abs(exported.encode(PROBES) - expected).max()) > TOLERANCE:
            return None
        try:
            os.replace(temporary, final)
        except OSError:  # another process exported it first
            pass
        return OnnxModel(final, threads=threads)
    except Exception:  # noqa: BLE001 - exporters fail in many ways; torch still works
        return None
    finally:
        shutil.rmtree(temporary, ignore_errors=True)
