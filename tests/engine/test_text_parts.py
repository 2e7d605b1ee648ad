"""An IR text over one part's bound arrives whole, in parts, with every line mapped
(sandbox/engine/core/text_parts.py splits, sandbox/protocol/text_parts.py joins):
here, and through a real run."""

from __future__ import annotations

import json

from sandbox.engine.core.text_parts import ir_events, pieces
from sandbox.protocol.events import EVENT_ADAPTER
from sandbox.protocol.limits import MAX_SOURCES, TEXT_PART_CHARS
from sandbox.protocol.lines import parse_event_line
from sandbox.protocol.text_parts import joined


def _valid(events: list[dict]) -> None:
    """Each event is one the protocol takes, as a worker's line would carry it."""
    for event in events:
        line = json.dumps({**event, "pipeline": "main"}).encode()
        assert parse_event_line(line)["type"] == event["type"]
        EVENT_ADAPTER.validate_python({**event, "pipeline": "main"})
        assert len(event["text"]) <= TEXT_PART_CHARS and len(event["sources"]) <= MAX_SOURCES


def test_a_short_text_is_one_event_as_before() -> None:
    events = ir_events("hlo", "a\nb\n", [{"out_line": 2, "line": 5}])
    assert events == [{"type": "hlo", "text": "a\nb\n", "sources": [{"out_line": 2, "line": 5}]}]


def test_a_long_text_comes_whole_in_parts_with_every_line_mapped() -> None:
    # 5 M characters of 60-character lines (a 1,000-layer model's StableHLO is 4.7 M)
    lines = [
        f"  %{i} = stablehlo.tanh %{i - 1} : tensor<32x64xf32>".ljust(59) for i in range(85_000)
    ]
    text = "\n".join(lines) + "\n"
    sources = [{"out_line": n, "line": 3 + n % 7} for n in range(1, len(lines) + 1)]
    events = ir_events("stablehlo", text, sources)
    n = -(-len(text) // (TEXT_PART_CHARS - 256))  # parts of at most a part's bound
    assert [e["type"] for e in events] == ["stablehlo", *["text_part"] * (n - 1)]
    head = events[0]
    assert head["parts"] == n - 1 and head["full_chars"] == len(text)
    # a client that does not join parts is told what follows, in the text itself
    assert head["text"][head["shown_chars"] :] == (
        f"… ({len(text) - head['shown_chars']} more characters follow in {n - 1} text_part events)\n"
    )
    assert [e["part"] for e in events[1:]] == list(range(1, n))
    _valid(events)
    whole, mapped = joined(events)
    assert whole == text and mapped == sources  # every line, once, in order


def test_short_lines_are_split_by_the_source_map_bound() -> None:
    # a jaxpr of tiny lines: fewer characters than one part's bound, more lines than
    # one event's source map may hold
    text = "".join(f"{i % 10}\n" for i in range(130_000))
    sources = [{"out_line": n, "line": 1, "eqn": n - 1} for n in range(1, 130_001)]
    events = ir_events("jaxpr", text, sources)
    assert len(text) < TEXT_PART_CHARS and len(events) == 2
    _valid(events)
    assert joined(events) == (text, sources)


def test_a_line_longer_than_a_part_is_cut_inside_and_mapped_where_it_starts() -> None:
    text = "head\n" + "x" * (TEXT_PART_CHARS + 10) + "\ntail"
    sources = [{"out_line": 1, "line": 1}, {"out_line": 2, "line": 2}, {"out_line": 3, "line": 3}]
    events = ir_events("hlo", text, sources)
    _valid(events)
    assert joined(events) == (text, sources)
    # the long line: mapped in the part it starts in, not in the one it ends in
    assert [[s["out_line"] for s in e["sources"]] for e in events] == [[1], [2], [3]]


def test_pieces_cover_the_text_in_order() -> None:
    text = "ab\ncd\nef\n"
    assert pieces(text, 4, 10) == [(0, 3), (3, 6), (6, 9)]
    assert pieces(text, 100, 1) == [(0, 3), (3, 6), (6, 9)]
    assert pieces("abcdef", 4, 10) == [(0, 4), (4, 6)]


def test_a_jaxpr_over_one_parts_bound_arrives_whole_through_a_run(run) -> None:
    # 6,000 equations on a rank-12 array: a jaxpr of 0.43 M characters
    code = "def f(x):\n    for _ in range(6_000):\n        x = x * 1.0001\n    return x\n"
    request = {"code": code, "args": "jnp.ones((1,) * 12)", "outputs": ["jaxpr"]}
    events = run({**request, "timeout_s": 120})
    assert events[-1]["status"] == "ok", events[-1]
    ir = [e for e in events if e["type"] in ("jaxpr", "text_part")]
    assert ir[0]["type"] == "jaxpr" and ir[0]["parts"] == len(ir) - 1 >= 1
    text, sources = joined(ir)
    assert len(text) == ir[0]["full_chars"] > TEXT_PART_CHARS
    assert text.startswith("{ lambda ; a:f32[1,1,1,1,1,1,1,1,1,1,1,1]. let")
    assert text.rstrip().endswith("}")
    equations = [n for n, line in enumerate(text.split("\n"), 1) if " = mul " in line]
    assert len(equations) == 6_000
    # every equation's line is mapped, to the line of the code that made it
    assert {s["out_line"]: s["line"] for s in sources if s["out_line"] in set(equations)} == {
        n: 3 for n in equations
    }
