"""The events' JSON Schema and the page's types, generated from sandbox/protocol.py.

    python scripts/gen_event_types.py           write docs/events.schema.json,
                                                frontend/src/generated/events.ts and
                                                frontend/src/generated/request.ts
    python scripts/gen_event_types.py --check   fail (exit 1) if either differs from
                                                what the models generate (CI: the test
                                                tests/test_event_schema.py runs this)

The page validates every event with zod (``zod/mini``); its schemas are made here
from the JSON Schema, so the page's idea of an event is the server's, bounds and
all, and never a second copy kept by hand. The run request the page sends is typed
the same way (``request.ts``, from ``RunRequest.model_json_schema()``). Only the JSON Schema the event models
use is translated (objects, arrays, strings, numbers, enums, ``anyOf``, ``$ref``);
anything else stops the script with the keyword it does not know.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from sandbox.protocol import (  # noqa: E402
    DOC_URL_PREFIXES,
    EVENT_MODELS,
    RunRequest,
    event_json_schema,
)

SCHEMA_PATH = ROOT / "docs" / "events.schema.json"
TS_PATH = ROOT / "frontend" / "src" / "generated" / "events.ts"
REQUEST_TS_PATH = ROOT / "frontend" / "src" / "generated" / "request.ts"
#: integers outside this range are plain numbers in JavaScript
SAFE_INT = 2**53 - 1
#: keywords that say nothing a validator checks
_IGNORED = {"title", "description", "default", "discriminator"}


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


def _with(expr: str, checks: list[str]) -> str:
    return f"{expr}.check({', '.join(checks)})" if checks else expr


def zod(schema: dict[str, Any]) -> str:
    """One JSON Schema (as pydantic writes it) as a zod/mini expression."""
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
        inner = zod(rest[0]) if len(rest) == 1 else f"z.union([{', '.join(map(zod, rest))}])"
        return f"z.nullable({inner})" if len(rest) < len(options) else inner
    if "const" in schema:
        return f"z.literal({json.dumps(schema['const'])})"
    if "enum" in schema:
        return f"z.enum({json.dumps(schema['enum'])})"
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
        safe = schema.get("minimum", 0) >= -SAFE_INT and schema.get("maximum", 0) <= SAFE_INT
        return _with("z.int()" if safe else "z.number()", _checks(schema, "number") if safe else [])
    if kind == "array":
        return _with(f"z.array({zod(schema['items'])})", _checks(schema, "array"))
    if kind == "object" and "patternProperties" in schema:
        ((pattern, values),) = schema["patternProperties"].items()
        key = _with("z.string()", [f"z.regex(new RegExp({json.dumps(pattern)}))"])
        return _with(f"z.record({key}, {zod(values)})", _checks(schema, "object"))
    extra = schema.get("additionalProperties")
    if kind == "object" and isinstance(extra, dict) and "properties" not in schema:
        return _with(f"z.record(z.string(), {zod(extra)})", _checks(schema, "object"))
    if kind == "object":
        required = set(schema.get("required", ()))
        fields = []
        for name, prop in schema.get("properties", {}).items():
            expr = zod(prop)
            fields.append(f"  {name}: {expr if name in required else f'z.optional({expr})'},")
        # additionalProperties true: the named fields are checked, the others kept
        maker = "z.looseObject" if extra is True else "z.object"
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
        "// generated from sandbox/protocol.py): do not edit; run the script.",
        'import * as z from "zod/mini";',
        "",
        "/** Where an error's `doc_url` may point; the page links to nothing else. */",
        f"export const DOC_URL_PREFIXES = {json.dumps(list(DOC_URL_PREFIXES))} as const;",
        "",
    ]
    for name in _order(defs):
        description = defs[name].get("description")
        if description:
            out.append("/** " + " ".join(description.split()) + " */")
        out.append(f"export const {name} = {zod(defs[name])};")
        out.append("")
    by_type = {kind: model.__name__ for kind, model in EVENT_MODELS.items()}
    out.append("/** Each event type's schema, by its `type`. */")
    out.append("export const Events = {")
    out += [f"  {kind}: {name}," for kind, name in by_type.items()]
    out.append("} as const;")
    return "\n".join(out) + "\n"


def request_typescript(schema: dict[str, Any]) -> str:
    """The run request as the page builds it: zod/mini schemas and the type of each."""
    defs = schema.get("$defs", {})
    top = {k: v for k, v in schema.items() if k != "$defs"}
    out = [
        "// Generated by scripts/gen_event_types.py from sandbox/protocol.py's RunRequest:",
        "// do not edit; run the script.",
        'import * as z from "zod/mini";',
        "",
    ]
    for name in _order(defs):
        out.append(f"export const {name} = {zod(defs[name])};")
        out.append(f"export type {name} = z.infer<typeof {name}>;")
        out.append("")
    out.append("/** " + " ".join(str(schema.get("description", "A run request.")).split()) + " */")
    out.append(f"export const RunRequest = {zod(top)};")
    out.append("export type RunRequest = z.infer<typeof RunRequest>;")
    return "\n".join(out) + "\n"


def generated() -> dict[Path, str]:
    schema = event_json_schema()
    return {
        SCHEMA_PATH: json.dumps(schema, indent=2, ensure_ascii=False) + "\n",
        TS_PATH: typescript(schema),
        REQUEST_TS_PATH: request_typescript(RunRequest.model_json_schema()),
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
            f"gen_event_types: {', '.join(stale)} differ from sandbox/protocol.py's event "
            "and request models; run python scripts/gen_event_types.py and commit them",
            file=sys.stderr,
        )
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
