"""Compiling for hardware the server does not have, in a real browser against a real
``jaxplay serve`` whose operator enabled it (JAXPLAY_GPU_TARGETS, JAXPLAY_TPU_TOPOLOGIES):
the page offers the choice only then, asks only for the outputs such a run gives
(saying why not the others), and shows the PTX and the memory against the device's.
Needs JAX's CUDA plugin and libtpu (``JAXPLAY_CUDA_EXTRA=1 JAXPLAY_TPU_EXTRA=1 make
setup``); without one, its test skips saying so, unless the variable says it must be there."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from sandbox.environments import cuda_extra, tpu_extra

from .conftest import Server, open_page
from .test_page import clear_pipeline, set_code, set_field, show_tab, wait_done

needs_cuda = pytest.mark.skipif(
    not cuda_extra.installed() and os.environ.get("JAXPLAY_CUDA_EXTRA") != "1",
    reason="JAX's CUDA plugin is not installed: `JAXPLAY_CUDA_EXTRA=1 make setup`",
)
needs_libtpu = pytest.mark.skipif(
    not tpu_extra.installed() and os.environ.get("JAXPLAY_TPU_EXTRA") != "1",
    reason="libtpu is not installed: `JAXPLAY_TPU_EXTRA=1 make setup`",
)


@pytest.fixture(scope="module")
def offering(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """A server whose operator offers an H100 and a v5e:2x2 to compile for."""
    settings = {"JAXPLAY_GPU_TARGETS": '["h100"]', "JAXPLAY_TPU_TOPOLOGIES": '["v5e:2x2"]'}
    srv = Server(Path(tmp_path_factory.mktemp("offering")), settings)
    try:
        srv.wait()
        yield srv
    finally:
        srv.stop()


@pytest.fixture
def offered_page(browser: Any, offering: Server) -> Iterator[Any]:
    yield from open_page(browser, offering)


def test_no_compile_for_choice_where_the_server_offers_none(page: Any) -> None:
    page.wait_for_selector("body[data-backends=loaded]", state="attached")
    assert not page.locator("#gpu-target").is_visible()
    page.click("[data-testid=mesh-builder] summary")
    assert not page.locator("[data-testid=tpu-topology]").is_visible()


@needs_cuda
def test_compile_for_h100_shows_its_ptx_and_no_value(offered_page: Any) -> None:
    page = offered_page
    set_code(page, "import jax.numpy as jnp\n\ndef f(x):\n    return jnp.tanh(x @ x).sum()\n")
    set_field(page, "#args", "jnp.ones((64, 64))")
    clear_pipeline(page)
    page.select_option("[data-testid=add-A]", "jit")
    page.click("details.xla-outputs summary")
    page.check("#out-asm")
    page.check("#out-memory")
    page.wait_for_selector("#gpu-target option[value=h100]", state="attached")
    page.select_option("#gpu-target", "h100")
    # nothing runs: value and timing are not asked for, and the page says why
    assert "nothing runs" in (page.get_attribute("#tab-value", "title") or "")
    assert "refused" in (page.get_attribute("#tab-timing", "class") or "")
    assert "no value, timing" in page.inner_text("[data-testid=target-note]")
    assert page.is_enabled("#out-asm")

    page.click("#run")
    assert wait_done(page, 120_000) == "ok", page.inner_text(".progress")
    show_tab(page, "asm")
    page.wait_for_selector("[data-testid=asm-code]")
    ptx = "\n".join(page.locator("[data-testid=asm-code]").all_inner_texts())
    # PTX, NVIDIA's virtual ISA: each kernel's entry point and its global-memory loads
    assert ".visible .entry" in ptx and "ld.global" in ptx, ptx[:2000]
    show_tab(page, "memory")
    capacity = page.inner_text("[data-testid=memory-capacity]")
    assert "of 80" in capacity and "H100" in capacity, capacity
    assert "fits in its memory" in capacity
    # the run asked for no value: its pane says why, and no error was raised
    show_tab(page, "value")
    assert "nothing runs" in (page.get_attribute("#panel-value", "data-refused") or "")
    assert not page.locator("#panel-value .pane-note").is_visible()
    assert page.locator("#tab-errors .tab-badge").inner_text() in ("", "0")


@needs_libtpu
def test_compile_for_a_tpu_topology_shows_memory_against_its_hbm(offered_page: Any) -> None:
    page = offered_page
    set_code(page, "import jax.numpy as jnp\n\ndef f(x):\n    return jnp.sin(x) * 2\n")
    set_field(page, "#args", "jnp.ones((8, 8))")
    clear_pipeline(page)
    page.select_option("[data-testid=add-A]", "jit")
    page.click("details.xla-outputs summary")
    page.check("#out-memory")
    page.click("[data-testid=mesh-builder] summary")
    page.wait_for_selector("[data-testid=tpu-topology] option[value='v5e:2x2']", state="attached")
    page.select_option("[data-testid=tpu-topology]", "v5e:2x2")
    # the topology brings a mesh over its devices; outputs it cannot give are disabled
    assert page.is_checked("[data-testid=mesh-on]")
    assert page.input_value("[data-testid=mesh-shape]") == "2, 2"
    assert page.is_disabled("#out-asm")
    assert "TPU v5e:2x2 gives" in (page.get_attribute("label[for=out-asm]", "title") or "")
    set_field(page, "[data-testid=spec-in-0]", "x, y")

    page.click("#run")
    assert wait_done(page, 120_000) == "ok", page.inner_text(".progress")
    show_tab(page, "memory")
    capacity = page.inner_text("[data-testid=memory-capacity]")
    assert "GiB" in capacity and "TPU v5" in capacity and "fits in its memory" in capacity, capacity
    show_tab(page, "sharding")
    page.wait_for_selector(".panel-sharding svg")  # the pane's code loads on first use
    assert page.locator(".panel-sharding svg").count() >= 1
