"""Who waits for a pristine run, and who pays for it: a line per client group, served
in turn, each group capped and charged for the pristine time it asked for.

A pristine run (backend/app/trust/confirm.py) costs a fresh jail and up to the request's
``timeout_s``; whoever asks for one spends the server's time. So, as runs are
(backend/app/tenancy/admission.py), pristine runs are held to the client group (an address,
IPv6 /56, or an API token: ``turns.group_of``) whose request asked:

- **a line per group, served in turn**: the groups with a key waiting take turns,
  one key each, a group that was served going to the back; one group's hundred keys
  wait behind one key of every other group, never in front of them.
- **one place at a time per group**: a group never holds more than one pristine run
  at once, so with ``pristine_concurrency`` of 2 or more, one group flooding the line
  cannot keep another's key from starting at once.
- **a cap per group** (``pristine_per_group``: its keys waiting and running
  together): past it, its asks are refused (the request runs as it would have; its
  key is asked again when someone reads it again). Nobody else's key is dropped.
- **a budget of pristine seconds per group** (``pristine_budget_s``, refilled at
  ``pristine_refill_per_minute_s``): each pristine run's wall time is charged to the
  group whose turn started it; a group in debt is refused new asks and its waiting
  keys wait until it is out of debt. Code that makes its pristine runs slow pays for
  them out of its own group's budget.
- **shared asks**: a key several groups asked for waits in each of their lines and
  starts at the first of those turns (charged to that group), so a client that asks
  for a victim's key first cannot hold it behind its own line.

The total waiting is bounded (``pristine_queue`` keys): past it new asks are refused,
never an older one dropped.
"""

from __future__ import annotations

import time
from collections import Counter, OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Generic, TypeVar

J = TypeVar("J")

#: Groups whose budget is remembered (least recently charged forgotten first: a
#: forgotten group starts again with a full budget, the price of a bounded map).
MAX_BUDGETS = 100_000


@dataclass
class _Budget:
    seconds: float
    updated: float


class TimeBudget:
    """Seconds of pristine time per group: ``burst_s`` at most, refilled at
    ``per_minute_s`` a minute; a charge may take it below zero (a debt)."""

    def __init__(
        self, burst_s: float, per_minute_s: float, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._burst = burst_s
        self._rate = per_minute_s / 60.0
        self._clock = clock
        self._groups: OrderedDict[str, _Budget] = OrderedDict()

    def left(self, group: str) -> float:
        """Seconds the group may still spend (below 0: its debt)."""
        budget = self._groups.get(group)
        if budget is None:
            return self._burst
        now = self._clock()
        return min(self._burst, budget.seconds + (now - budget.updated) * self._rate)

    def charge(self, group: str, seconds: float) -> None:
        now = self._clock()
        left = self.left(group) - seconds
        self._groups[group] = _Budget(left, now)
        self._groups.move_to_end(group)
        while len(self._groups) > MAX_BUDGETS:
            self._groups.popitem(last=False)


@dataclass
class Entry(Generic[J]):
    """One key waiting or running: its job, the groups that asked for it (in the
    order they asked), and the group it was charged to once started."""

    job: J
    askers: list[str] = field(default_factory=list)
    charged: str | None = None


class PristineLines(Generic[J]):
    """The lines (see the module's docstring). ``J`` is the caller's job; keys are
    cache keys."""

    def __init__(self, per_group: int, max_waiting: int, budget: TimeBudget) -> None:
        self.per_group = per_group
        self.max_waiting = max_waiting
        self.budget = budget
        self._entries: dict[str, Entry[J]] = {}
        #: group -> its waiting keys, oldest first; the groups in the order they take turns
        self._lines: OrderedDict[str, OrderedDict[str, None]] = OrderedDict()
        self._running: Counter[str] = Counter()  # group -> runs charged to it now
        self._waiting = 0
        self.refused: Counter[str] = Counter()  # why asks were refused, for stats()
        self.last_refusal: str | None = None  # why the last ask was refused (None: it was not)

    # --- what is where ------------------------------------------------------------
    @property
    def waiting(self) -> int:
        return self._waiting

    @property
    def running(self) -> int:
        return sum(self._running.values())

    def entry(self, key: str) -> Entry[J] | None:
        return self._entries.get(key)

    def started(self, key: str) -> bool:
        entry = self._entries.get(key)
        return entry is not None and entry.charged is not None

    def held_by(self, group: str) -> int:
        """Keys of ``group`` waiting, and runs charged to it."""
        line = self._lines.get(group)
        return (len(line) if line is not None else 0) + self._running[group]

    def jobs(self) -> list[J]:
        return [entry.job for entry in self._entries.values()]

    # --- asking -------------------------------------------------------------------
    def ask(self, key: str, group: str, make: Callable[[], J]) -> bool:
        """Put ``key`` in ``group``'s line (its job made by ``make`` if it is new);
        True when it waits or runs now, False when refused (the group's cap or
        budget, or the lines are full)."""
        entry = self._entries.get(key)
        self.last_refusal = None
        if entry is not None and (entry.charged is not None or group in entry.askers):
            return True  # running already, or in this group's line already
        why = self.last_refusal = self._refusal(group)
        if why is not None:
            self.refused[why] += 1
            return False
        if entry is None:
            entry = self._entries[key] = Entry(make())
        entry.askers.append(group)
        self._lines.setdefault(group, OrderedDict())[key] = None
        self._waiting += 1
        return True

    def _refusal(self, group: str) -> str | None:
        if self.held_by(group) >= self.per_group:
            return "group_cap"
        if self.budget.left(group) <= 0:
            return "group_budget"
        if self._waiting >= self.max_waiting:
            return "full"
        return None

    # --- serving ------------------------------------------------------------------
    def next(self) -> tuple[str, J] | None:
        """The next key to run, by turns: the first group in line that holds no run now
        and is not in debt gives its oldest key, and goes to the back. The key leaves
        every line it waited in; it is charged to this group."""
        for group, line in self._lines.items():
            if self._running[group] > 0 or self.budget.left(group) <= 0:
                continue
            key = next(iter(line))
            entry = self._entries[key]
            for asker in entry.askers:
                self._leave(asker, key)
            entry.charged = group
            self._running[group] += 1
            if group in self._lines:
                self._lines.move_to_end(group)
            return key, entry.job
        return None

    def put_back(self, key: str) -> None:
        """A started key that found no place after all: first in its group's line again."""
        entry = self._entries[key]
        group = entry.charged
        assert group is not None
        self._stop(group)
        entry.charged = None
        entry.askers = [group]
        line = self._lines.setdefault(group, OrderedDict())
        line[key] = None
        line.move_to_end(key, last=False)
        self._lines.move_to_end(group, last=False)
        self._waiting += 1

    def finish(self, key: str, wall_s: float) -> Entry[J] | None:
        """A started key's run ended after ``wall_s``: charged to its group."""
        entry = self._entries.pop(key, None)
        if entry is not None and entry.charged is not None:
            self._stop(entry.charged)
            self.budget.charge(entry.charged, wall_s)
        return entry

    def clear(self) -> list[J]:
        jobs = self.jobs()
        self._entries.clear()
        self._lines.clear()
        self._running.clear()
        self._waiting = 0
        return jobs

    def _stop(self, group: str) -> None:
        self._running[group] -= 1
        if self._running[group] <= 0:
            del self._running[group]

    def _leave(self, group: str, key: str) -> None:
        line = self._lines.get(group)
        if line is None or key not in line:
            return
        del line[key]
        self._waiting -= 1
        if not line:
            del self._lines[group]
