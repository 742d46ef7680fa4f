from __future__ import annotations

import pytest

from envkit.matrix import LoadedMatrix, load_matrix
from envkit.records import replace


@pytest.fixture(scope="session")
def lm():
    return load_matrix()


def edited_matrix(lm: LoadedMatrix, **update) -> LoadedMatrix:
    """The matrix with some sections replaced, in memory and not validated: for branches no shipped row takes."""
    return LoadedMatrix(model=replace(lm.model, **update), digest=lm.digest, files=lm.files)
