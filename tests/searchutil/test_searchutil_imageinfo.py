"""searchutil.imageinfo: image URL helpers, chat enrichment, image info merge (§6.10, §6.11, §4.8.3)."""

from __future__ import annotations

import json

import pytest

from rag_lab.searchutil.imageinfo import (
    enrich_content_with_image_info_for_chat,
    filter_image_info_by_content_urls,
    image_urls_in_content,
    merge_image_info,
    parse_image_info,
    prune_markdown_images_by_image_info,
    slice_content_by_document_range,
)


def _j(entries: list[dict]) -> str:
    return json.dumps(entries)


def test_parse_image_info() -> None:
    assert parse_image_info('[{"url": "a", "start_pos": 3}]') == [{"url": "a", "start_pos": 3}]
    assert parse_image_info("null") == []
    assert parse_image_info("[]") == []
    assert parse_image_info("{bad") is None
    assert parse_image_info('{"url": "a"}') is None
    assert parse_image_info('[{"url": 3}]') is None
    assert parse_image_info("") is None


def test_image_urls_in_content() -> None:
    content = (
        '![a](u1) <img class="x" src=" u2 "> <img data-src="u3"> <IMG SRC=\'u4\'> '
        '<img\tsrc="u5"/> <imgx src="u6"> ![](u7)'
    )
    assert image_urls_in_content(content) == {"u1", "u2", "u4", "u5", "u7"}
    assert image_urls_in_content("no images here") == set()


def test_filter_image_info_by_content_urls() -> None:
    info = _j([{"url": "u1"}, {"url": "u2", "original_url": "x"}, {"url": "z", "original_url": "u1"}])
    kept = filter_image_info_by_content_urls("![a](u1)", info)
    assert json.loads(kept) == [{"url": "u1"}, {"url": "z", "original_url": "u1"}]
    assert filter_image_info_by_content_urls("![a](u1)", "") == ""
    assert filter_image_info_by_content_urls("![a](u1)", "{bad") == ""
    assert filter_image_info_by_content_urls("![a](u1)", "[]") == ""
    assert filter_image_info_by_content_urls("no image", info) == ""
    assert filter_image_info_by_content_urls("![a](other)", info) == ""


def test_prune_markdown_images_by_image_info() -> None:
    content = 'a\n\n![x](keep)\n\n![y](drop)\n\n\n\nb <img src="drop">\n'
    info = _j([{"url": "keep"}])
    assert prune_markdown_images_by_image_info(content, info) == 'a\n\n![x](keep)\n\nb <img src="drop">'
    # original_url is allowed too; invalid info allows nothing.
    assert prune_markdown_images_by_image_info("![y](o)", _j([{"url": "n", "original_url": "o"}])) == "![y](o)"
    assert prune_markdown_images_by_image_info(" ![x](keep) text", "{bad") == "text"


def test_slice_content_by_document_range() -> None:
    assert slice_content_by_document_range("héllo", 10, 11, 13) == "él"
    assert slice_content_by_document_range("héllo", 10, 0, 100) == "héllo"
    assert slice_content_by_document_range("héllo", 10, 13, 13) == ""
    assert slice_content_by_document_range("héllo", 10, 14, 12) == ""
    assert slice_content_by_document_range("中文内容", 0, 2, 4) == "内容"


def test_enrich_content_with_image_info_for_chat() -> None:
    content = "See ![chart](u1) and <img src=' u2 '> and ![none](u3)."
    info = _j(
        [
            {"url": "u1", "caption": " Monthly ", "ocr_text": "Jan\n100"},
            {"original_url": "u2", "caption": "Pic"},
            {"url": "u3"},
            {"url": "unused", "caption": "never appended"},
        ]
    )
    assert enrich_content_with_image_info_for_chat(content, info) == (
        "See ![chart](u1)\n\n> **Image caption:** Monthly\n> \n> **Image text (OCR):** Jan\n> 100"
        " and <img src=' u2 '>\n\n> **Image caption:** Pic"
        " and ![none](u3)."
    )


def test_enrich_content_later_entry_wins_and_invalid_info() -> None:
    info = _j([{"url": "u1", "caption": "old"}, {"url": "u1", "caption": "new"}])
    assert enrich_content_with_image_info_for_chat("![a](u1)", info) == "![a](u1)\n\n> **Image caption:** new"
    for bad in ("", "{bad", "[]", "null"):
        assert enrich_content_with_image_info_for_chat("![a](u1)", bad) == "![a](u1)"
    # Blank caption and OCR: no metadata, the image stays bare.
    assert enrich_content_with_image_info_for_chat("![a](u1)", _j([{"url": "u1", "caption": "  "}])) == "![a](u1)"


def test_merge_image_info() -> None:
    target = _j([{"url": "a", "caption": "t"}, {"url": ""}])
    source = _j([{"url": "a", "caption": "s"}, {"url": "b"}, {"caption": "no url"}])
    assert json.loads(merge_image_info(target, source)) == [{"url": "a", "caption": "t"}, {"url": "b"}]
    assert merge_image_info(target, "") == target
    assert merge_image_info(target, "[]") == target
    assert merge_image_info("not json", source) == source
    assert merge_image_info("", source) == source
    with pytest.raises(ValueError, match="invalid source image_info"):
        merge_image_info(target, "{oops")
