"""XLA's ``*-live-range.txt`` dump of a compiled module (``HloLiveRange::ToString``):
the schedule, each HLO value's live range over it, and the moment XLA calls the peak
with the values live there.

The dump's shape (XLA since 2020, unchanged in form; 0.12's adds each peak value's
cumulative bytes and a breakdown by name stack, not read here)::

    HloLiveRange (max 25):
      InstructionSequence:
        0:params_0__0_.1
        ...
      BufferLiveRange:
        x.1{}:0-25
        ...
      Live ranges at 22 (peak):
        dot{}: 16384 bytes (cumulative: 16384 bytes)
        ...

A value is live at step ``t`` when ``start <= t <= end`` (the rule XLA lists the
peak's values by). XLA picks the peak's step (``ComputePeakMemoryMoment``) with a
sweep that frees a value at ``end + 1`` after adding those that start then, so the
step it names need not be the one where the values live at once add up to most: the
timeline says so when they differ (``timeline.py``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

_HEAD = re.compile(r"^HloLiveRange \(max (\d+)\):")
_STEP = re.compile(r"^    (\d+):(\S+)$")
_RANGE = re.compile(r"^    (\S+?)(\{[\d,]*\})?:(\d+)-(\d+)$")
_PEAK_HEAD = re.compile(r"^  Live ranges at (\d+) \(peak\):")
_PEAK_VALUE = re.compile(r"^    (\S+?)(\{[\d,]*\})?: (\d+) bytes")


class LiveRangeError(ValueError):
    """The dump is not in the form this parser knows (a new XLA changed it)."""


@dataclass(frozen=True)
class ValueRange:
    #: the HLO value: its instruction's name and, in a tuple, its index (``{}`` when none)
    instruction: str
    index: str
    start: int
    end: int

    @property
    def value(self) -> str:
        return self.instruction + self.index


@dataclass
class LiveRanges:
    #: HloLiveRange's end of schedule ("max N")
    end: int
    #: the instruction at each step of the schedule
    schedule: list[str]
    ranges: list[ValueRange]
    #: XLA's peak: its step and each value live there with its bytes, as listed
    peak_step: int
    peak_values: list[tuple[str, int]] = field(default_factory=list)

    @property
    def peak_bytes(self) -> int:
        return sum(size for _, size in self.peak_values)


def parse(text: str) -> LiveRanges:
    """The dump's schedule, ranges and peak; a LiveRangeError when it has none of them."""
    lines = text.splitlines()
    head = _HEAD.match(lines[0]) if lines else None
    if head is None:
        raise LiveRangeError("no 'HloLiveRange (max N):' heading")
    schedule: list[str] = []
    ranges: list[ValueRange] = []
    peak_step: int | None = None
    peak_values: list[tuple[str, int]] = []
    section = ""
    for line in lines[1:]:
        if line.startswith("  ") and not line.startswith("    "):
            section = line.strip()
            if peak := _PEAK_HEAD.match(line):
                peak_step, section = int(peak.group(1)), "peak"
            continue
        if section == "InstructionSequence:" and (step := _STEP.match(line)):
            if int(step.group(1)) != len(schedule):
                raise LiveRangeError(f"schedule step {step.group(1)} out of order")
            schedule.append(step.group(2))
        elif section == "BufferLiveRange:" and (value := _RANGE.match(line)):
            ranges.append(
                ValueRange(
                    value.group(1), value.group(2) or "{}", int(value.group(3)), int(value.group(4))
                )
            )
        elif section == "peak" and (value := _PEAK_VALUE.match(line)):
            peak_values.append((value.group(1) + (value.group(2) or "{}"), int(value.group(3))))
    if peak_step is None:
        raise LiveRangeError("no 'Live ranges at N (peak):' section")
    return LiveRanges(int(head.group(1)), schedule, ranges, peak_step, peak_values)


def value_sizes(buffer_assignment: str) -> dict[str, int]:
    """Each HLO value's bytes, from XLA's buffer assignment (``value: <73 dot @0>
    (size=16384,offset=0)``), by the name the live ranges give it (``dot{}``)."""
    sizes: dict[str, int] = {}
    for match in re.finditer(
        r"^ value: <\d+ ([\w.-]+)(\{[\d,]*\})? @\d+> \(size=(\d+),", buffer_assignment, re.M
    ):
        sizes[match.group(1) + (match.group(2) or "{}")] = int(match.group(3))
    return sizes
