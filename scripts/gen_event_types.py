"""The events' JSON Schema and the page's types, generated from sandbox/protocol/.

    python scripts/gen_event_types.py           write docs/events.schema.json,
                                                frontend/src/generated/events.ts and
                                                frontend/src/generated/request.ts
    python scripts/gen_event_types.py --check   fail (exit 1) if either differs from
                                                what the models generate (CI: the test
                                                tests/protocol/test_event_schema.py runs this)

The page validates every event with zod (``zod/mini``); its schemas are made here
from the JSON Schema, so the page's idea of an event is the server's, bounds and
all, and never a second copy kept by hand. The run request the page sends is typed
the same way (``request.ts``): sandbox/protocol/requests.py's ``RunRequest`` (what a snippet
stores) and backend/app/core/wire.py's ``RunBody`` (what a run sends: the same plus
``cache``), with the enums the page narrows its input to (``TransformName``,
``Output``, ``Backend``) named as the protocol names them. The backend never imports
JAX, so importing its wire models here is cheap. Only the JSON Schema the models
use is translated (objects, arrays, strings, numbers, enums, ``anyOf``, ``$ref``);
anything else stops the script with the keyword it does not know.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import typing
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from pydantic.json_schema import models_json_schema  # noqa: E402

from backend.app.core.wire import RunBody  # noqa: E402
from sandbox.protocol.events import EVENT_MODELS, event_json_schema  # noqa: E402
from sandbox.protocol.gpu_target_request import NOT_FOR_GPU_TARGET  # noqa: E402
from sandbox.protocol.requests import Backend, RunRequest, TransformName  # noqa: E402
from sandbox.protocol.sharding_request import TOPOLOGY_OUTPUTS  # noqa: E402
from sandbox.protocol.vocabulary import DOC_URL_PREFIXES, Output  # noqa: E402

SCHEMA_PATH = ROOT / "docs" / "events.schema.json"
TS_PATH = ROOT / "frontend" / "src" / "generated" / "events.ts"
REQUEST_TS_PATH = ROOT / "frontend" / "src" / "generated" / "request.ts"
#: integers outside this range are plain numbers in JavaScript
SAFE_INT = 2**53 - 1
#: keywords that say nothing a validator checks
_IGNORED = {"title", "description", "default", "discriminator"}
#: the request's enums, named in request.ts as the protocol names them (JSON Schema
#: inlines a Literal alias; the page narrows its input with these)
REQUEST_ENUMS = {"TransformName": TransformName, "Output": Output, "Backend": Backend}


class Unsupported(Exception):
    pass


def _checks(schema: dict[str, Any], kind: str) -> list[str]:
    checks = []
    if kind in ("string", "array"):
        if "minLength" in schema or "minItems" in schema:
            checks.append(f"z.minLength({schema.get('minLength', schema.get('minItems'))})")
        if "maxLength" in schema or "maxItems" in schema:
            checks.append(f"z.maxLength({schema.get('maxLength', schema.get('maxItems'))})")
        if "pattern" in schema:
            checks.append(f"z.regex(new RegExp({json.dumps(schema['pattern'])}))")
    if kind == "number":
        if "minimum" in schema:
            checks.append(f"z.gte({schema['minimum']})")
        if "maximum" in schema:
            checks.append(f"z.lte({schema['maximum']})")
        if "exclusiveMinimum" in schema:
            checks.append(f"z.gt({schema['exclusiveMinimum']})")
    if kind == "object" and "maxProperties" in schema:
        n = schema["maxProperties"]
        checks.append(f"z.refine((o) => Object.keys(o).length <= {n})")
    return checks


def _safe_int(schema: dict[str, Any]) -> bool:
    """Whether an integer schema's bounds are within JavaScript's safe integers (then
    ``z.int()`` checks it; past them a plain number is all a page can hold)."""
    return schema.get("minimum", 0) >= -SAFE_INT and schema.get("maximum", 0) <= SAFE_INT


def _what(schema: dict[str, Any]) -> str:
    """What an array ``checked`` refuses should have been, for its error."""
    return f"an array of at most {schema['maxItems']} items, each as the event's schema says"


def _with(expr: str, checks: list[str]) -> str:
    return f"{expr}.check({', '.join(checks)})" if checks else expr


def int_fields(schema: dict[str, Any]) -> str | None:
    """An object whose fields are all bounded integers (a source map's row), as the
    field table of ``intRows`` (frontend/src/util/fast-checks.ts); None for any other schema."""
    if schema.get("type") != "object" or schema.get("additionalProperties") is not None:
        return None
    required = set(schema.get("required", ()))
    fields = []
    for name, prop in schema.get("properties", {}).items():
        options = prop.get("anyOf", [prop])
        ints = [o for o in options if o != {"type": "null"}]
        if len(ints) != 1 or ints[0].get("type") != "integer" or not _safe_int(ints[0]):
            return None
        low, high = ints[0].get("minimum", -SAFE_INT), ints[0].get("maximum", SAFE_INT)
        nullable = len(ints) < len(options)
        fields.append(
            f"{name}: [{low}, {high}, {json.dumps(name in required)}, {json.dumps(nullable)}]"
        )
    return "{ " + ", ".join(fields) + " }" if fields else None


#: arrays that may hold this many items or more are checked by one compiled predicate
#: (``checked``) where their items are JSON scalars
BIG_ARRAY = 256


def predicate(schema: dict[str, Any], x: str, depth: int = 0) -> str | None:
    """A JavaScript expression true exactly when ``x`` passes ``schema``, as zod/mini's
    schema would (finite numbers, safe integers, string lengths in UTF-16 units), for
    schemas of JSON scalars and arrays of them; None for an object or a pattern."""
    if set(schema) - _IGNORED - {
        "type", "anyOf", "enum", "const", "items", "minItems", "maxItems", "maxLength",
        "minimum", "maximum",
    }:  # fmt: skip
        return None
    if "anyOf" in schema:
        options = [predicate(o, x, depth) for o in schema["anyOf"]]
        return None if None in options else "(" + " || ".join(map(str, options)) + ")"
    if "const" in schema:
        return f"{x} === {json.dumps(schema['const'])}"
    if "enum" in schema:
        return "(" + " || ".join(f"{x} === {json.dumps(v)}" for v in schema["enum"]) + ")"
    kind = schema.get("type")
    bounds = [f"{x} >= {schema['minimum']}"] if "minimum" in schema else []
    bounds += [f"{x} <= {schema['maximum']}"] if "maximum" in schema else []
    if kind == "boolean":
        return f'typeof {x} === "boolean"'
    if kind == "null":
        return f"{x} === null"
    if kind == "number":
        return " && ".join([f"Number.isFinite({x})", *bounds])
    if kind == "integer":
        if not _safe_int(schema):
            return f"Number.isFinite({x})"
        return " && ".join([f"Number.isSafeInteger({x})", *bounds])
    if kind == "string":
        size = [f"{x}.length <= {schema['maxLength']}"] if "maxLength" in schema else []
        return " && ".join([f'typeof {x} === "string"', *size])
    if kind == "array":
        y = f"x{depth + 1}"
        item = predicate(schema["items"], y, depth + 1)
        if item is None:
            return None
        size = [f"{x}.length >= {schema['minItems']}"] if "minItems" in schema else []
        size += [f"{x}.length <= {schema['maxItems']}"] if "maxItems" in schema else []
        return " && ".join([f"Array.isArray({x})", *size, f"{x}.every(({y}) => {item})"])
    return None


def zod(
    schema: dict[str, Any],
    enums: dict[tuple[str, ...], str] | None = None,
    int_rows: dict[str, str] | None = None,
    *,
    fast: bool = True,
) -> str:
    """One JSON Schema (as pydantic writes it) as a zod/mini expression; an enum whose
    values are a key of ``enums`` is written as that name. An array of a definition in
    ``int_rows`` (name -> the constant holding its ``int_fields``) is checked by
    ``intRows`` in one loop:
    a big program's source map has tens of thousands of rows, and zod's object schema
    per row held the page's main thread for ~75 ms an event (the same bounds, checked
    in ~1 ms); a big array of JSON scalars likewise by one compiled ``predicate``
    (``checked``). ``fast=False``: plain zod all the way down (a ``checked`` array's
    type)."""
    enums = enums or {}
    int_rows = int_rows or {}

    def sub(inner: dict[str, Any]) -> str:
        return zod(inner, enums, int_rows, fast=fast)

    unknown = set(schema) - _IGNORED - {
        "type", "properties", "required", "items", "anyOf", "enum", "const", "$ref",
        "minLength", "maxLength", "minItems", "maxItems", "pattern", "minimum", "maximum",
        "exclusiveMinimum",
        "patternProperties", "maxProperties", "additionalProperties",
    }  # fmt: skip
    if unknown:
        raise Unsupported(f"JSON Schema keywords {sorted(unknown)}")
    if "$ref" in schema:
        return schema["$ref"].rsplit("/", 1)[1]
    if "anyOf" in schema:
        options = schema["anyOf"]
        rest = [o for o in options if o != {"type": "null"}]
        inner = sub(rest[0]) if len(rest) == 1 else f"z.union([{', '.join(map(sub, rest))}])"
        return f"z.nullable({inner})" if len(rest) < len(options) else inner
    if "const" in schema:
        return f"z.literal({json.dumps(schema['const'])})"
    if "enum" in schema:
        named = enums.get(tuple(schema["enum"]))
        return named or f"z.enum({json.dumps(schema['enum'])})"
    kind = schema.get("type")
    if kind == "string":
        return _with("z.string()", _checks(schema, "string"))
    if kind == "boolean":
        return "z.boolean()"
    if kind == "null":
        return "z.null()"
    if kind == "number":
        return _with("z.number()", _checks(schema, "number"))
    if kind == "integer":
        safe = _safe_int(schema)
        return _with("z.int()" if safe else "z.number()", _checks(schema, "number") if safe else [])
    if kind == "array":
        ref = schema["items"].get("$ref", "").rsplit("/", 1)[-1]
        if fast and ref in int_rows and set(schema) - _IGNORED <= {"type", "items", "maxItems"}:
            limit = schema.get("maxItems", SAFE_INT)
            return f"intRows<z.infer<typeof {ref}>>({int_rows[ref]}, {limit})"
        test = predicate(schema, "x0") if fast and schema.get("maxItems", 0) >= BIG_ARRAY else None
        if test is None:
            return _with(f"z.array({sub(schema['items'])})", _checks(schema, "array"))
        typed = zod(schema, enums, int_rows, fast=False)
        return f"checked({typed}, (x0) => {test}, {json.dumps(_what(schema))})"
    if kind == "object" and "patternProperties" in schema:
        ((pattern, values),) = schema["patternProperties"].items()
        key = _with("z.string()", [f"z.regex(new RegExp({json.dumps(pattern)}))"])
        return _with(f"z.record({key}, {sub(values)})", _checks(schema, "object"))
    extra = schema.get("additionalProperties")
    if kind == "object" and isinstance(extra, dict) and "properties" not in schema:
        return _with(f"z.record(z.string(), {sub(extra)})", _checks(schema, "object"))
    if kind == "object":
        required = set(schema.get("required", ()))
        fields = []
        for name, prop in schema.get("properties", {}).items():
            expr = sub(prop)
            fields.append(f"  {name}: {expr if name in required else f'z.optional({expr})'},")
        # additionalProperties true: the named fields are checked, the others kept;
        # false (extra="forbid"): another field is refused, as the server refuses it
        maker = (
            "z.looseObject" if extra is True else "z.strictObject" if extra is False else "z.object"
        )
        return f"{maker}({{\n" + "\n".join(fields) + "\n})"
    raise Unsupported(f"JSON Schema type {kind!r}")


def _order(defs: dict[str, Any]) -> list[str]:
    """Definitions in an order where each comes after those it refers to."""
    done: list[str] = []

    def visit(name: str) -> None:
        if name in done:
            return
        for ref in _refs(defs[name]):
            visit(ref)
        done.append(name)

    for name in sorted(defs):
        visit(name)
    return done


def _refs(schema: Any) -> list[str]:
    if isinstance(schema, dict):
        own = [schema["$ref"].rsplit("/", 1)[1]] if "$ref" in schema else []
        return own + [r for v in schema.values() for r in _refs(v)]
    if isinstance(schema, list):
        return [r for v in schema for r in _refs(v)]
    return []


def typescript(schema: dict[str, Any]) -> str:
    defs = schema["$defs"]
    out = [
        "// Generated by scripts/gen_event_types.py from docs/events.schema.json (itself",
        "// generated from sandbox/protocol/events.py): do not edit; run the script.",
        'import * as z from "zod/mini";',
        'import { checked, intRows, type IntField } from "../util/fast-checks";',
        "",
        "/** Where an error's `doc_url` may point; the page links to nothing else. */",
        f"export const DOC_URL_PREFIXES = {json.dumps(list(DOC_URL_PREFIXES))} as const;",
        "",
    ]
    tables = {name: f for name, d in defs.items() if (f := int_fields(d)) is not None}
    int_rows = {name: f"{name}Fields" for name in tables}
    for name in _order(defs):
        description = defs[name].get("description")
        if description:
            out.append("/** " + " ".join(description.split()) + " */")
        out.append(f"export const {name} = {zod(defs[name], int_rows=int_rows)};")
        if name in tables:  # its fields once, for every array of it (``intRows``)
            out.append(f"const {int_rows[name]}: Record<string, IntField> = {tables[name]};")
        out.append("")
    by_type = {kind: model.__name__ for kind, model in EVENT_MODELS.items()}
    out.append("/** Each event type's schema, by its `type`. */")
    out.append("export const Events = {")
    out += [f"  {kind}: {name}," for kind, name in by_type.items()]
    out.append("} as const;")
    return "\n".join(out) + "\n"


def request_json_schema() -> dict[str, Any]:
    """The JSON Schema of the requests the page sends: ``RunRequest`` and ``RunBody``
    side by side in one ``$defs`` (they share ``Transform`` and ``MeshSpec``)."""
    _, schema = models_json_schema([(RunRequest, "validation"), (RunBody, "validation")])
    return schema


def request_typescript(schema: dict[str, Any]) -> str:
    """The requests as the page builds them: zod/mini schemas and the type of each."""
    defs = schema["$defs"]
    enums: dict[tuple[str, ...], str] = {}
    out = [
        "// Generated by scripts/gen_event_types.py from sandbox/protocol/requests.py's",
        "// RunRequest and backend/app/core/wire.py's RunBody: do not edit; run the script.",
        'import * as z from "zod/mini";',
        "",
    ]
    for name, alias in REQUEST_ENUMS.items():
        values = typing.get_args(alias)
        enums[values] = name
        out.append(f"/** sandbox.protocol's `{name}`. */")
        out.append(f"export const {name} = z.enum({json.dumps(list(values))});")
        out.append(f"export type {name} = z.infer<typeof {name}>;")
        out.append("")
    # the outputs the deviceless compiles cannot give or are limited to (the page asks
    # for none the server would refuse, and says why)
    limits = [
        ("NOT_FOR_GPU_TARGET", list(NOT_FOR_GPU_TARGET), "what a `gpu_target` run cannot give"),
        ("TOPOLOGY_OUTPUTS", sorted(TOPOLOGY_OUTPUTS), "all a `tpu_topology` run gives"),
    ]
    for name, outputs, says in limits:
        out.append(f"/** sandbox/'s `{name}`: {says}. */")
        out.append(f"export const {name}: readonly Output[] = {json.dumps(outputs)};")
        out.append("")
    models = []
    for name in _order(defs):
        description = defs[name].get("description")
        if description:
            models.append("/** " + " ".join(description.split()) + " */")
        models.append(f"export const {name} = {zod(defs[name], enums)};")
        models.append(f"export type {name} = z.infer<typeof {name}>;")
        models.append("")
    # an enum no field refers to any more (its values changed in one place only)
    used = set(re.findall(r"\b[A-Za-z]+\b", "\n".join(models)))
    if unused := sorted(set(REQUEST_ENUMS) - used):
        raise Unsupported(f"no request field is of the enums {unused}")
    return "\n".join(out + models).rstrip("\n") + "\n"


def generated() -> dict[Path, str]:
    schema = event_json_schema()
    return {
        SCHEMA_PATH: json.dumps(schema, indent=2, ensure_ascii=False) + "\n",
        TS_PATH: typescript(schema),
        REQUEST_TS_PATH: request_typescript(request_json_schema()),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="fail if the files are stale")
    args = parser.parse_args()
    stale = []
    for path, text in generated().items():
        current = path.read_text() if path.exists() else None
        if current == text:
            continue
        if args.check:
            stale.append(str(path.relative_to(ROOT)))
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
            print(f"wrote {path.relative_to(ROOT)}")
    if stale:
        print(
            f"gen_event_types: {', '.join(stale)} differ from sandbox/protocol/'s event "
            "and request models; run python scripts/gen_event_types.py and commit them",
            file=sys.stderr,
        )
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
