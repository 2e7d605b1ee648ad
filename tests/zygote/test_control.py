"""The control messages between the pool and a zygote (sandbox/zygote/control.py):
each kind survives encode and decode unchanged; anything else is refused, by name."""

from __future__ import annotations

import json

import pytest

from sandbox.zygote.control import (
    MAX_BYTES,
    VERSION,
    ControlError,
    Exited,
    Keep,
    Kept,
    KillOrder,
    Order,
    Ready,
    Report,
    RunOrder,
    Started,
    Warm,
    decode_order,
    decode_report,
    encode,
)

WORKER = {"backend": "cpu", "platform": "cpu", "devices": 1, "jax_version": "0.10.2"}

ORDERS: list[Order] = [
    RunOrder(warm=True),
    RunOrder(warm=False, keep=Keep(runs=20, rss_kib=786432)),
    KillOrder(),
]
REPORTS: list[Report] = [
    Ready(
        version=VERSION,
        ms=812.5,
        rss_kib=180000,
        threads=1,
        compile_cache=True,
        identity_check="c",
        warm=True,
        worker=WORKER,
        platforms="cpu",
    ),
    Ready(version=VERSION),  # no warm child in time: no worker yet
    Warm(),
    Warm(worker=WORKER),
    Started(pid=17, warm=True, reused=3),
    Exited(status=0, clean=True, judging=True),
    Exited(status=None, clean=False),  # no status: read as the safe value
    Exited(status=-9, clean=True),
    Kept(kept=True),
    Kept(kept=False, why="its umask changed"),
]


@pytest.mark.parametrize("order", ORDERS, ids=repr)
def test_an_order_survives_encode_and_decode(order: Order) -> None:
    data = encode(order)
    assert len(data) <= MAX_BYTES
    assert decode_order(data) == order


@pytest.mark.parametrize("report", REPORTS, ids=repr)
def test_a_report_survives_encode_and_decode(report: Report) -> None:
    data = encode(report)
    assert len(data) <= MAX_BYTES
    assert decode_report(data) == report


def test_the_wire_form_is_a_json_object_with_its_op() -> None:
    assert json.loads(encode(KillOrder())) == {"op": "kill"}
    assert json.loads(encode(RunOrder(warm=True, keep=Keep(runs=2, rss_kib=1)))) == {
        "op": "run",
        "warm": True,
        "keep": {"runs": 2, "rss_kib": 1},
    }
    assert json.loads(encode(Exited(status=3, clean=True))) == {
        "op": "exited",
        "status": 3,
        "clean": True,
        "judging": False,
    }


def test_a_hello_of_another_version_is_refused_saying_both_versions() -> None:
    data = json.dumps({"op": "ready", "version": VERSION + 1, "warm": True}).encode()
    with pytest.raises(ControlError, match=f"control version {VERSION + 1}, this pool {VERSION}"):
        decode_report(data)
    with pytest.raises(ControlError, match="control version None"):
        decode_report(b'{"op": "ready"}')  # a zygote from before the version


@pytest.mark.parametrize("op", ["hello", "run", "kill", "READY", ""])
def test_an_unknown_report_is_refused_by_name(op: str) -> None:
    with pytest.raises(ControlError, match=f"an unknown control report {op!r}"):
        decode_report(json.dumps({"op": op}).encode())


@pytest.mark.parametrize("op", ["ready", "exited", "stop", "Kill"])
def test_an_unknown_order_is_refused_by_name(op: str) -> None:
    with pytest.raises(ControlError, match=f"an unknown control order {op!r}"):
        decode_order(json.dumps({"op": op, "warm": True}).encode())


@pytest.mark.parametrize(
    ("data", "why"),
    [
        (b"", "not JSON"),
        (b"{", "not JSON"),
        (b"[1, 2]", "without an op"),
        (b'{"status": 0}', "without an op"),
        (b'{"op": 3}', "without an op"),
    ],
)
def test_what_is_not_a_message_is_refused(data: bytes, why: str) -> None:
    with pytest.raises(ControlError, match=why):
        decode_report(data)
    with pytest.raises(ControlError, match=why):
        decode_order(data)


def test_fields_of_the_wrong_type_read_as_the_safe_value() -> None:
    exited = decode_report(b'{"op": "exited", "status": true, "clean": 1, "judging": "yes"}')
    assert exited == Exited(status=None, clean=False, judging=False)
    kept = decode_report(b'{"op": "kept", "kept": "true", "why": 5}')
    assert kept == Kept(kept=False, why="")
    warm = decode_report(b'{"op": "warm", "worker": ["cpu"]}')
    assert warm == Warm(worker=None)
    run = decode_order(b'{"op": "run", "warm": 1, "keep": {"runs": "20", "rss_kib": 1}}')
    assert run == RunOrder(warm=False, keep=None)


def test_the_child_words_round_trip() -> None:
    from sandbox.zygote import control

    assert control.run_token(control.run_word(b"abc123")) == b"abc123"
    assert control.run_word(None) == control.ONCE
    assert control.run_token(control.ONCE) is None
    assert control.run_token(control.HURRY) is None
    described = b'{"backend": "cpu"}'
    assert control.is_warm(control.warm_word(described))
    assert control.warm_description(control.warm_word(described)) == described
    assert control.warm_word(None) == control.WARM
    assert control.warm_description(control.WARM) is None
    too_long = b"x" * control.MAX_WARM_BYTES
    assert control.warm_word(too_long) == control.WARM
    assert not control.is_warm(control.BASE)
    assert control.warm_description(b"warmth {}") is None
    assert json.loads(control.child_report("t1", code=0)) == {"token": "t1", "code": 0}
