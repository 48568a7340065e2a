"""Image info helpers (spec §6.10, §6.11 and §4.8.3 "Merge image info").

``image_info`` is a JSON array of ImageInfo objects (``url``, ``original_url``, ``start_pos``,
``end_pos``, ``caption``, ``ocr_text``). Entries are kept as dicts: keys this module does not
know are carried through unchanged when a list is re-serialised.
"""

from __future__ import annotations

import json
import re

from rag_lab.searchutil.text import go_trim

__all__ = [
    "MARKDOWN_IMAGE_RE",
    "HTML_IMAGE_RE",
    "parse_image_info",
    "image_field",
    "dump_image_info",
    "image_urls_in_content",
    "filter_image_info_by_content_urls",
    "prune_markdown_images_by_image_info",
    "slice_content_by_document_range",
    "image_info_markdown_metadata",
    "enrich_content_with_image_info_for_chat",
    "merge_image_info",
]

# Go RE2 ``\s`` is [\t\n\f\r ] (no \v); ``\b`` after "img" means "next is not an ASCII word char".
_S = r"[\t\n\f\r ]"
#: ``![alt](url)``; group 2 is the URL.
MARKDOWN_IMAGE_RE = re.compile(r"!\[([^\]]*)\]\(([^)]+)\)")
#: ``<img ... src="...">`` (case-insensitive); group 2 is the src. ``data-src`` does not match.
HTML_IMAGE_RE = re.compile(rf"<img(?![0-9A-Za-z_])([^>]*?){_S}src{_S}*={_S}*['\"]([^'\"]+)['\"]([^>]*)>", re.IGNORECASE)

_STR_FIELDS = ("url", "original_url", "caption", "ocr_text")
_INT_FIELDS = ("start_pos", "end_pos")


def parse_image_info(info: str | bytes | None) -> list[dict[str, object]] | None:
    """Decode an ``image_info`` JSON array; ``None`` when it is not valid ImageInfo JSON.

    ``null`` decodes to an empty list (as Go does). An entry must be an object (or null,
    read as an empty entry) whose known fields have the right JSON types.
    """
    if info is None:
        return None
    try:
        data = json.loads(info)
    except (ValueError, TypeError):
        return None
    if data is None:
        return []
    if not isinstance(data, list):
        return None
    out: list[dict[str, object]] = []
    for entry in data:
        if entry is None:
            entry = {}
        if not isinstance(entry, dict):
            return None
        for key in _STR_FIELDS:
            if entry.get(key) is not None and not isinstance(entry[key], str):
                return None
        for key in _INT_FIELDS:
            v = entry.get(key)
            if v is not None and (isinstance(v, bool) or not isinstance(v, int | float)):
                return None
        out.append(entry)
    return out


def dump_image_info(entries: list[dict[str, object]]) -> str:
    """Serialise ImageInfo entries as compact JSON (UTF-8 kept as is)."""
    return json.dumps(entries, ensure_ascii=False, separators=(",", ":"))


def image_field(entry: dict[str, object], key: str) -> str:
    """A string field of an entry; ``""`` when it is absent, null or not a string."""
    v = entry.get(key)
    return v if isinstance(v, str) else ""


def image_urls_in_content(content: str) -> set[str]:
    """Markdown image URLs plus trimmed, non-empty HTML ``<img src>`` values (§6.10)."""
    urls: set[str] = set()
    for m in MARKDOWN_IMAGE_RE.finditer(content):
        if m.group(2):
            urls.add(m.group(2))
    for m in HTML_IMAGE_RE.finditer(content):
        src = go_trim(m.group(2))
        if src:
            urls.add(src)
    return urls


def filter_image_info_by_content_urls(content: str, info: str) -> str:
    """The entries whose ``url`` or ``original_url`` the content references, as JSON; ``""``
    when the info is empty/invalid, the content has no image or nothing is kept (§6.10)."""
    if not info:
        return ""
    entries = parse_image_info(info)
    if not entries:
        return ""
    urls = image_urls_in_content(content)
    if not urls:
        return ""
    kept = [e for e in entries if (image_field(e, "url") in urls) or (image_field(e, "original_url") in urls)]
    if not kept:
        return ""
    return dump_image_info(kept)


def prune_markdown_images_by_image_info(content: str, info: str) -> str:
    """Remove Markdown images whose URL is not a ``url``/``original_url`` of ``info``, then
    squeeze blank-line runs and trim. HTML ``<img>`` tags are kept (§6.10)."""
    entries = parse_image_info(info) if info else None
    allowed: set[str] = set()
    for e in entries or ():
        for key in ("url", "original_url"):
            v = image_field(e, key)
            if v:
                allowed.add(v)
    out = MARKDOWN_IMAGE_RE.sub(lambda m: m.group(0) if m.group(2) in allowed else "", content)
    while "\n\n\n" in out:
        out = out.replace("\n\n\n", "\n\n")
    return go_trim(out)


def slice_content_by_document_range(content: str, content_start: int, start: int, end: int) -> str:
    """``content[start-content_start : end-content_start]`` in runes, clamped; ``""`` when the
    range is empty (§6.10)."""
    n = len(content)
    lo = min(max(start - content_start, 0), n)
    hi = min(max(end - content_start, 0), n)
    if hi <= lo:
        return ""
    return content[lo:hi]


def image_info_markdown_metadata(entry: dict[str, object]) -> str:
    """Caption and OCR text of one image as a Markdown blockquote; ``""`` when both are blank."""
    lines: list[str] = []
    caption = go_trim(image_field(entry, "caption"))
    if caption:
        lines.append("**Image caption:** " + caption)
    ocr = go_trim(image_field(entry, "ocr_text"))
    if ocr:
        lines.append("**Image text (OCR):** " + ocr)
    if not lines:
        return ""
    return "> " + "\n\n".join(lines).replace("\n", "\n> ")


def enrich_content_with_image_info_for_chat(content: str, info_json: str) -> str:
    """Insert each referenced image's caption/OCR blockquote right after the image (§6.11).

    Images are found in the original content (Markdown key = URL as written, HTML key = src
    trimmed); images without info stay bare and unreferenced info is not appended.
    """
    entries = parse_image_info(info_json) if info_json else None
    if not entries:
        return content
    by_key: dict[str, dict[str, object]] = {}
    for e in entries:
        for key in ("url", "original_url"):
            v = image_field(e, key)
            if v:
                by_key[v] = e
    inserts: list[tuple[int, str]] = []
    for m in MARKDOWN_IMAGE_RE.finditer(content):
        entry = by_key.get(m.group(2))
        if entry is not None:
            meta = image_info_markdown_metadata(entry)
            if meta:
                inserts.append((m.end(), "\n\n" + meta))
    for m in HTML_IMAGE_RE.finditer(content):
        entry = by_key.get(go_trim(m.group(2)))
        if entry is not None:
            meta = image_info_markdown_metadata(entry)
            if meta:
                inserts.append((m.end(), "\n\n" + meta))
    if not inserts:
        return content
    out = content
    # Right to left keeps earlier positions valid; equal positions keep discovery order.
    for pos, text in sorted(inserts, key=lambda t: t[0], reverse=True):
        out = out[:pos] + text + out[pos:]
    return out


def merge_image_info(target_json: str, source_json: str) -> str:
    """Merge the source image info into the target and return the new target (§4.8.3).

    Empty source or empty source list: the target unchanged. Invalid source JSON:
    ``ValueError`` (the caller keeps its target). Invalid (or empty) target: the source as is.
    Otherwise target + source entries, the first per non-empty ``url``; entries without a URL
    are dropped.
    """
    if not source_json:
        return target_json
    source = parse_image_info(source_json)
    if source is None:
        raise ValueError(f"merge_image_info: invalid source image_info JSON: {source_json[:200]!r}")
    if not source:
        return target_json
    target = parse_image_info(target_json) if target_json else None
    if target is None:
        return source_json
    seen: set[str] = set()
    merged: list[dict[str, object]] = []
    for e in (*target, *source):
        url = image_field(e, "url")
        if not url or url in seen:
            continue
        seen.add(url)
        merged.append(e)
    return dump_image_info(merged)
