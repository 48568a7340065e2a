from __future__ import annotations

import base64
import json

from rag_lab.pipeline.plugins.context_images import collect_context_images, sniff_image_type
from rag_lab.types import PipelineParams, SearchResult

PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 20
GIF = b"GIF89a" + b"\x00" * 10
WEBP = b"RIFF\x00\x00\x00\x00WEBPVP8 "


def test_sniff():
    assert sniff_image_type(PNG) == "image/png" and sniff_image_type(GIF) == "image/gif"
    assert sniff_image_type(WEBP) == "image/webp" and sniff_image_type(b"\xff\xd8\xff\xe0") == "image/jpeg"
    assert sniff_image_type(b"%PDF-1.7") == ""


def _hit(id_, urls, **meta):
    return SearchResult(
        id=id_,
        chunk_type="image_vector" if not meta else "text",
        metadata=meta,
        image_info=json.dumps([{"url": u} for u in urls]),
    )


def test_collect_dedups_caps_and_filters(tmp_path):
    (tmp_path / "a.png").write_bytes(PNG)
    (tmp_path / "b.gif").write_bytes(GIF)
    (tmp_path / "big.png").write_bytes(PNG + b"\x00" * 100)
    (tmp_path / "fake.png").write_bytes(b"not an image")
    data_uri = "data:image/webp;base64," + base64.b64encode(WEBP).decode()
    results = [
        _hit("1", ["a.png", "a.png", "fake.png", "https://remote/x.png"]),
        SearchResult(id="plain", image_info=json.dumps([{"url": "b.gif"}])),  # not an image hit: ignored
        _hit("2", [f"file://{tmp_path / 'big.png'}", "b.gif"], image_vector_match="true"),
        _hit("3", [data_uri, "a.png"]),
    ]
    p = PipelineParams().with_changes(context_image_max_bytes=60)
    got = collect_context_images(results, p, base_dir=tmp_path)
    assert [g.split(";")[0] for g in got] == ["data:image/png", "data:image/gif", "data:image/webp"]
    assert collect_context_images(results, p.with_changes(context_images_max=1), base_dir=tmp_path) == got[:1]
