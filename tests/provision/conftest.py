"""One nspawn fleet for the whole session, shared by every fleet test module (booting one takes minutes)."""

from __future__ import annotations

import pytest

from tests.provision.fleet import Fleet

FLEET_SIZE = 3


@pytest.fixture(scope="session")
def fleet(tmp_path_factory):
    f = Fleet(tmp_path_factory.mktemp("prov-fleet") / "fleet", FLEET_SIZE)
    try:
        f.up()
        yield f
    finally:
        f.down()
