"""envkit/io/jsonread.py, pinned where `make mutation MODULES=inputs` found its mutants alive: the words, hint and place
of a document of the wrong shape (`checked`), the line a refused value is on, and the cut of a huge number."""

from __future__ import annotations

import pytest
from pydantic import BaseModel, ConfigDict

from envkit.errors import BadInput, Where
from envkit.io.jsonread import checked, parse_json


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


def bad(raw, **kwargs) -> BadInput:
    with pytest.raises(BadInput) as info:
        parse_json(raw, "r.json", **kwargs)
    return info.value


def test_each_refusal_of_parse_json_names_the_file_line_and_what_it_should_be():
    e = bad(b'{"a": "\xff"}')
    assert (e.message, e.where, e.hint) == ("r.json: not UTF-8 text (byte 7)", Where("r.json"), None)
    e = bad("[[[]]]", max_depth=2, what="profile")
    assert (e.message, e.where, e.hint) == ("r.json: nested deeper than 2 levels", Where("r.json"), "Is it a profile?")
    e = bad('{"a":\n NaN}', what="report")
    assert (e.message, e.where, e.hint) == ("r.json: NaN is not a JSON number", Where("r.json", 2), "Is it a report?")
    e = bad('{"a": 1,\n\n "b" 2}')
    assert (e.message, e.where) == ("r.json: not JSON: Expecting ':' delimiter (line 3)", Where("r.json", 3))
    e = bad("[" + "1" * 5000 + "]", what="snapshot")
    assert e.message.startswith("r.json: not a snapshot: Exceeds the limit (4300 digits)") and e.where == Where("r.json")
    assert bad("[1e999]").hint == "Is it a JSON document?"


def test_a_bom_is_dropped_and_text_is_read_as_is():
    assert parse_json(b"\xef\xbb\xbf[1]", "r.json") == [1]
    assert parse_json('["x"]', "r.json") == ["x"]


def test_depth_ignores_brackets_inside_strings_even_escaped_quotes():
    assert parse_json('["[[[[", "\\"[[[["]', "r.json", max_depth=1) == ["[[[[", '"[[[[']
    with pytest.raises(BadInput):
        parse_json('["x", [[]]]', "r.json", max_depth=2)


def test_the_line_of_a_token_counts_from_the_start_and_skips_strings():
    assert where_refused('{"a\\n[": 1, "b": "NaN",\n"c":\nNaN}') == Where("r.json", 3)
    assert where_refused('\n{"k": 1, "k": 2}') == Where("r.json", 2)  # the second use is on the same line


def test_read_json_names_a_relative_file_inside_its_root(tmp_path):
    from envkit.io.jsonread import read_json

    (tmp_path / "d.json").write_text("[NaN]")
    with pytest.raises(BadInput) as info:
        read_json("d.json", root=tmp_path, what="snapshot document")
    assert info.value.message == f"{tmp_path / 'd.json'}: NaN is not a JSON number"
    assert info.value.hint == "Is it a snapshot document?"
    with pytest.raises(BadInput) as info:
        read_json(tmp_path / "d.json", root=tmp_path)
    assert (
        info.value.message == f"{tmp_path / 'd.json'}: NaN is not a JSON number" and info.value.hint == "Is it a JSON document?"
    )
    with pytest.raises(BadInput) as info:
        read_json(tmp_path / "d.json")
    assert info.value.message == f"{tmp_path / 'd.json'}: NaN is not a JSON number"


def test_a_key_given_twice_is_named():
    e = bad('{"k": 1, "k": 2}')
    assert e.message == "r.json: the key 'k' is given twice"


def test_a_key_given_twice_in_two_spellings_has_no_line_and_lines_count_from_the_first_character():
    assert where_refused('{"\\u006b": 1,\n "k": 2}') == Where("r.json", None)  # one use spelled "k": no line to name
    assert where_refused('{"k": 1,\n "k": 2,\n "x": 3}') == Where("r.json", 2)
    assert where_refused("\n[NaN]") == Where("r.json", 2)


def test_read_json_names_a_relative_file_as_given_without_a_root(tmp_path, monkeypatch):
    from envkit.io.jsonread import read_json

    monkeypatch.chdir(tmp_path)
    (tmp_path / "d.json").write_text("[1]")
    assert read_json("d.json") == [1]
