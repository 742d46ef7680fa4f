from __future__ import annotations

import pytest

from envkit.core.matrix import LoadedMatrix, load_matrix
from envkit.records import replace


@pytest.fixture(scope="session")
def lm():
    return load_matrix()


@pytest.fixture(scope="session")
def default_lock_text(tmp_path_factory) -> str:
    """The text of `envkit resolve -o FILE` on the embedded default, as the command line writes it."""
    from envkit.cli import main

    out = tmp_path_factory.mktemp("default-lock") / "envkit.lock"
    with pytest.raises(SystemExit) as done:
        main(["-q", "resolve", "-o", str(out)])
    assert done.value.code == 0
    return out.read_text()


def edited_matrix(lm: LoadedMatrix, **update) -> LoadedMatrix:
    """The matrix with some sections replaced, in memory and not validated: for branches no shipped row takes."""
    return LoadedMatrix(model=replace(lm.model, **update), digest=lm.digest, files=lm.files)
