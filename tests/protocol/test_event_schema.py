"""Events typed once: the bounded parser, the run's gate, and the generated copies
(docs/events.schema.json and the page's frontend/src/generated/events.ts) that CI
keeps in step with sandbox/protocol/."""

from __future__ import annotations

import ast
import importlib.util
import json
import time
from pathlib import Path
from typing import Any, Literal

import pytest

from backend.app.core.wire import RunBody
from sandbox.protocol.events import EVENT_FIELDS, EVENT_MODELS
from sandbox.protocol.limits import MAX_EVENT_BYTES
from sandbox.protocol.lines import BadEvent, parse_event_line, validate_event
from sandbox.protocol.requests import RunRequest
from sandbox.supervisor.event_gate import EventGate, allowed_stages

ROOT = Path(__file__).resolve().parents[2]


def _generator() -> Any:
    spec = importlib.util.spec_from_file_location("gen", ROOT / "scripts" / "gen_event_types.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_committed_schema_and_page_types_are_generated_from_the_models() -> None:
    for path, text in _generator().generated().items():
        assert path.read_text() == text, (
            f"{path.relative_to(ROOT)} is stale: run python scripts/gen_event_types.py"
        )


def test_the_page_request_types_are_the_snippet_and_run_bodies_with_named_enums() -> None:
    gen = _generator()
    text = gen.request_typescript(gen.request_json_schema())

    def fields(model: str) -> set[str]:
        body = text.split(f"export const {model} = z.strictObject({{\n")[1].split("\n});")[0]
        return {line.split(":")[0].strip() for line in body.splitlines()}

    # RunBody (backend/app/core/wire.py) is what a run sends: the snippet's RunRequest plus cache
    assert fields("RunBody") == set(RunBody.model_fields)
    assert fields("RunRequest") == set(RunRequest.model_fields) == fields("RunBody") - {"cache"}
    # the enums the page narrows its input to are named, and the fields use the names
    for name in ("TransformName", "Output", "Backend"):
        assert f"export const {name} = z.enum([" in text
    assert "  backend: z.optional(Backend)," in text
    assert "  outputs: z.optional(z.array(Output))," in text
    assert "  name: TransformName," in text


def test_only_big_arrays_of_scalars_and_source_maps_get_the_one_loop_checks() -> None:
    """The page's one-loop checks (frontend/src/util/fast-checks.ts) stand in for zod only
    where they check the same thing: what they cannot (an object to strip, a pattern)
    stays zod's; the vitest suite checks what they accept and refuse in the page."""
    gen = _generator()
    number = {"type": "number"}
    assert gen.predicate({"type": "string", "pattern": "^a$"}, "x") is None
    assert gen.predicate({"type": "object", "properties": {}}, "x") is None
    assert gen.predicate(number, "x") == "Number.isFinite(x)"
    assert gen.predicate({"type": "integer", "minimum": 1, "maximum": 9}, "x") == (
        "Number.isSafeInteger(x) && x >= 1 && x <= 9"
    )
    big = {"type": "array", "items": number, "maxItems": 256}
    assert gen.zod(big).startswith("checked(z.array(z.number()).check(z.maxLength(256)), (x0) =>")
    assert gen.zod({**big, "maxItems": 255}) == "z.array(z.number()).check(z.maxLength(255))"
    text = (ROOT / "frontend" / "src" / "generated" / "events.ts").read_text()
    source_maps = [line for line in text.splitlines() if line.strip().startswith("sources:")]
    assert source_maps and all("intRows<z.infer<typeof SourceLine>>" in s for s in source_maps)
    assert "z.array(SourceLine)" not in text


def test_an_enum_no_request_field_uses_stops_the_generator(monkeypatch: pytest.MonkeyPatch) -> None:
    gen = _generator()
    monkeypatch.setitem(gen.REQUEST_ENUMS, "Backend", Literal["cpu", "gpu"])
    with pytest.raises(gen.Unsupported, match="Backend"):
        gen.request_typescript(gen.request_json_schema())


def test_the_schema_names_every_event_and_field() -> None:
    schema = json.loads((ROOT / "docs" / "events.schema.json").read_text())
    assert set(schema["discriminator"]["mapping"]) == set(EVENT_MODELS)
    for kind, fields in EVENT_FIELDS.items():
        props = schema["$defs"][EVENT_MODELS[kind].__name__]["properties"]
        assert set(fields) <= set(props)


def line(obj: Any) -> bytes:
    return json.dumps(obj).encode()


STAGE = {"type": "stage", "stage": "exec", "ms": 1.0}


@pytest.mark.parametrize(
    ("raw", "why"),
    [
        (b"[" * 100_000 + b"]" * 100_000, "nested deeper"),
        (b"[" + b",".join([b"{}"] * 400_000) + b"]", "JSON values"),
        (b'{"type":"stage","stage":"exec","ms":NaN}', "finite"),
        (b'{"type":"stage","stage":"exec","ms":Infinity}', "finite"),
        (b'{"type":"stage","stage":"exec","ms":1e999}', "finite"),
        (b'{"type":"stdout","text":"\\ud800"}', "json_invalid"),
        (b'{"type":"stdout","text":"\xff\xfe"}', "json_invalid"),
        (b"x" * (MAX_EVENT_BYTES + 1), "over"),
        (line({"type": "stage", "stage": "invented", "ms": 1}), "stage.stage"),
        (line({"type": "surprise"}), "union_tag_invalid"),
        (line({"type": "stdout", "text": "x" * 20_000}), "string_too_long"),
        (line({"type": "jaxpr", "text": "", "pipeline": "7"}), "literal_error"),
        (line({"type": "cost", "memory": {"a b c": 1}}), "cost.memory.?"),
        (
            line(
                {
                    "type": "error",
                    "stage": "exec",
                    "kind": "E",
                    "message": "m",
                    "doc_url": "https://docs.jax.dev.evil.example/",
                }
            ),
            "doc_url",
        ),
        (
            line(
                {
                    "type": "value",
                    "repr": "",
                    "tree": [{"path": "", "shape": [], "dtype": "f", "data": [1] * 256}] * 300,
                }
            ),
            "value_error at value",
        ),
    ],
)
def test_the_parser_refuses_before_or_while_it_parses(raw: bytes, why: str) -> None:
    # refused cheaply: the CPU time of this thread (not the wall clock, which a loaded
    # machine stretches); a parse that ran the line's whole cost would take far more
    started = time.thread_time()
    with pytest.raises(BadEvent, match=why.replace("?", r"\?")):
        parse_event_line(raw)
    assert time.thread_time() - started < 2


def test_undeclared_fields_are_dropped_and_strings_inside_do_not_count_as_structure() -> None:
    text = "[" * 50 + "{" * 50 + '"' + "," * 1000
    event = parse_event_line(line({"type": "stdout", "text": text, "evil": {"a": [1]}}))
    assert event == {"type": "stdout", "pipeline": "main", "text": text, "stage": None}
    assert validate_event(event) == event


def _gate(**request: Any) -> EventGate:
    return EventGate(RunRequest(code="", **request), "run1")


WORKER = {"backend": "cpu", "platform": "cpu", "device_kind": "cpu", "devices": 1,
          "jax_version": "1", "jaxlib_version": "1"}  # fmt: skip


def test_the_gate_rebuilds_accepted_and_keeps_done_back() -> None:
    gate = _gate(outputs=["jaxpr"])
    accepted = gate.admit(
        line({"type": "accepted", "run_id": "x", "worker": WORKER, "cached": True}), 5
    )
    assert accepted == {"type": "accepted", "pipeline": "main", "run_id": "run1", "worker": WORKER}
    assert gate.admit(line({"type": "accepted", "run_id": "y", "worker": WORKER}), 5) is None
    done = {"type": "done", "status": "ok", "ms": 1, "reason": ""}
    assert gate.admit(line(done), 5) is None and gate.worker_done is not None
    assert gate.admit(line(done), 5) is None
    assert gate.admit(line(dict(done, reason="visit evil.example")), 5) is None
    assert gate.dropped == 3 and "not the first" in gate.first_refusal


def test_the_gate_passes_only_what_the_request_asked_for_once() -> None:
    gate = _gate(outputs=["jaxpr"], compare=[[{"name": "jit"}]])
    timing = {"type": "timing", "rows": [], "notes": []}
    assert gate.admit(line(timing), 5) is None  # the request has no timing
    assert gate.admit(line({"type": "value", "repr": "", "tree": []}), 5) is None
    assert gate.admit(line({"type": "stage", "stage": "compile", "ms": 1}), 5) is None
    assert gate.admit(line({"type": "stage", "stage": "trace", "ms": 1}), 5) is not None
    assert gate.admit(line({"type": "stage", "stage": "trace", "ms": 1}), 5) is None  # twice
    assert gate.admit(line({"type": "stage", "stage": "trace", "ms": 1, "pipeline": "0"}), 5)
    assert gate.admit(line({"type": "stage", "stage": "exec", "ms": 1, "pipeline": "0"}), 5) is None
    assert gate.admit(line({"type": "stage", "stage": "exec", "ms": 60_000}), 5) is None  # too long
    assert gate.admit(line({"type": "jaxpr", "text": "", "pipeline": "1"}), 5) is None  # no such
    assert gate.admit(line({"type": "jaxpr", "text": "a"}), 5) is not None
    assert gate.admit(line({"type": "jaxpr", "text": "b"}), 5) is None
    assert gate.dropped == 8


def test_the_stages_a_request_has() -> None:
    assert allowed_stages(RunRequest(code="", outputs=["jaxpr"])) == {"exec", "args", "trace"}
    assert allowed_stages(RunRequest(code="", outputs=["value", "timing"])) == {
        "exec", "args", "lower", "compile", "execute", "timing",
    }  # fmt: skip


# --- done: one maker -------------------------------------------------------------------

DONE_MAKER = ROOT / "sandbox" / "protocol" / "events.py"


def _done_made_by_hand(path: Path) -> list[int]:
    """Lines of ``path`` that build a ``done`` event themselves (a dict or ``dict()``
    with type "done", or a ``["type"] = "done"`` / ``["cached"] = ...`` assignment)."""
    lines = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Dict):
            pairs = zip(node.keys, node.values, strict=True)
            if any(_const(k) == "type" and _const(v) == "done" for k, v in pairs):
                lines.append(node.lineno)
        elif isinstance(node, ast.Call):
            if any(k.arg == "type" and _const(k.value) == "done" for k in node.keywords):
                lines.append(node.lineno)
        elif isinstance(node, ast.Assign):
            for target in node.targets:
                if isinstance(target, ast.Subscript) and (
                    _const(target.slice) == "cached"
                    or (_const(target.slice) == "type" and _const(node.value) == "done")
                ):
                    lines.append(node.lineno)
    return lines


def _const(node: ast.AST | None) -> object:
    return node.value if isinstance(node, ast.Constant) else None


def test_done_has_one_maker() -> None:
    """Every ``done`` (the engine's, the supervisor's, a pool's, the queue's, the
    server's, a cached answer's) is made by ``done_event``: none is built by hand."""
    files = sorted([*(ROOT / "backend").rglob("*.py"), *(ROOT / "sandbox").rglob("*.py")])
    assert DONE_MAKER in files and len(files) > 50
    assert _done_made_by_hand(DONE_MAKER), "the check finds the maker's own dict"
    made = {str(p.relative_to(ROOT)): _done_made_by_hand(p) for p in files if p != DONE_MAKER}
    assert {path: lines for path, lines in made.items() if lines} == {}
