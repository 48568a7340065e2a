"""Retrieved images for a vision chat model (seed, INTO_CHAT_MESSAGE): images of image hits
(``image_vector``) and of results that absorbed one (``image_vector_match``), deduplicated, at
most N, PNG / JPEG / WebP / GIF of at most ``context_image_max_bytes``, as data URIs."""

from __future__ import annotations

import base64
import logging
from pathlib import Path
from urllib.parse import unquote, urlparse

from rag_lab.reranking.image import image_entries, is_image_hit
from rag_lab.types.params import PipelineParams
from rag_lab.types.search_result import SearchResult

log = logging.getLogger(__name__)

_MAGIC = (
    (b"\x89PNG\r\n\x1a\n", "image/png"),
    (b"\xff\xd8\xff", "image/jpeg"),
    (b"GIF87a", "image/gif"),
    (b"GIF89a", "image/gif"),
)


def sniff_image_type(data: bytes) -> str:
    """MIME type from the first bytes, or "" for anything that is not PNG/JPEG/WebP/GIF."""
    for magic, mime in _MAGIC:
        if data.startswith(magic):
            return mime
    if len(data) >= 12 and data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "image/webp"
    return ""


def read_local_image(url: str, base_dir: Path | None, max_bytes: int) -> bytes | None:
    """Bytes of a ``file://`` URL or a path (relative to ``base_dir``); None when unreadable or too big."""
    parsed = urlparse(url)
    if parsed.scheme == "file":
        path = Path(unquote(parsed.path))
    elif parsed.scheme == "" and url:
        path = Path(url) if base_dir is None or Path(url).is_absolute() else base_dir / url
    else:
        return None  # remote URLs are not fetched here (no SSRF from stored content)
    try:
        if not path.is_file() or path.stat().st_size > max_bytes:
            return None
        return path.read_bytes()
    except OSError as exc:
        log.warning("context image %s unreadable: %s", url, exc)
        return None


def collect_context_images(
    results: list[SearchResult], params: PipelineParams, base_dir: Path | None = None
) -> list[str]:
    out: list[str] = []
    seen: set[str] = set()
    for r in results:
        if not (is_image_hit(r) or r.metadata.get("image_vector_match") == "true"):
            continue
        for entry in image_entries(r):
            if len(out) >= params.context_images_max:
                return out
            url = str(entry.get("url") or entry.get("original_url") or "")
            if not url or url in seen:
                continue
            seen.add(url)
            if url.startswith("data:image/"):
                head, _, b64 = url.partition(",")
                try:
                    data = base64.b64decode(b64, validate=True)
                except ValueError:
                    continue
            else:
                local = read_local_image(url, base_dir, params.context_image_max_bytes)
                if local is None:
                    continue
                data = local
            mime = sniff_image_type(data)
            if not mime or len(data) > params.context_image_max_bytes:
                continue
            out.append(f"data:{mime};base64,{base64.b64encode(data).decode('ascii')}")
    return out
