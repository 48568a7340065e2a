"""Any OpenAI-compatible ``/v1/embeddings`` endpoint as an embedder."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from rag_lab.models.base import ModelError
from rag_lab.models.embedding.checks import check_texts, l2_normalise, short_text


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
