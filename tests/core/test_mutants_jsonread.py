"""envkit/jsonread.py, pinned where `make mutation MODULES=inputs` found its mutants alive: the words, hint and place
of a document of the wrong shape (`checked`), the line a refused value is on, and the cut of a huge number."""

from __future__ import annotations

import pytest
from pydantic import BaseModel, ConfigDict

from envkit.errors import BadInput, Where
from envkit.jsonread import checked, parse_json


class Inner(BaseModel):
    model_config = ConfigDict(extra="forbid")
    n: int


class Doc(BaseModel):
    model_config = ConfigDict(extra="forbid")
    ok: bool
    inner: Inner


def refusal(data, **kwargs) -> BadInput:
    with pytest.raises(BadInput) as info:
        checked(data, Doc, "p.json", what="profile", **kwargs)
    return info.value


def test_a_valid_document_is_its_model():
    assert checked({"ok": True, "inner": {"n": 3}}, Doc, "p.json", what="profile") == Doc(ok=True, inner=Inner(n=3))


def test_no_coercion_a_string_is_no_bool_and_no_int():
    e = refusal({"ok": "false", "inner": {"n": 1}})
    assert e.message == "p.json: ok: Input should be a valid boolean (got 'false')"
    assert (e.where, e.hint) == (Where("p.json", None, "ok"), "Is it a profile envkit wrote? One edited since is refused.")
    e = refusal({"ok": True, "inner": {"n": "1"}})
    assert (e.message, e.where) == (
        "p.json: inner.n: Input should be a valid integer (got '1')",
        Where("p.json", None, "inner.n"),
    )


def test_a_missing_key_names_it_without_a_value():
    e = refusal({"ok": True, "inner": {}})
    assert (e.message, e.where) == ("p.json: inner.n: Field required", Where("p.json", None, "inner.n"))


def test_a_wrong_json_type_is_named_in_json_words():
    e = refusal({"ok": True, "inner": [1]})
    assert e.message == "p.json: inner: should be a JSON object (got [1])"


def test_a_key_inside_a_bigger_document_is_named_from_there():
    e = refusal({"ok": True, "inner": {"n": "x"}}, key="profile")
    assert (e.message, e.where) == (
        "p.json: profile.inner.n: Input should be a valid integer (got 'x')",
        Where("p.json", None, "profile.inner.n"),
    )


def test_a_document_of_the_wrong_type_is_named_as_the_document():
    e = refusal([1, 2])
    assert (e.message, e.where) == ("p.json: the document: should be a JSON object (got [1, 2])", Where("p.json", None, None))


def test_an_unknown_message_type_keeps_pydantics_words():
    e = refusal({"ok": True, "inner": {"n": 1}, "extra": 1})
    assert e.message == "p.json: extra: Extra inputs are not permitted (got 1)"


def where_refused(text: str) -> Where:
    with pytest.raises(BadInput) as info:
        parse_json(text, "r.json")
    return info.value.where


def test_the_line_of_a_refused_value_skips_strings_and_takes_the_first():
    # "NaN" inside a string on line 1 is no token; the first bare NaN is on line 3, another on line 4
    assert where_refused('{"a": "NaN\\n",\n "b": 1,\n "c": NaN,\n "d": NaN}') == Where("r.json", 3)
    assert where_refused("NaN") == Where("r.json", 1)  # a token at the very start
    assert where_refused('\n\n{"x": 1, "x": 2}') == Where("r.json", 3)


def test_a_huge_number_is_cut_to_40_characters():
    big = "1" + "0" * 50 + "e999"
    with pytest.raises(BadInput) as info:
        parse_json(f"[{big}]", "r.json")
    assert info.value.message == f"r.json: {big[:40]} is too large for a number"


def test_a_key_given_twice_is_placed_on_its_second_use():
    assert where_refused('{"x": 1,\n "y": "x",\n "x": 3}') == Where("r.json", 3)  # "x" as a value is no use as a key
    assert where_refused('{"a": "x",\n "x": 1,\n\n "x" : 2}') == Where("r.json", 4)
