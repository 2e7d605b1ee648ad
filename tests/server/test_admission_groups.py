"""The line for a full pool's warm processes is fair by client group, through a real
server (issue 20, item 5): three addresses that open many page sessions each and
send runs without pause cannot keep a new address's first run waiting longer than
two turns. Each client is a loopback address of its own (127.0.0.x: the server
believes no X-Forwarded-For by default, so the TCP peer is the client); the pool is
the fake one with places per tenant (tests/server/fakes.py, SlotFakePool)."""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from backend.app.tenancy.identity import SESSION_COOKIE
from tests.support.live_server import LiveServer

TURN_S = 5.0
SESSIONS = 12  # page sessions per attacking address
NDJSON = {"Accept": "application/x-ndjson"}
CODE = "def f(x):\n    return x * 2\n"
RUN = {"code": CODE, "args": "(1.0,)", "cache": False}


@pytest.fixture
def server(tmp_path: Path) -> Iterator[LiveServer]:
    env = {
        "JAXPLAY_UNSAFE_NO_JAIL": "1",  # the fake pool runs no code at all
        "JAXPLAY_POOL_CAPACITY": "8",
        "JAXPLAY_PROBE_ON_START": "false",
        "JAXPLAY_CACHE_ENABLED": "false",
        "JAXPLAY_RATE_LIMIT_PER_MINUTE": "0",  # the line is the point, not the rate
        "JAXPLAY_TENANT_TURN_S": str(TURN_S),
        "JAXPLAY_TENANT_IDLE_S": "3",  # holders that keep running keep their places
        "JAXPLAY_MAX_WAITING_PER_CLIENT": "2",
    }
    live = LiveServer(
        tmp_path / "groups.sqlite3", "--pool", "tests.server.fakes:SlotFakePool", env=env
    ).start()
    try:
        yield live
    finally:
        live.stop()


def client_at(address: str) -> httpx.Client:
    return httpx.Client(transport=httpx.HTTPTransport(local_address=address), timeout=30)


def sessions(client: httpx.Client, url: str, n: int) -> list[str]:
    """``n`` page sessions, each from ``GET /`` as a browser profile gets one."""
    cookies = []
    for _ in range(n):
        cookies.append(client.get(url + "/").cookies[SESSION_COOKIE])
        client.cookies.clear()
    assert len(set(cookies)) == n
    return cookies


@pytest.mark.slow
def test_many_sessions_of_three_addresses_cannot_hold_back_a_new_one(
    server: LiveServer,
) -> None:
    stop = threading.Event()
    answers: Counter[str] = Counter()
    refused_for_line = threading.Event()  # an attacker was told to wait for a place

    def attack(address: str, cookies: list[str]) -> None:
        with client_at(address) as client:
            n = 0
            while not stop.is_set():
                cookie = cookies[n % len(cookies)]
                n += 1
                r = client.post(
                    server.url + "/api/v1/runs",
                    json=RUN,
                    headers={"Cookie": f"{SESSION_COOKIE}={cookie}"},
                )
                answers[str(r.status_code)] += 1
                if r.status_code != 200:
                    if "waiting" in r.text:
                        refused_for_line.set()
                    time.sleep(0.05)  # never honours Retry-After: just the next session

    threads = []
    for i in (2, 3, 4):
        address = f"127.0.0.{i}"
        with client_at(address) as c:
            cookies = sessions(c, server.url, SESSIONS)
        for _ in range(2):  # the address's two runs at once (max_runs_per_client)
            threads.append(threading.Thread(target=attack, args=(address, cookies)))
    for t in threads:
        t.start()
    try:
        # Every warm process is held and the line is full before the newcomer asks.
        assert refused_for_line.wait(60), answers
        time.sleep(1.0)  # the attackers' sessions have all asked by now
        with client_at("127.0.0.9") as newcomer:
            (cookie,) = sessions(newcomer, server.url, 1)
            asked = time.monotonic()
            tries = 0
            while True:
                tries += 1
                r = newcomer.post(
                    server.url + "/api/v1/runs",
                    json=RUN,
                    headers={"Cookie": f"{SESSION_COOKIE}={cookie}"},
                )
                if r.status_code == 200:
                    break
                assert r.status_code == 503, r.text
                assert r.json()["error"] == "server_busy"
                assert time.monotonic() - asked < 6 * TURN_S, "never served"
                time.sleep(r.json()["retry_after_s"])  # a well-behaved client
            waited = time.monotonic() - asked
    finally:
        stop.set()
        for t in threads:
            t.join(30)
    assert r.json()["events"][-1]["status"] == "ok"
    assert tries > 1  # it did wait in line: the pool was full when it came
    print(f"waited {waited:.1f} s, {tries} tries, {answers}")
    assert waited <= 2 * TURN_S, (waited, tries, answers)
    # The attackers kept running meanwhile: the line turned, it did not just empty.
    assert answers["200"] > 10 and answers["503"] > 10, answers
    assert httpx.get(server.url + "/healthz", timeout=10).status_code == 200


def queue_length(url: str) -> float:
    text = httpx.get(url + "/metrics", timeout=10).text
    lines = [line for line in text.splitlines() if line.startswith("jaxplay_queue_length{")]
    return sum(float(line.rsplit(" ", 1)[1]) for line in lines)


@pytest.mark.slow
def test_a_client_that_leaves_gives_its_place_in_the_queue_up_at_once(tmp_path: Path) -> None:
    """An HTTP run waiting for a worker, whose client disconnects, leaves the queue
    then (not at its queue timeout, 60 s here), and the server stays well."""
    env = {
        "JAXPLAY_POOL_CAPACITY": "1",
        "JAXPLAY_PROBE_ON_START": "false",
        "JAXPLAY_CACHE_ENABLED": "false",
        "JAXPLAY_QUEUE_TIMEOUT_S": "60",
    }
    live = LiveServer(tmp_path / "gone.sqlite3", "--pool", "fake", env=env).start()
    hang = {**RUN, "code": CODE + "# fake: hang\n"}
    try:
        with (
            client_at("127.0.0.2") as holder,
            client_at("127.0.0.3") as leaver,
            holder.stream("POST", live.url + "/api/v1/runs", json=hang, headers=NDJSON) as running,
        ):
            deadline = time.monotonic() + 30
            while "jaxplay_runs_in_flight 1.0" not in httpx.get(live.url + "/metrics").text:
                assert time.monotonic() < deadline
                time.sleep(0.05)
            with pytest.raises(httpx.ReadTimeout):  # waits in line, then hangs up
                leaver.post(live.url + "/api/v1/runs", json=RUN, timeout=2.0)
            left = time.monotonic()
            while queue_length(live.url) > 0:
                assert time.monotonic() - left < 10, "its place was kept"
                time.sleep(0.05)
            metrics = httpx.get(live.url + "/metrics").text
            assert 'jaxplay_rejected_runs_total{reason="gone"} 1.0' in metrics
            assert running.status_code == 200
        assert httpx.get(live.url + "/healthz", timeout=10).status_code == 200
    finally:
        live.stop()
