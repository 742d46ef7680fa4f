"""Fixtures of the hostile tests."""

from __future__ import annotations

import pytest
import yaml


@pytest.fixture(scope="module")
def lock_doc(tmp_path_factory) -> dict:
    """A lock `envkit resolve` made (A2, aarch64, CANN 8.5.0, Python 3.10), as the YAML document a test edits."""
    from envkit.cli import main

    out = tmp_path_factory.mktemp("resolved") / "envkit.lock"
    with pytest.raises(SystemExit) as exc:
        main(["-q", "resolve", "--chip", "910b", "--arch", "aarch64", "--cann", "8.5.0", "--python", "3.10", "-o", str(out)])
    assert exc.value.code in (0, None)
    return yaml.safe_load(out.read_text())
