from __future__ import annotations

import pytest

from envkit.matrix import load_matrix


@pytest.fixture(scope="session")
def lm():
    return load_matrix()
