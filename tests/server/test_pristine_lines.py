"""The pristine lines (backend/app/trust/pristine_lines.py): a line per client group, served
in turn, one run at a time per group, a cap and a budget of pristine seconds per
group; an ask past them is refused, never someone else's key dropped."""

from __future__ import annotations

from backend.app.trust.pristine_lines import PristineLines, TimeBudget


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def lines(per_group: int = 4, max_waiting: int = 100, burst_s: float = 100.0) -> PristineLines[str]:
    return PristineLines(per_group, max_waiting, TimeBudget(burst_s, 60.0, Clock()))


def ask(pl: PristineLines[str], key: str, group: str) -> bool:
    return pl.ask(key, group, lambda: f"job {key}")


def serve_all(pl: PristineLines[str]) -> list[str]:
    """Run every key to its end, one at a time, in the order the lines give them."""
    order: list[str] = []
    while (picked := pl.next()) is not None:
        order.append(picked[0])
        pl.finish(picked[0], 0.0)
    return order


def test_groups_take_turns_whatever_one_of_them_asked_first() -> None:
    pl = lines()
    for key in ("m1", "m2", "m3", "m4"):
        assert ask(pl, key, "mallory")
    assert ask(pl, "v1", "victim") and ask(pl, "w1", "walter")
    assert serve_all(pl) == ["m1", "v1", "w1", "m2", "m3", "m4"]


def test_a_group_holds_one_run_at_a_time() -> None:
    pl = lines()
    for key in ("m1", "m2"):
        ask(pl, key, "mallory")
    assert pl.next() == ("m1", "job m1")
    assert pl.next() is None  # mallory's next waits for its first to end
    ask(pl, "v1", "victim")
    assert pl.next() == ("v1", "job v1")  # the victim's starts beside it
    pl.finish("m1", 1.0)
    assert pl.next() == ("m2", "job m2")


def test_a_group_s_cap_counts_waiting_and_running_and_refuses_only_it() -> None:
    pl = lines(per_group=2)
    assert ask(pl, "m1", "mallory") and ask(pl, "m2", "mallory")
    assert not ask(pl, "m3", "mallory")
    assert pl.refused["group_cap"] == 1
    assert pl.next() is not None  # m1 runs: still two held
    assert not ask(pl, "m3", "mallory")
    assert ask(pl, "v1", "victim")  # another group is not touched by it
    assert pl.held_by("mallory") == 2 and pl.held_by("victim") == 1
    # asking again for a key already in the group's line costs nothing
    assert ask(pl, "m2", "mallory") and pl.held_by("mallory") == 2


def test_full_lines_refuse_new_asks_and_drop_nobody() -> None:
    pl = lines(per_group=2, max_waiting=4)
    assert ask(pl, "v1", "victim")
    for i in range(10):  # many addresses: every group under its cap, the lines full
        ask(pl, f"m{i}", f"mallory-{i}")
    assert pl.waiting == 4 and pl.refused["full"] == 7
    assert pl.entry("v1") is not None
    assert "v1" in serve_all(pl)


def test_a_key_several_groups_asked_for_starts_at_the_first_of_their_turns() -> None:
    """Mallory asks for the victim's key first, behind her own; the victim's ask puts
    it in the victim's line too, and it starts at the victim's turn (charged to the
    victim), once."""
    pl = lines(per_group=8)
    for key in ("m1", "m2", "m3", "popular"):
        ask(pl, key, "mallory")
    ask(pl, "popular", "victim")
    assert pl.waiting == 5
    order = serve_all(pl)
    assert order == ["m1", "popular", "m2", "m3"]
    assert pl.waiting == 0 and pl.held_by("mallory") == 0


def test_pristine_time_is_charged_to_the_group_that_started_it() -> None:
    clock = Clock()
    pl: PristineLines[str] = PristineLines(8, 100, TimeBudget(60.0, 30.0, clock))
    ask(pl, "m1", "mallory")
    ask(pl, "m2", "mallory")
    key, _ = pl.next() or ("", "")
    pl.finish(key, 75.0)  # a slow pristine run: 15 s of debt
    assert pl.budget.left("mallory") == -15.0
    assert pl.budget.left("victim") == 60.0
    assert not ask(pl, "m3", "mallory") and pl.refused["group_budget"] == 1
    assert pl.next() is None  # its waiting key waits for the debt to be paid
    ask(pl, "v1", "victim")
    assert pl.next() == ("v1", "job v1")
    pl.finish("v1", 1.0)
    clock.now += 31.0  # 15.5 s refilled
    assert pl.budget.left("mallory") > 0
    assert pl.next() == ("m2", "job m2")


def test_a_key_that_found_no_place_is_first_again() -> None:
    pl = lines()
    ask(pl, "m1", "mallory")
    ask(pl, "m2", "mallory")
    ask(pl, "v1", "victim")
    assert pl.next() == ("m1", "job m1")
    pl.put_back("m1")
    assert pl.held_by("mallory") == 2 and pl.waiting == 3
    assert serve_all(pl) == ["m1", "v1", "m2"]
