from __future__ import annotations

import pytest

from envkit.matrix import LoadedMatrix, load_matrix


@pytest.fixture(scope="session")
def lm():
    return load_matrix()


def edited_matrix(lm: LoadedMatrix, **update) -> LoadedMatrix:
    """The matrix with some sections replaced, in memory and not validated: for branches no shipped row takes."""
    return LoadedMatrix(model=lm.model.model_copy(update=update), digest=lm.digest, files=lm.files)
