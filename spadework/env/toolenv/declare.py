"""A tool's declaration made whole: the JSON schema its arguments are checked against, completed
from the ``tool_<name>`` method that runs it (:func:`parameters_for`), its one-line signature
and an example call a small agent can copy. Standard library only (part of the sandbox's
``toolenv`` kit, see :mod:`spadework.env.toolenv`).
"""

from __future__ import annotations

import json
from collections.abc import Callable

#: Python annotations (objects or, under ``from __future__ import annotations``, their names)
#: and the JSON type each stands for, for parameters a declaration leaves out.
_ANNOTATION_TYPES = {int: "integer", float: "number", str: "string", bool: "boolean",
                     list: "array", dict: "object"}
_ANNOTATION_TYPES.update({t.__name__: k for t, k in list(_ANNOTATION_TYPES.items())})


def _method_parameters(method: Callable) -> tuple[list[str], set[str], dict[str, dict], bool]:
    """A tool method's argument names (``self`` left out), which of them are required, a schema
    per name from its annotation or default (``{}`` when neither says), and whether it takes
    ``**kwargs``. Read from the code object: ``inspect`` is not among the sandbox's modules."""
    fn = getattr(method, "__func__", method)
    code = fn.__code__
    positional = list(code.co_varnames[:code.co_argcount])
    keyword = list(code.co_varnames[code.co_argcount:code.co_argcount + code.co_kwonlyargcount])
    if positional and hasattr(method, "__self__"):
        positional = positional[1:]
    defaults = dict(zip(positional[len(positional) - len(fn.__defaults__ or ()):],
                        fn.__defaults__ or (), strict=True))
    defaults.update(fn.__kwdefaults__ or {})
    names = positional + keyword
    notes = getattr(fn, "__annotations__", {})
    schemas = {}
    for n in names:
        kind = _ANNOTATION_TYPES.get(notes.get(n))
        if kind is None and defaults.get(n) is not None:
            kind = _ANNOTATION_TYPES.get(type(defaults[n]))
        schemas[n] = {"type": kind} if kind else {}
    return names, {n for n in names if n not in defaults}, schemas, bool(code.co_flags & 0x08)


def parameters_for(name: str, raw: object, method: Callable) -> dict:
    """The JSON schema of type object a tool's arguments are checked against, from what its
    declaration gave as ``parameters`` and the method ``tool_<name>`` that runs it:

    * an object schema is kept, and an argument the method requires but the schema leaves out is
      added as required (typed from its annotation), so a call the schema allows cannot crash
      the method; a schema argument the method does not take is a TypeError naming both;
    * none or ``{}``: the method's arguments, required unless they have a default;
    * the schema of one value (``{"type": "integer", "minimum": 1}``) for a method of one
      argument: that argument's schema;
    * a map of argument schemas without ``"type"`` (``{"item": {"type": "string"}}``): the
      properties of an object schema.

    The last three were 3 of 8 rejections of the 1.5B designer's held-out tool modules
    (``benchmarks/designer_validity.py --setting tool-use``, docs/results.md): the method said
    what the arguments were, the declaration said it another way.

    >>> def tool_use(self, item: str, units: int = 1): ...
    >>> parameters_for("use", {}, tool_use.__get__(object()))
    {'type': 'object', 'properties': {'item': {'type': 'string'}, 'units': {'type': 'integer'}}, 'required': ['item']}
    >>> parameters_for("use", {"type": "string", "enum": ["a"]}, (lambda self, item: 0).__get__(1))
    {'type': 'object', 'properties': {'item': {'type': 'string', 'enum': ['a']}}, 'required': ['item']}
    """
    if raw is not None and not isinstance(raw, dict):
        raise TypeError(f"tool {name!r}: parameters must be a JSON schema of type object, "
                        f"got {type(raw).__name__}")
    names, required, derived, open_ended = _method_parameters(method)
    params = dict(raw or {})
    if params.get("type", "object") != "object" or ("type" not in params and "enum" in params):
        if len(names) != 1:
            raise TypeError(f"tool {name!r}: parameters must be a JSON schema of type object "
                            f"with one property per argument of tool_{name}({', '.join(names)})")
        params = {"type": "object", "properties": {names[0]: params},
                  "required": [names[0]] if names[0] in required else []}
    elif "type" not in params and "properties" not in params and params:
        if not all(isinstance(v, dict) for v in params.values()):
            raise TypeError(f"tool {name!r}: parameters must be a JSON schema of type object")
        params = {"type": "object", "properties": params,
                  "required": [n for n in params if n in required]}
    if not params:  # as the method says; no "required" when none is (as a bare {} read before)
        params = {"type": "object", "properties": derived}
        if required:
            params["required"] = [n for n in names if n in required]
    params.setdefault("type", "object")
    props = dict(params.get("properties") or {})
    unknown = [k for k in props if k not in names]
    if unknown and not open_ended:
        raise TypeError(f"tool {name!r}: its schema has argument(s) {', '.join(map(repr, unknown))} "
                        f"but the method is tool_{name}({', '.join(names)})")
    missing = [n for n in names if n in required and n not in props]
    for n in missing:
        props[n] = derived[n]
    params["properties"] = props
    if missing:
        params["required"] = [*params.get("required", ()), *missing]
    return params


def declarations(env: object) -> dict[str, dict]:
    """The tools ``env.declare_tools()`` declares, normalised and checked against the
    ``tool_<name>`` methods of ``env`` that implement them (:func:`parameters_for`)."""
    out = {}
    declared = env.declare_tools()
    if not isinstance(declared, dict):
        raise TypeError("declare_tools() must return a dict {name: {\"description\": str, "
                        "\"parameters\": JSON schema object}}")
    for name, decl in declared.items():
        method = getattr(env, f"tool_{name}", None)
        if not callable(method):
            raise TypeError(f"tool {name!r} is declared but method tool_{name} is missing")
        if not isinstance(decl, dict):
            raise TypeError(f"tool {name!r}: declare it as {{\"description\": str, "
                            "\"parameters\": JSON schema object}")
        out[name] = {"description": str(decl.get("description", "")),
                     "parameters": parameters_for(name, decl.get("parameters"), method)}
    return out


def tool_signature(name: str, parameters: object) -> str:
    """A tool's arguments on one line, ``name(arg: type, opt?: type)``, enums written as their
    values: what ToolEnv's observations list and what a host lists when the chat template does
    not get the schemas (``spadework.play_messages.tool_lines``). Tolerates any JSON.

    >>> tool_signature("find", {"required": ["id"], "properties": {
    ...     "id": {"type": "string"}, "kind": {"enum": ["a", "b"]}, "n": {"type": ["integer", "null"]}}})
    'find(id: string, kind?: "a"|"b", n?: integer|null)'
    """
    params = parameters if isinstance(parameters, dict) else {}
    required = set(params.get("required") or ())
    properties = params.get("properties")
    fields = []
    for key, sub in (properties if isinstance(properties, dict) else {}).items():
        sub = sub if isinstance(sub, dict) else {}
        kind = ("|".join(json.dumps(e) for e in sub["enum"]) if "enum" in sub
                else sub.get("type", "any"))
        kind = "|".join(map(str, kind)) if isinstance(kind, list) else kind
        fields.append(f"{key}{'' if key in required else '?'}: {kind}")
    return f"{name}({', '.join(fields)})"


def one_line_call(name: str, arguments: dict) -> str:
    """One call in the tagged reply format, on one line."""
    return "<tool_call>" + json.dumps({"name": name, "arguments": arguments}) + "</tool_call>"


def example_value(schema: dict) -> object:
    """A value the schema accepts, for :meth:`~spadework.env.toolenv.base.ToolEnv.example_call`, or None when none is
    obvious (an object, or a string with no ``e.g.`` in its description).

    >>> [example_value(s) for s in ({"enum": ["b", "a"]}, {"type": "integer", "minimum": 3},
    ...     {"type": "string", "description": "a city, e.g. Lyon"}, {"type": "string"})]
    ['b', 3, 'Lyon', None]
    """
    if schema.get("enum"):
        return schema["enum"][0]
    kind = schema.get("type")
    if kind in ("integer", "number"):
        low = schema.get("minimum", 1)
        return low if isinstance(low, (int, float)) and not isinstance(low, bool) else 1
    if kind == "boolean":
        return True
    if kind == "array":
        item = example_value(schema.get("items", {}))
        return None if item is None else [item]
    if kind == "string" or kind is None:
        described = str(schema.get("description", ""))
        if "e.g." in described:
            value = described.split("e.g.", 1)[1].strip().split()[0].strip(",.;:)\"'")
            return value or None
    return None


def first_fillable_call(declared: dict[str, dict]) -> str:
    """A call of the first tool of ``declared`` (normalised, :func:`declarations`) whose
    required arguments :func:`example_value` can fill, else of the first tool without them."""
    for name, decl in declared.items():
        params = decl["parameters"]
        filled = {k: example_value(params["properties"].get(k, {}))
                  for k in params.get("required", ())}
        if all(v is not None for v in filled.values()):
            return one_line_call(name, filled)
    return one_line_call(next(iter(declared), "tool"), {})
