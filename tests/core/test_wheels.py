"""envkit.artifacts.wheels: the hashed requirement line written and read back, wheel names and tags, the bundle layout."""

from __future__ import annotations

from pathlib import Path

import pytest

from envkit.artifacts.closure import make_target
from envkit.artifacts.wheels import (
    LAYOUT,
    BundleLayout,
    Requirement,
    normalize,
    parse_requirements,
    parse_wheel_name,
    requirements_txt,
    tag_order,
    wheel_name,
    wheel_rank,
)
from envkit.errors import BadInput
from envkit.models.lock import ClosurePackage, PythonClosure

SHA = "a" * 64


@pytest.mark.parametrize(
    "text, ok",
    [
        ("six==1.17.0 --hash=sha256:" + SHA, True),
        ("six==1.17.0 \\\n    --hash=sha256:" + SHA + "\n# comment\n", True),
        ("--index-url https://example.invalid/simple\nsix==1.17.0 --hash=sha256:" + SHA, True),
        ("six>=1.0 --hash=sha256:" + SHA, False),
        ("six==1.17.0", False),
    ],
)
def test_a_wheels_folder_requirements_are_pinned_and_hashed(text, ok):
    """What provisioning checks of a wheels folder's requirements.txt before any host is touched."""
    if ok:
        assert parse_requirements(text, "r.txt", options_allowed=True) == [Requirement("six", "1.17.0", (SHA,))]
    else:
        with pytest.raises(BadInput):
            parse_requirements(text, "r.txt", options_allowed=True)


def test_option_lines_are_refused_unless_allowed():
    with pytest.raises(BadInput, match="option lines are not allowed"):
        parse_requirements("-f ./wheels\nsix==1.17.0 --hash=sha256:" + SHA, "r.txt")


def test_written_lines_read_back_merged_by_project():
    b = "b" * 64
    reqs = [Requirement("Foo_Bar", "1.0", (SHA,)), Requirement("six", "1.17.0", (SHA, b))]
    text = "".join(r.line() + "\n" for r in reqs)
    assert text.splitlines()[1] == f"six==1.17.0 --hash=sha256:{SHA} --hash=sha256:{b}"
    assert parse_requirements(text + f"foo-bar==1.0 --hash=sha256:{b}\n", "r.txt") == [
        Requirement("foo-bar", "1.0", (SHA, b)),
        Requirement("six", "1.17.0", (SHA, b)),
    ]
    with pytest.raises(BadInput, match="pinned twice"):
        parse_requirements(text + f"six==1.16.0 --hash=sha256:{b}\n", "r.txt")


def test_bundle_requirements_file():
    target = make_target("3.10", "x86_64")
    pkg = ClosurePackage(
        name="beta", version="2.0", filename="beta-2.0-py3-none-any.whl", url="https://x/beta.whl", sha256="b" * 64, size=1
    )
    closure = PythonClosure(target=target, roots=["beta"], index_url="https://pypi.org/simple", resolver="uv", packages=[pkg])
    text = requirements_txt(closure, [("alpha", "1.0", SHA)]).decode()
    assert text == (
        "# 2 wheels for Python 3.10 on manylinux_2_28_x86_64; install with --no-index --no-deps --require-hashes\n"
        f"alpha==1.0 --hash=sha256:{SHA}\nbeta==2.0 --hash=sha256:{'b' * 64}\n"
    )
    assert [r.name for r in parse_requirements(text, "target.txt")] == ["alpha", "beta"]


def test_wheel_names_and_tags():
    assert normalize("Torch_NPU.x") == "torch-npu-x"
    assert parse_wheel_name("Torch_NPU-2.4.0.post2-cp310-cp310-manylinux_2_17_aarch64.whl") == ("torch-npu", "2.4.0.post2")
    assert wheel_name(Path("/w/six-1.17.0-py2.py3-none-any.whl")) == "six"
    assert parse_wheel_name("six-1.17.0.tar.gz") is None and wheel_name("README") is None
    order = tag_order(make_target("3.10", "aarch64", "2.28"))
    native = wheel_rank("x-1-cp310-cp310-manylinux_2_28_aarch64.whl", order)
    older = wheel_rank("x-1-cp310-cp310-manylinux2014_aarch64.whl", order)
    pure = wheel_rank("x-1-py3-none-any.whl", order)
    assert native is not None and older is not None and pure is not None and native < older < pure
    assert wheel_rank("x-1-cp310-cp310-manylinux_2_28_x86_64.whl", order) is None
    assert wheel_rank("x-1-cp310-cp310-manylinux_2_34_aarch64.whl", order) is None  # newer glibc than the target's
    assert wheel_rank("not-a-wheel.zip", order) is None


def test_layout_relative_and_on_disk(tmp_path):
    assert str(LAYOUT.wheels("controller")) == "wheels/controller"
    assert str(LAYOUT.requirements("target")) == "requirements/target.txt"
    assert str(LAYOUT.manifest) == "manifest.json" and str(LAYOUT.vendor / "x.run") == "vendor/x.run"
    on_disk = BundleLayout(tmp_path)
    assert on_disk.requirements() == tmp_path / "requirements" / "target.txt"
    assert on_disk.wheels() == tmp_path / "wheels" / "target"
