"""One conversion of results into the plain values a JSON document holds (every stored document goes through it)."""
from __future__ import annotations

import json
import math
import re
import sys
from typing import Any

import numpy as np

from fairdesk.core.progress import yield_point


def jsonable(obj: Any) -> Any:
    """``obj`` as plain Python values that ``json.dumps(..., allow_nan=False)`` writes: dicts (keys as ``str``),
    lists (from lists, tuples and numpy arrays), numpy scalars as ``int``/``float``/``bool``/``str``, and NaN, ±inf,
    ``pd.NA`` and ``pd.NaT`` as ``None``. Anything else (str, int, bool, None, other objects) is returned as is."""
    if isinstance(obj, dict):
        return {_key(k): jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [jsonable(v) for v in obj]
    if isinstance(obj, np.ndarray):
        return jsonable(obj.tolist())
    if isinstance(obj, np.generic):
        obj = obj.item()
    if isinstance(obj, float):
        return float(obj) if math.isfinite(obj) else None
    if obj is None or isinstance(obj, (str, int)):  # the common leaves (bool is an int) are never pandas' NA
        return obj
    pd = sys.modules.get("pandas")  # not loaded (the CLI parser, start-up): no value can be its NA or NaT
    if pd is not None and (obj is pd.NA or obj is pd.NaT):
        return None
    return obj


def _key(k: Any) -> str:
    return k if isinstance(k, str) else str(k)


_DECODER = json.JSONDecoder()
_SPACE = re.compile(r"[ \t\n\r]*")


#: the deepest nesting any JSON FairDesk reads may have (its own documents nest under 12 levels): deeper is refused in
#: one sentence before anything walks it, never a RecursionError
MAX_DEPTH = 100
#: the largest JSON text FairDesk reads from a model folder or a manifest (a project's documents are bounded by the
#: project's own limits)
MAX_JSON_BYTES = 64 * 2 ** 20


def nesting_problem(value: Any, limit: int = MAX_DEPTH) -> str | None:
    """Why ``value`` (parsed JSON) nests too deep to be read (None: it does not), found without recursion."""
    stack = [(value, 1)]
    while stack:
        item, level = stack.pop()
        if level > limit:
            return f"it is nested more than {limit} levels deep"
        if isinstance(item, dict):
            stack.extend((v, level + 1) for v in item.values())
        elif isinstance(item, list):
            stack.extend((v, level + 1) for v in item)
    return None


def loads_checked(text) -> Any:
    """``json.loads(text)`` that raises ValueError, one sentence, for nesting beyond :data:`MAX_DEPTH` (never
    RecursionError) as for any other text that is not a JSON document FairDesk can read."""
    try:
        value = json.loads(text)
    except RecursionError:
        raise ValueError(f"it is nested more than {MAX_DEPTH} levels deep") from None
    problem = nesting_problem(value)
    if problem:
        raise ValueError(problem)
    return value


def read_json_file(path, limit: int = MAX_JSON_BYTES) -> Any:
    """A JSON file (a model folder's config, a manifest) with the size and depth limits: OSError when unreadable,
    ValueError — one sentence — when it is too big, not UTF-8, not JSON or too deep."""
    from pathlib import Path

    with open(Path(path), "rb") as handle:
        data = handle.read(limit + 1)
    if len(data) > limit:
        raise ValueError(f"it is larger than {limit // 2 ** 20} MB, far more than FairDesk writes there")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise ValueError("it is not UTF-8 text") from None
    return loads_checked(text)


def loads_in_pieces(text: str, depth: int = 2) -> Any:
    """``json.loads(text)``, decoded so that no single call holds the interpreter lock for long: the containers of
    the first ``depth`` levels are walked here and each of their members decoded by the standard (C) decoder. The
    demo's 3.3 MB group audit took 0.06–0.35 s in one ``json.loads``, during which no other thread ran Python: the
    GUI's view thread parsing it froze the Qt thread as long; in pieces (depth 2: each record, test or curve on its
    own) it takes about 13% longer and the Qt thread's longest wait fell from the parse time to under 35 ms (no
    library at hand decodes JSON in pieces at the C decoder's speed; ijson is not a dependency). Invalid JSON raises
    :class:`json.JSONDecodeError`, as ``json.loads`` does; nesting deeper than :data:`MAX_DEPTH` a ValueError."""
    if isinstance(text, (bytes, bytearray)):
        text = text.decode(json.detect_encoding(text), "surrogatepass")  # as json.loads reads bytes
    try:
        value, end = _piece(text, _SPACE.match(text, 0).end(), depth)
    except IndexError:
        raise json.JSONDecodeError("Expecting value", text, len(text)) from None
    except RecursionError:
        raise ValueError(f"it is nested more than {MAX_DEPTH} levels deep") from None
    end = _SPACE.match(text, end).end()
    if end != len(text):
        raise json.JSONDecodeError("Extra data", text, end)
    problem = nesting_problem(value)
    if problem:
        raise ValueError(problem)
    return value


def _piece(text: str, i: int, depth: int) -> tuple[Any, int]:
    """The JSON value starting at ``text[i]`` (no space before it) and the index after it."""
    opener = text[i]
    if depth <= 0 or opener not in "[{":
        return _DECODER.raw_decode(text, i)
    closer, is_object = ("}", True) if opener == "{" else ("]", False)
    out: Any = {} if is_object else []
    i = _SPACE.match(text, i + 1).end()
    if text[i] == closer:
        return out, i + 1
    while True:
        yield_point()  # (each member: a GUI reader lets the Qt thread go first, see core.progress.Foreground)
        if is_object:
            if text[i] != '"':
                raise json.JSONDecodeError("Expecting property name enclosed in double quotes", text, i)
            key, i = json.decoder.scanstring(text, i + 1)
            i = _SPACE.match(text, i).end()
            if text[i] != ":":
                raise json.JSONDecodeError("Expecting ':' delimiter", text, i)
            value, i = _piece(text, _SPACE.match(text, i + 1).end(), depth - 1)
            out[key] = value
        else:
            value, i = _piece(text, i, depth - 1)
            out.append(value)
        i = _SPACE.match(text, i).end()
        if text[i] == closer:
            return out, i + 1
        if text[i] != ",":
            raise json.JSONDecodeError("Expecting ',' delimiter", text, i)
        i = _SPACE.match(text, i + 1).end()


class NewerKeysNote(UserWarning):
    """A model folder's file holds keys this version does not know; they were ignored (the message says which)."""


def config_from_dict(cls, d, where: str):
    """An instance of the dataclass ``cls`` from ``d`` (a JSON object read from ``where``, a model folder's file),
    read one way for every such file: keys this version does not know (a newer FairDesk's) are ignored with one
    :class:`NewerKeysNote` naming them; a missing required key or a value of the wrong type raises ValueError, one
    sentence naming ``where`` and the key. Values are checked against the field's annotation (whole numbers, numbers,
    text, yes/no, lists and tuples of them, objects, ``None`` where the annotation allows it); a list stored for a
    tuple field becomes a tuple."""
    import dataclasses
    import typing
    import warnings

    if not isinstance(d, dict):
        raise ValueError(f"{where} must hold a JSON object, not {type(d).__name__}")
    hints = typing.get_type_hints(cls)
    fields = {f.name: f for f in dataclasses.fields(cls) if f.init}
    unknown = [k if len(k) <= 80 else k[:60] + "…" + k[-12:] for k in map(str, d) if k not in fields]
    missing = [n for n, f in fields.items() if n not in d and f.default is dataclasses.MISSING
               and f.default_factory is dataclasses.MISSING]
    if missing:
        raise ValueError(f"{where} lacks the key(s) {', '.join(missing)}")
    values = {name: _typed(d[name], hints.get(name, typing.Any), f"{where}: '{name}'") for name in fields if name in d}
    if unknown:
        shown = ", ".join(unknown[:6]) + (f" and {len(unknown) - 6} more" if len(unknown) > 6 else "")
        warnings.warn(f"Written by a newer FairDesk? {where} holds keys this version does not know, ignored: "
                      f"{shown}.", NewerKeysNote, stacklevel=2)
    return cls(**values)


def _typed(value, hint, label: str):
    """``value`` checked against the type ``hint`` (see :func:`config_from_dict`)."""
    import types
    import typing

    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if hint is typing.Any or hint is object:
        return value
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        problems = []
        for arg in (a for a in args if a is not type(None)):
            try:
                return _typed(value, arg, label)
            except ValueError as err:
                problems.append(err)
        raise problems[0] if problems else ValueError(f"{label} must be empty (null), not {_shown(value)}")
    if hint is bool:
        if isinstance(value, bool):
            return value
        raise ValueError(f"{label} must be true or false, not {_shown(value)}")
    if hint is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        raise ValueError(f"{label} must be a whole number, not {_shown(value)}")
    if hint is float:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
        raise ValueError(f"{label} must be a number, not {_shown(value)}")
    if hint is str:
        if isinstance(value, str):
            return value
        raise ValueError(f"{label} must be text, not {_shown(value)}")
    if hint is dict or origin is dict:
        if isinstance(value, dict):
            return value
        raise ValueError(f"{label} must be a JSON object, not {_shown(value)}")
    if hint in (list, tuple) or origin in (list, tuple):
        if not isinstance(value, (list, tuple)):
            raise ValueError(f"{label} must be a list, not {_shown(value)}")
        if origin is tuple and args and args[-1] is not Ellipsis:
            if len(args) != len(value):
                raise ValueError(f"{label} must be a list of {len(args)} values, not {len(value)}")
            items = [_typed(v, a, label) for v, a in zip(value, args)]
        elif args:
            items = [_typed(v, args[0], label) for v in value]
        else:
            items = list(value)
        return tuple(items) if (hint is tuple or origin is tuple) else items
    return value


def _shown(value) -> str:
    text = json.dumps(value, ensure_ascii=False) if isinstance(value, (dict, list, str, int, float, bool)) or \
        value is None else repr(value)
    return text if len(text) <= 40 else text[:39] + "…"
