"""Prompt templates (``config/prompt_templates/*.yaml``) and placeholder rendering (spec §10)."""

from __future__ import annotations

import datetime as _dt
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

REPO_ROOT = Path(__file__).resolve().parents[2]
TEMPLATE_DIR = REPO_ROOT / "config" / "prompt_templates"

#: the label before an image description appended to a user turn (spec §3.3, §4.1, §4.11)
IMAGE_CONTENT_LABEL = "\n\n[用户上传图片内容]\n"

_PLACEHOLDER = re.compile(r"\{\{(\w+)\}\}")
_WEEKDAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")


def render_prompt_placeholders(template: str, values: Mapping[str, object], now: _dt.datetime | None = None) -> str:
    """Replace ``{{key}}`` in one pass (so a value holding ``{{x}}`` is never substituted again).

    ``current_time``, ``current_week`` and ``yesterday`` are filled automatically when the
    template uses them and the caller gave none. Unknown placeholders stay as they are.
    """
    if not template:
        return ""
    vals = {k: str(v) for k, v in values.items()}
    used = set(_PLACEHOLDER.findall(template))
    now = now or _dt.datetime.now()
    if "current_time" in used and "current_time" not in vals:
        vals["current_time"] = now.strftime("%Y-%m-%d %H:%M:%S")
    if "current_week" in used and "current_week" not in vals:
        vals["current_week"] = _WEEKDAYS[now.weekday()]
    if "yesterday" in used and "yesterday" not in vals:
        vals["yesterday"] = (now - _dt.timedelta(days=1)).strftime("%Y-%m-%d")
    return _PLACEHOLDER.sub(lambda m: vals.get(m.group(1), m.group(0)), template)


class TemplateError(ValueError):
    pass


@dataclass(slots=True)
class PromptTemplate:
    id: str
    content: str = ""
    user: str = ""
    name: str = ""
    description: str = ""
    default: bool = False
    source: str = ""
    extra: dict[str, Any] = field(default_factory=dict)


class PromptTemplates:
    """All templates of a folder, looked up by id across files."""

    def __init__(self, directory: str | Path = TEMPLATE_DIR) -> None:
        self.directory = Path(directory)
        self.by_id: dict[str, PromptTemplate] = {}
        self.by_file: dict[str, list[PromptTemplate]] = {}
        if not self.directory.is_dir():
            raise TemplateError(f"{self.directory}: prompt template folder not found")
        for path in sorted(self.directory.glob("*.yaml")):
            self._load(path)

    def _load(self, path: Path) -> None:
        try:
            items = yaml.safe_load(path.read_text(encoding="utf-8")) or []
        except yaml.YAMLError as exc:
            raise TemplateError(f"{path}: invalid YAML: {exc}") from None
        if not isinstance(items, list):
            raise TemplateError(f"{path}: expected a list of templates, got {type(items).__name__}")
        out = []
        for i, item in enumerate(items):
            if not isinstance(item, dict) or not isinstance(item.get("id"), str) or not item["id"]:
                raise TemplateError(f"{path}: template #{i + 1} has no string 'id'")
            known = {"id", "content", "user", "name", "description", "default"}
            t = PromptTemplate(
                id=item["id"],
                content=str(item.get("content") or ""),
                user=str(item.get("user") or ""),
                name=str(item.get("name") or ""),
                description=str(item.get("description") or ""),
                default=bool(item.get("default", False)),
                source=path.name,
                extra={k: v for k, v in item.items() if k not in known},
            )
            if t.id in self.by_id:
                raise TemplateError(f"{path}: duplicate template id '{t.id}' (also in {self.by_id[t.id].source})")
            self.by_id[t.id] = t
            out.append(t)
        self.by_file[path.stem] = out

    def get(self, template_id: str) -> PromptTemplate:
        try:
            return self.by_id[template_id]
        except KeyError:
            raise TemplateError(
                f"unknown prompt template id '{template_id}' (known: {', '.join(sorted(self.by_id))})"
            ) from None

    def text(self, template_id: str) -> str:
        return self.get(template_id).content

    def intent_prompts(self) -> dict[str, str]:
        return {t.id: t.content for t in self.by_file.get("intent_prompts", [])}

    def resolve(self, template_id: str, overrides: Mapping[str, object] | None = None, part: str = "content") -> str:
        """The text of ``template_id`` with agent-level overrides applied (spec §3.2.4, §10).

        ``overrides`` maps a template id to either a string (replacing ``content``) or a mapping
        with ``content`` and/or ``user``. A non-blank override wins, as the agent's prompts do
        when non-empty; a blank one falls back to the file. An id that only the overrides know is
        fine (an agent's own prompt); an id known nowhere raises :class:`TemplateError`.
        """
        if part not in ("content", "user"):
            raise TemplateError(f"template part must be 'content' or 'user', got {part!r}")
        override = (overrides or {}).get(template_id)
        if isinstance(override, Mapping):
            override = override.get(part)
        elif part != "content":
            override = None
        if override is not None and not isinstance(override, str):
            raise TemplateError(
                f"override for template '{template_id}' ({part}) must be a string, got {type(override).__name__}"
            )
        if override and override.strip():
            return override
        if template_id not in self.by_id and overrides and template_id in overrides:
            return ""  # the agent defines this prompt itself, and left this part blank
        t = self.get(template_id)
        return t.content if part == "content" else t.user

    def placeholders(self, template_id: str) -> set[str]:
        """The ``{{names}}`` used by a template's content and user text."""
        t = self.get(template_id)
        return set(_PLACEHOLDER.findall(t.content)) | set(_PLACEHOLDER.findall(t.user))


_DEFAULT: PromptTemplates | None = None


def default_templates() -> PromptTemplates:
    """The repository's ``config/prompt_templates`` (loaded once)."""
    global _DEFAULT
    if _DEFAULT is None:
        _DEFAULT = PromptTemplates()
    return _DEFAULT


def resolve(template_id: str, overrides: Mapping[str, object] | None = None, part: str = "content") -> str:
    """:meth:`PromptTemplates.resolve` on the default templates."""
    return default_templates().resolve(template_id, overrides, part)
