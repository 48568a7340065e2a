"""A tiny, real joint text/image embedder for image-recall tests: words hashed into one space by
both towers; the image tower reads the PNG's tEXt words."""

from __future__ import annotations

import hashlib
import struct
import zlib
from collections.abc import Sequence
from pathlib import Path

import numpy as np


def write_png(path: Path, words: str) -> Path:
    """A real 1×1 PNG whose tEXt chunk ``Description`` holds ``words``."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    ihdr = struct.pack(">IIBBBBB", 1, 1, 8, 2, 0, 0, 0)
    body = chunk(b"IHDR", ihdr) + chunk(b"tEXt", b"Description\0" + words.encode("latin-1"))
    body += chunk(b"IDAT", zlib.compress(b"\x00\xff\x00\x00")) + chunk(b"IEND", b"")
    path.write_bytes(b"\x89PNG\r\n\x1a\n" + body)
    return path


def png_words(path: str) -> str:
    data = Path(path).read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", f"{path}: not a PNG"
    pos, words = 8, []
    while pos < len(data):
        (n,) = struct.unpack(">I", data[pos : pos + 4])
        kind, body = data[pos + 4 : pos + 8], data[pos + 8 : pos + 8 + n]
        if kind == b"tEXt":
            words.append(body.split(b"\0", 1)[1].decode("latin-1"))
        pos += 12 + n
    return " ".join(words)


class JointHashEmbedder:
    """Each lower-cased word → one of ``dimension`` buckets (BLAKE2b); rows L2-normalised. The image
    tower reads the PNG's tEXt words, so a picture and its words share the space."""

    def __init__(self, dimension: int = 512) -> None:
        self.dimension = dimension
        self.model_key = f"test-joint-hash-{dimension}|local"
        self.image_calls = 0

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        out = np.zeros((len(texts), self.dimension), dtype=np.float32)
        for i, t in enumerate(texts):
            for w in t.lower().split():
                out[
                    i, int.from_bytes(hashlib.blake2b(w.encode(), digest_size=8).digest(), "little") % self.dimension
                ] += 1
            n = np.linalg.norm(out[i])
            if n:
                out[i] /= n
        return out

    def embed_images(self, paths: Sequence[str]) -> np.ndarray:
        self.image_calls += 1
        return self.embed([png_words(p) for p in paths])
