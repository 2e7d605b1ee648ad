"""The tour's pages (issue 53): /tour and each step's own link are the page, served as
the page is (its policy, compressed, an ETag and no-cache, a 304 on a repeat visit);
a name that cannot be a step's is a 404 that says so."""

from __future__ import annotations

from fastapi.testclient import TestClient

from backend.app.routes.pages import TOUR_STEP


def test_the_tour_and_its_steps_are_the_page_served_as_the_page_is(client: TestClient) -> None:
    index = client.get("/")
    for path in ("/tour", "/tour/1", "/tour/15", "/tour/grad", "/tour/static-args"):
        r = client.get(path, headers={"Accept-Encoding": "br"})
        assert r.status_code == 200, path
        assert r.headers["content-type"].startswith("text/html")
        assert r.text == index.text, path  # the page; it opens the tour by its address
        assert r.headers["content-encoding"] == "br"
        assert "no-cache" in r.headers["cache-control"]
        assert "default-src 'self'" in r.headers["content-security-policy"]
        again = client.get(path, headers={"If-None-Match": r.headers["etag"]})
        assert again.status_code == 304, path


def test_a_name_no_step_can_have_is_a_404_page(client: TestClient) -> None:
    for step in ("0", "100", "Grad", "a_b", "x" * 41, "%3Cscript%3E"):
        r = client.get(f"/tour/{step}")
        assert r.status_code == 404, step
        assert "No tour step" in r.text and "<script>" not in r.text
        assert 'href="/tour"' in r.text


def test_the_step_names_the_page_uses_are_allowed() -> None:
    """Every step of the catalogue is reachable by its number and by its id."""
    from tests.engine.tour_claims import steps

    for number, step in enumerate(steps(), start=1):
        assert TOUR_STEP.fullmatch(str(number)) and TOUR_STEP.fullmatch(step["id"]), step["id"]
