"""envkit/artifacts/wheels.py, pinned for `make mutation MODULES=wheels`: the words of each refusal and the line it names,
the grammar of a written pin on both sides of each length, the tags a target takes (one glibc minor newer is
refused; the x86_64 legacy tags), the order of the ranking, the SHA256SUMS text."""

from __future__ import annotations

import pytest

from envkit.artifacts.closure import make_target
from envkit.artifacts.wheels import (
    LAYOUT,
    Requirement,
    merge,
    normalize,
    parse_requirements,
    parse_wheel_name,
    sha256sums,
    tag_order,
    wheel_rank,
)
from envkit.errors import BadInput, Where

A, B = "a" * 64, "b" * 64


def refusal(fn, *args, **kwargs) -> BadInput:
    with pytest.raises(BadInput) as info:
        fn(*args, **kwargs)
    return info.value


def test_normalize_collapses_runs_of_separators():
    assert normalize("A__b-.-C.d") == "a-b-c-d" and normalize("six") == "six"


@pytest.mark.parametrize(
    ("name", "ok"),
    [("a", True), ("a" * 100, True), ("a" * 101, False), ("-a", False), ("a-", False), ("a.b_c-d", True), ("a b", False)],
)
def test_a_written_pins_name_on_both_sides_of_its_grammar(name, ok):
    r = Requirement(name, "1.0", (A,))
    if ok:
        assert r.line() == f"{name}==1.0 --hash=sha256:{A}"
    else:
        e = refusal(r.line)
        assert e.message == f"refused to write the pin {name!r}=='1.0' (its name is not of the requirement grammar)"
        assert e.hint == "The value comes from the lock, a requirements file or a wheel's name: check it (`envkit validate`)."


@pytest.mark.parametrize(
    ("version", "ok"), [("1", True), ("1" * 64, True), ("1" * 65, False), ("1!2.0+cpu_x-y", True), (".1", False), ("1;x", False)]
)
def test_a_written_pins_version_on_both_sides_of_its_grammar(version, ok):
    r = Requirement("six", version, (A,))
    if ok:
        assert r.line() == f"six=={version} --hash=sha256:{A}"
    else:
        assert (
            refusal(r.line).message
            == f"refused to write the pin 'six'=={version!r} (its version is not of the requirement grammar)"
        )


def test_a_written_pin_names_every_bad_part_and_needs_a_hash():
    e = refusal(Requirement("-x", "", (A, "z" * 64, "c" * 63)).line)
    assert e.message == "refused to write the pin '-x'=='' (its name, version, sha256, sha256 is not of the requirement grammar)"
    assert (
        refusal(Requirement("six", "1", ()).line).message
        == "refused to write the pin 'six'=='1' (its sha256 is not of the requirement grammar)"
    )
    assert Requirement("six", "1", (A, B)).line() == f"six==1 --hash=sha256:{A} --hash=sha256:{B}"


def test_merge_unites_hashes_sorted_and_refuses_two_versions():
    assert merge([Requirement("b", "1", (B,)), Requirement("a", "2", (A,)), Requirement("b", "1", (A, B))]) == [
        Requirement("a", "2", (A,)),
        Requirement("b", "1", (A, B)),
    ]
    e = refusal(merge, [Requirement("b", "1", (A,)), Requirement("b", "2", (A,))])
    assert e.message == "b is pinned twice: 1 and 2"


def test_parse_requirements_words_and_lines():
    e = refusal(parse_requirements, "# c\n\n-r x.txt\n", "r.txt")
    assert (e.message, e.where) == ("r.txt: option lines are not allowed: -r x.txt", Where("r.txt", 3))
    e = refusal(parse_requirements, f"six==1 --hash=sha256:{A}\nsix>=1 --hash=sha256:{A}\n", "r.txt")
    assert (e.message, e.where, e.hint) == (
        "r.txt: not pinned with ==: six>=1 --hash=sha256:" + A,
        Where("r.txt", 2),
        "Use a fully pinned, hashed file (pip-compile --generate-hashes).",
    )
    e = refusal(parse_requirements, "\nsix==1 --hash=md5:abc\n", "r.txt")
    assert (e.message, e.where) == ("r.txt: six has no --hash=sha256:", Where("r.txt", 2))


def test_parse_requirements_reads_continuations_comments_extras_and_markers():
    text = f"# head\nFoo_Bar[x,y] == 2.0 \\\n   --hash=sha256:{B} \\\n  --hash sha256:{A}  # why\n  \nsix==1;python_version>'3' --hash=sha256:{A}\n"
    assert parse_requirements(text, "r.txt") == [Requirement("foo-bar", "2.0", (A, B)), Requirement("six", "1", (A,))]
    assert parse_requirements("-f wheels\n--index-url x\n", "r.txt", options_allowed=True) == []
    assert parse_requirements(f"six==1 --hash=sha256:{A} #--hash=sha256:{B}", "r.txt") == [Requirement("six", "1", (A,))]


def test_parse_wheel_name_with_and_without_a_build_tag():
    assert parse_wheel_name("a_B-1.0-1build-cp310-cp310-linux_x86_64.whl") == ("a-b", "1.0")
    assert parse_wheel_name("a-1.0-py3-none-any.whl") == ("a", "1.0")
    assert parse_wheel_name("a-1.0-py3-none.whl") is None
    assert parse_wheel_name("a-1.0-x-py3-none-any.whl") is None  # a build tag starts with a digit
    assert parse_wheel_name("a-1.0-py3-none-any.whl.zip") is None


def test_the_tags_a_target_takes_stop_at_its_glibc_and_keep_the_x86_64_legacy_ones():
    arm = tag_order(make_target("3.10", "aarch64", "2.35"))
    assert next(iter(arm)) == "cp310-cp310-manylinux_2_35_aarch64"  # the best: the target's own glibc
    assert "cp310-cp310-manylinux_2_36_aarch64" not in arm  # one minor newer: refused
    assert "cp310-cp310-manylinux_2_17_aarch64" in arm and "cp310-cp310-manylinux_2_16_aarch64" not in arm
    assert (
        arm["cp310-cp310-manylinux_2_35_aarch64"]
        < arm["cp310-cp310-manylinux_2_34_aarch64"]
        < arm["cp310-cp310-manylinux2014_aarch64"]
    )
    assert not any("manylinux1" in t or "manylinux2010" in t or "_2_5_" in t or "_2_12_" in t for t in arm)
    # the pure and interpreter-only tags are the target's Python's, not the running one's (this suite runs on 3.11)
    assert {"py310-none-any", "cp310-none-any", "py3-none-any"} <= set(arm)
    assert not {"py311-none-any", "cp311-none-any"} & set(arm)
    x86 = tag_order(make_target("3.11", "x86_64", "2.28"))
    for legacy in ("manylinux_2_12_x86_64", "manylinux2010_x86_64", "manylinux_2_5_x86_64", "manylinux1_x86_64"):
        assert f"cp311-cp311-{legacy}" in x86
    assert (
        x86["cp311-cp311-manylinux2014_x86_64"] < x86["cp311-cp311-manylinux_2_12_x86_64"] < x86["cp311-cp311-manylinux1_x86_64"]
    )
    assert "py3-none-any" in x86 and "cp311-abi3-manylinux_2_28_x86_64" in x86 and "cp310-cp310-manylinux_2_28_x86_64" not in x86


def test_a_wheel_ranks_by_its_best_tag():
    order = {"a-b-c": 3, "d-e-f": 1}
    assert wheel_rank("x-1-a.d-b.e-c.f.whl", order) == 1  # compressed tag set: a-b-c, d-e-f, ...
    assert wheel_rank("x-1-a-b-c.whl", order) == 3
    assert wheel_rank("x-1-q-r-s.whl", order) is None
    assert wheel_rank("x-1-a-b-c.zip", order) is None


def test_sha256sums_text_and_refusals():
    assert sha256sums([("b/c.whl", B), ("a+1~x.txt", A)]) == f"{A}  a+1~x.txt\n{B}  b/c.whl\n".encode()
    for bad in ("../x", "a/../b", "/abs", "a b", "a//b", ""):
        e = refusal(sha256sums, [(bad, A)])
        assert e.message == f"a bundle entry cannot be listed in SHA256SUMS: {bad!r}"
        assert e.hint == "Bundle paths are plain names; the lock's file names are checked by `envkit validate`."
    assert refusal(sha256sums, [("a", "A" * 64)]).message == "a bundle entry cannot be listed in SHA256SUMS: 'a'"
    assert sha256sums([]) == b""


def test_the_bundle_layout_names_every_part():
    assert [str(p) for p in (LAYOUT.lock, LAYOUT.sums, LAYOUT.install, LAYOUT.readme, LAYOUT.playbooks, LAYOUT.image)] == [
        "envkit.lock", "SHA256SUMS", "install.sh", "README.md", "playbooks", "image"
    ]  # fmt: skip
    assert str(LAYOUT.wheels()) == "wheels/target" and str(LAYOUT.requirements("controller")) == "requirements/controller.txt"


def test_a_continuation_joins_with_one_space_and_a_comment_ends_at_its_first_mark():
    assert parse_requirements(f"six==1\\\n --hash=sha256:{A}", "r.txt") == [Requirement("six", "1", (A,))]
    text = f"six==1 --hash=sha256:{A} # --hash=sha256:{B} # later"
    assert parse_requirements(text, "r.txt") == [Requirement("six", "1", (A,))]
