"""The lock gate (envkit.models.safe, envkit.core.derive): cases that `make mutation` showed no test held."""

from __future__ import annotations

import pytest
from pydantic import TypeAdapter, ValidationError

from envkit.core.derive import hdk_file_version
from envkit.core.matrix import load_matrix
from envkit.models.safe import Text

TEXT = TypeAdapter(Text)


@pytest.mark.parametrize("mark", ["{{", "{%", "{#"])
def test_each_template_opener_is_refused_in_text(mark):
    with pytest.raises(ValidationError) as e:
        TEXT.validate_python(f"made by {mark} x")
    assert e.value.errors()[0]["msg"] == "Value error, template markup ({{ }}, {% %}, {# #}) is not allowed in data"


def test_plain_text_with_braces_passes():
    assert TEXT.validate_python("a {single} brace and a % sign") == "a {single} brace and a % sign"


def test_hdk_file_version_lowers_rc_when_the_row_has_no_file_spelling():
    lm = load_matrix()
    row = next(h for h in lm.model.hdk if not h.package_version and "RC" in h.version and not h.chip_package_versions)
    assert hdk_file_version(row, "910b") == row.version.replace("RC", "rc")
    assert "RC" not in hdk_file_version(row, "910b")
