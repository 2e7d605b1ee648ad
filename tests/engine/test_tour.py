"""The tour (tour/tour.json, issue 53): every step's claims, as its text states them,
hold for the step as the page loads it and after its "try this" edit, on every JAX
version the tour is offered for (the catalogue's ``jax_versions``; ``default`` is the
session's warm engine). A step whose claim stops holding on a new JAX version fails
here instead of teaching something false. The catalogue's own shape (every language
complete, marks inside the code, the try edit applicable) is checked without JAX."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from sandbox.environments.versions import installed
from sandbox.protocol import RunRequest
from tests.engine import tour_claims
from tests.engine.test_golden_versions import VERSIONS_DIR
from tests.gates import missing_requirement
from tests.support.warm_engine import WarmEngine

CATALOGUE = tour_claims.catalogue()
STEPS = {step["id"]: step for step in CATALOGUE["steps"]}
TEXT_FIELDS = ("title", "body", "try", "see")


@pytest.fixture(scope="module", params=CATALOGUE["jax_versions"])
def engine(
    request: pytest.FixtureRequest, warm_engine: WarmEngine
) -> Iterator[tuple[str, WarmEngine]]:
    version = request.param
    if version == "default":
        yield version, warm_engine
        return
    env = installed(VERSIONS_DIR).get(version)
    if env is None:
        missing_requirement(
            f"the tour is offered for JAX {version}, which is not installed in {VERSIONS_DIR}",
            f".venv/bin/jaxplay versions add {version}",
        )
    other = WarmEngine(python=env.python).start()
    try:
        yield version, other
    finally:
        other.stop()


def _run(engine: tuple[str, WarmEngine], request: dict[str, Any]) -> list[dict[str, Any]]:
    version, warm = engine
    if version != "default":
        request = {**request, "jax_version": version}
    events = warm.run({**request, "timeout_s": 120})
    assert events and events[-1]["type"] == "done", events[-3:]
    return events


@pytest.mark.slow
@pytest.mark.parametrize("step_id", list(STEPS))
def test_step_as_loaded(step_id: str, engine: tuple[str, WarmEngine]) -> None:
    step = STEPS[step_id]
    events = _run(engine, tour_claims.request_of(step))
    problems = tour_claims.broken(events, step["claims"]["before"])
    assert not problems, "\n".join(problems)


@pytest.mark.slow
@pytest.mark.parametrize("step_id", list(STEPS))
def test_step_after_its_try_edit(step_id: str, engine: tuple[str, WarmEngine]) -> None:
    step = STEPS[step_id]
    events = _run(engine, tour_claims.tried_request(step))
    problems = tour_claims.broken(events, step["claims"]["after"])
    assert not problems, "\n".join(problems)


# --- the catalogue itself (no JAX) -----------------------------------------------------


def test_about_fifteen_steps_with_unique_ids() -> None:
    assert 12 <= len(CATALOGUE["steps"]) <= 20
    assert len(STEPS) == len(CATALOGUE["steps"])


@pytest.mark.parametrize("step_id", list(STEPS))
def test_every_language_has_every_field(step_id: str) -> None:
    text = STEPS[step_id]["text"]
    assert sorted(text) == sorted(CATALOGUE["languages"])
    for language in CATALOGUE["languages"]:
        fields = text[language]
        assert sorted(fields) == sorted(TEXT_FIELDS), (language, sorted(fields))
        assert all(isinstance(p, str) and p.strip() for p in fields["body"]), language
        assert all(
            isinstance(fields[f], str) and fields[f].strip() for f in ("title", "try", "see")
        ), language
    # the same paragraphs in each language: a paragraph left out is a missing translation
    assert len({len(text[lang]["body"]) for lang in CATALOGUE["languages"]}) == 1


@pytest.mark.parametrize("step_id", list(STEPS))
def test_code_and_names_are_not_translated(step_id: str) -> None:
    """Every `code` span of the English text is in the other languages' text too:
    code, JAX's names and IR stay as they are."""
    import re

    text = STEPS[step_id]["text"]

    def spans(fields: dict[str, Any]) -> set[str]:
        joined = " ".join([fields["title"], *fields["body"], fields["try"], fields["see"]])
        return set(re.findall(r"`([^`]+)`", joined))

    english = spans(text["en"])
    for language in CATALOGUE["languages"]:
        assert spans(text[language]) >= english, (language, sorted(english - spans(text[language])))


@pytest.mark.parametrize("step_id", list(STEPS))
def test_requests_are_valid_and_marks_are_in_the_code(step_id: str) -> None:
    step = STEPS[step_id]
    code = (tour_claims.TOUR / step["file"]).read_text()
    lines = code.count("\n") + (not code.endswith("\n"))
    assert step["marks"] and all(1 <= m <= lines for m in step["marks"]), (step["marks"], lines)
    RunRequest.model_validate(tour_claims.request_of(step))
    RunRequest.model_validate(tour_claims.tried_request(step))
    assert step["claims"]["before"] and step["claims"]["after"]
    for claim in step["claims"]["before"] + step["claims"]["after"]:
        (kind,) = claim
        assert kind in tour_claims.RULES, kind


def test_every_tour_file_is_a_step() -> None:
    files = {p.name for p in tour_claims.TOUR.glob("*.py")}
    assert files == {s["file"] for s in CATALOGUE["steps"]}


def test_a_broken_claim_is_reported() -> None:
    """The rules can fail: each kind of claim, stated wrongly, against a run's events."""
    events: list[dict[str, Any]] = [
        {
            "type": "jaxpr",
            "pipeline": "main",
            "text": "{ lambda ; a:f32[]. let b:f32[] = sin a in (b,) }",
        },
        {
            "type": "value",
            "pipeline": "main",
            "repr": "1.0",
            "tree": [{"path": "", "shape": [], "data": [1.0]}],
        },
        {"type": "stdout", "text": "2.0\n", "stage": "exec"},
        {"type": "done", "status": "ok"},
    ]
    assert not tour_claims.broken(
        events,
        [
            {"status": "ok"},
            {"text": {"output": "jaxpr", "has": "sin"}},
            {"value": {"close_to": 1.0}},
        ],
    )
    wrong: list[dict[str, Any]] = [
        {"status": "error"},
        {"text": {"output": "jaxpr", "has": "cos"}},
        {"text": {"output": "jaxpr", "count": "= sin ", "is": 2}},
        {"value": {"close_to": 2.0}},
        {"stdout": {"has": "2.0", "times": 2}},
        {"error": {"kind": "TypeError"}},
    ]
    assert len(tour_claims.broken(events, wrong)) == len(wrong)
