"""The JSON-schema subset tool arguments are checked against (:func:`schema_error` lists the
keywords), and the coercion of whole floats to declared integers. Standard library only.
"""

from __future__ import annotations

import json
import math


_PY_TYPES = {"object": dict, "array": list, "string": str, "null": type(None)}


def _is_type(value: object, kind: str) -> bool:
    if kind == "boolean":
        return isinstance(value, bool)
    if isinstance(value, bool):
        return False
    if kind == "integer":
        return isinstance(value, int) or (isinstance(value, float) and value.is_integer())
    if kind == "number":
        return isinstance(value, (int, float))
    return isinstance(value, _PY_TYPES.get(kind, object))


def _describe(value: object) -> str:
    kind = {bool: "boolean", int: "integer", float: "number", str: "string", list: "array",
            dict: "object", type(None): "null"}.get(type(value), type(value).__name__)
    shown = json.dumps(value, ensure_ascii=False, default=str)
    return f"{kind} {shown[:40] + '...' if len(shown) > 40 else shown}"


def same_value(a: object, b: object) -> bool:
    """Equal as JSON values: ``True`` is not ``1``."""
    return a == b and isinstance(a, bool) == isinstance(b, bool)


def _object_error(value: dict, schema: dict, path: str) -> str | None:
    props = schema.get("properties", {})
    for key in schema.get("required", ()):
        if key not in value:
            return f"missing required argument '{path}{key}'"
    extra = schema.get("additionalProperties", "properties" not in schema)
    for key, item in value.items():
        if key in props:
            sub = props[key]
        elif isinstance(extra, dict):
            sub = extra
        elif extra:
            continue
        else:
            allowed = ", ".join(props) or "none"
            return f"unknown argument '{path}{key}' (allowed: {allowed})"
        error = schema_error(item, sub, f"{path}{key}")
        if error:
            return error
    return None


def schema_error(value: object, schema: dict, path: str = "") -> str | None:
    """The first way ``value`` breaks a JSON schema, in words an agent can act on; None if none.

    Supports type (incl. lists of types; integer vs number vs boolean), enum, required,
    properties, additionalProperties (unknown keys are rejected wherever properties are
    declared), items, minItems/maxItems, minimum/maximum, minLength/maxLength.

    >>> schema = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
    >>> schema_error({"n": 2}, schema) is None
    True
    >>> schema_error({"n": "2"}, schema)
    'argument \\'n\\' must be integer, got string "2"'
    >>> schema_error({}, schema)
    "missing required argument 'n'"
    """
    name = f"argument '{path}'" if path else "arguments"
    kinds = schema.get("type")
    kinds = [kinds] if isinstance(kinds, str) else list(kinds or ())
    if kinds and not any(_is_type(value, k) for k in kinds):
        return f"{name} must be {' or '.join(kinds)}, got {_describe(value)}"
    if "enum" in schema and not any(same_value(value, e) for e in schema["enum"]):
        options = ", ".join(json.dumps(e, ensure_ascii=False) for e in schema["enum"])
        return f"{name} must be one of {options}, got {_describe(value)}"
    if isinstance(value, dict):
        return _object_error(value, schema, f"{path}." if path else "")
    if isinstance(value, list):
        if len(value) < schema.get("minItems", 0) or len(value) > schema.get("maxItems", math.inf):
            return f"{name} has {len(value)} items, outside the allowed range"
        for i, item in enumerate(value):
            error = schema_error(item, schema.get("items", {}), f"{path}[{i}]")
            if error:
                return error
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        if value < schema.get("minimum", -math.inf) or value > schema.get("maximum", math.inf):
            low, high = schema.get("minimum", "-inf"), schema.get("maximum", "inf")
            return f"{name} must be between {low} and {high}, got {value}"
    if isinstance(value, str):
        if len(value) < schema.get("minLength", 0) or len(value) > schema.get("maxLength", math.inf):
            return f"{name} has length {len(value)}, outside the allowed range"
    return None


def coerce_integers(value: object, schema: dict) -> object:
    """Integral floats (3.0) where the schema says integer become ints; the rest is unchanged."""
    kinds = schema.get("type")
    if isinstance(value, float) and (kinds == "integer" or (isinstance(kinds, list)
                                                             and "integer" in kinds
                                                             and "number" not in kinds)):
        return int(value)
    if isinstance(value, dict):
        props = schema.get("properties", {})
        return {k: coerce_integers(v, props.get(k, {})) for k, v in value.items()}
    if isinstance(value, list):
        return [coerce_integers(v, schema.get("items", {})) for v in value]
    return value
