"""Template lists for the masked-LM probes (METHODS §4): loading, checking and expansion.

The lists are editable JSON resources (``resources/text/``); see ``resources/text/README.md`` for the format.

* :func:`load_bias_templates` reads a log-probability bias template file into a :class:`BiasTemplates`:
  categories (code, name, attribute phrases, expanded templates) and the demographic word groups of the scored slot.
* :func:`expand_braces` expands ``{a|b|c}`` alternatives; ``"@name"`` refers to a shared template set.
* :func:`load_completion_templates` reads the sentence-completion templates (``[RACE]`` slot, ``[MASK]`` spans).

Nothing here imports torch or transformers.
"""
from __future__ import annotations

import hashlib
import itertools
import json
import re
from dataclasses import dataclass, field
from pathlib import Path

from fairdesk.core.errors import DataError

ATTR_SLOT = "[ATTR]"
BIAS_FORMAT = "fairdesk.mlm_bias_templates/1"
COMPLETION_FORMAT = "fairdesk.completion_templates/1"
_BRACES = re.compile(r"\{([^{}]*)\}")


def default_bias_templates_path() -> Path:
    from fairdesk.paths import resources_dir

    return resources_dir() / "text" / "mlm_bias_templates.json"


def default_completion_templates_path() -> Path:
    from fairdesk.paths import resources_dir

    return resources_dir() / "text" / "race_completion_templates.json"


def expand_braces(template: str) -> list[str]:
    """``"a {x|y} b {1|2}"`` -> ``["a x b 1", "a x b 2", "a y b 1", "a y b 2"]`` (order: left brace slowest)."""
    if template.count("{") != template.count("}") or "{" in _BRACES.sub("", template) \
            or "}" in _BRACES.sub("", template):
        raise DataError(f"Template '{template}' has unbalanced or nested braces; write alternatives as "
                        "{a|b|c}, one level deep.")
    parts = _BRACES.split(template)  # literal, alternatives, literal, alternatives, ...
    literals, choices = parts[0::2], [p.split("|") for p in parts[1::2]]
    out = []
    for combo in itertools.product(*choices):
        text = literals[0]
        for alt, lit in zip(combo, literals[1:]):
            text += alt + lit
        out.append(" ".join(text.split()))
    return out


@dataclass(frozen=True)
class Category:
    code: str
    name: str
    attributes: tuple[str, ...]
    templates: tuple[str, ...]  # expanded; slots written ``[<target slot>]`` and ``[ATTR]``

    def pairs(self) -> list[tuple[str, str]]:
        return [(t, a) for t in self.templates for a in self.attributes]


@dataclass(frozen=True)
class BiasTemplates:
    """A checked, expanded template list. ``groups`` keeps the file's order (the first two are compared)."""

    categories: tuple[Category, ...]
    slot: str
    groups: dict[str, tuple[str, ...]]
    source: str = ""
    path: str | None = None
    sha256: str = ""
    title: str = ""
    notes: tuple[str, ...] = field(default_factory=tuple)

    @property
    def slot_token(self) -> str:
        return f"[{self.slot}]"

    def category(self, code: str) -> Category:
        for c in self.categories:
            if c.code == code:
                return c
        raise DataError(f"No category '{code}' in the template list; it has {', '.join(self.codes)}.")

    @property
    def codes(self) -> list[str]:
        return [c.code for c in self.categories]

    def pairs(self) -> list[tuple[str, str, str]]:
        """All (category code, template, attribute) pairs, in file order."""
        return [(c.code, t, a) for c in self.categories for t, a in c.pairs()]

    def counts(self) -> dict[str, int]:
        return {c.code: len(c.templates) * len(c.attributes) for c in self.categories}

    def select(self, codes=None) -> "BiasTemplates":
        if not codes:
            return self
        cats = tuple(self.category(c) for c in codes)
        return BiasTemplates(cats, self.slot, self.groups, self.source, self.path, self.sha256, self.title,
                             self.notes)


def _str_list(value, what: str, where: str) -> list[str]:
    if not isinstance(value, list) or not value or not all(isinstance(v, str) and v.strip() for v in value):
        raise DataError(f"{where}: '{what}' must be a non-empty list of non-empty strings.")
    return [" ".join(v.split()) for v in value]


def _read_json(path: Path, what: str) -> tuple[dict, str]:
    try:
        raw = path.read_bytes()
    except OSError as err:
        raise DataError(f"Cannot read the {what} file {path}: {err.strerror or err}. Choose an existing JSON "
                        "file (the shipped one is resources/text/).") from err
    try:
        data = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise DataError(f"The {what} file {path.name} is not valid JSON ({err}); fix it in a text editor or start "
                        "from the shipped file in resources/text/.") from err
    if not isinstance(data, dict):
        raise DataError(f"The {what} file {path.name} must hold a JSON object.")
    return data, hashlib.sha256(raw).hexdigest()


def parse_bias_templates(data: dict, path: str | None = None, sha256: str = "") -> BiasTemplates:
    where = Path(path).name if path else "template list"
    fmt = data.get("format", BIAS_FORMAT)
    if fmt != BIAS_FORMAT:
        raise DataError(f"{where}: format '{fmt}' is not a bias template list ('{BIAS_FORMAT}').")
    target = data.get("target")
    if not isinstance(target, dict) or not isinstance(target.get("slot"), str) \
            or not isinstance(target.get("groups"), dict):
        raise DataError(f"{where}: needs a 'target' object with a 'slot' name (e.g. GEND) and 'groups' "
                        "(e.g. {\"male\": [...], \"female\": [...]}).")
    slot = target["slot"].strip().strip("[]")
    groups = {str(g): tuple(_str_list(words, f"target.groups.{g}", where)) for g, words in target["groups"].items()}
    if len(groups) < 2:
        raise DataError(f"{where}: the target needs at least two word groups to compare.")
    slot_token = f"[{slot}]"
    sets = data.get("template_sets", {}) or {}
    if not isinstance(sets, dict):
        raise DataError(f"{where}: 'template_sets' must be an object of named template lists.")
    cats_raw = data.get("categories")
    if not isinstance(cats_raw, list) or not cats_raw:
        raise DataError(f"{where}: needs a non-empty 'categories' list.")
    categories, seen = [], set()
    for i, c in enumerate(cats_raw):
        if not isinstance(c, dict) or not isinstance(c.get("code"), str) or not c["code"].strip():
            raise DataError(f"{where}: category #{i + 1} needs a 'code'.")
        code = c["code"].strip()
        if code in seen:
            raise DataError(f"{where}: category code '{code}' appears twice; codes must be unique.")
        seen.add(code)
        attributes = _str_list(c.get("attributes"), f"{code}.attributes", where)
        raw_templates = []
        for t in _str_list(c.get("templates"), f"{code}.templates", where):
            if t.startswith("@"):
                name = t[1:]
                if name not in sets:
                    raise DataError(f"{where}: category {code} refers to template set '@{name}', which is not in "
                                    f"'template_sets' ({', '.join(sets) or 'none'}).")
                raw_templates += _str_list(sets[name], f"template_sets.{name}", where)
            else:
                raw_templates.append(t)
        templates = []
        for t in raw_templates:
            for e in expand_braces(t.replace(f"[{code}]", ATTR_SLOT)):
                if e.count(slot_token) != 1 or e.count(ATTR_SLOT) != 1:
                    raise DataError(f"{where}: template '{e}' (category {code}) must contain {slot_token} once and "
                                    f"the attribute slot {ATTR_SLOT} (or [{code}]) once.")
                if e not in templates:
                    templates.append(e)
        categories.append(Category(code, str(c.get("name", code)), tuple(attributes), tuple(templates)))
    notes = data.get("notes", [])
    return BiasTemplates(tuple(categories), slot, groups, str(data.get("source", "")), str(path) if path else None,
                         sha256, str(data.get("title", "")), tuple(notes) if isinstance(notes, list) else ())


def load_bias_templates(path: str | Path | None = None) -> BiasTemplates:
    """Read and expand a bias template file (default: the shipped ``resources/text/mlm_bias_templates.json``)."""
    path = Path(path) if path else default_bias_templates_path()
    data, sha = _read_json(path, "template")
    return parse_bias_templates(data, str(path), sha)


@dataclass(frozen=True)
class CompletionTemplates:
    templates: tuple[str, ...]
    terms: tuple[str, ...]
    slot: str = "RACE"
    mask: str = "[MASK]"
    source: str = ""
    path: str | None = None
    sha256: str = ""


def parse_completion_templates(data: dict, path: str | None = None, sha256: str = "") -> CompletionTemplates:
    where = Path(path).name if path else "completion templates"
    fmt = data.get("format", COMPLETION_FORMAT)
    if fmt != COMPLETION_FORMAT:
        raise DataError(f"{where}: format '{fmt}' is not a completion template list ('{COMPLETION_FORMAT}').")
    slot = str(data.get("slot", "RACE")).strip().strip("[]")
    mask = str(data.get("mask", "[MASK]"))
    templates = _str_list(data.get("templates"), "templates", where)
    terms = _str_list(data.get("terms"), "terms", where)
    for t in templates:
        if f"[{slot}]" not in t or mask not in t:
            raise DataError(f"{where}: template '{t}' needs the slot [{slot}] and at least one {mask}.")
    return CompletionTemplates(tuple(templates), tuple(terms), slot, mask, str(data.get("source", "")),
                               str(path) if path else None, sha256)


def load_completion_templates(path: str | Path | None = None) -> CompletionTemplates:
    path = Path(path) if path else default_completion_templates_path()
    data, sha = _read_json(path, "completion template")
    return parse_completion_templates(data, str(path), sha)
