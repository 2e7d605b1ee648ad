"""The CLI tests' own cache folder: ``jaxplay run --server`` keeps its session there
(backend/cli/client/session_store.py), never in the user's ``~/.cache``."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(autouse=True)
def _own_cache_folder(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> Path:
    folder = tmp_path_factory.mktemp("xdg-cache")
    monkeypatch.setenv("XDG_CACHE_HOME", str(folder))
    return folder
