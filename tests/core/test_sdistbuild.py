"""envkit.artifacts.sdist without a build: which wheels a target takes, where a build may run, what CANN's pins yield."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from envkit.artifacts.closure import cann_runtime_yields, host_arch, host_python, make_target
from envkit.artifacts.sdist import Sdist, build_settings, build_wheel, target_takes
from envkit.errors import CannotRun


def test_the_built_wheel_tag_is_taken_by_its_own_target_only():
    x86 = make_target("3.11", "x86_64")
    assert target_takes("vllm-0.23.0+empty-cp311-cp311-linux_x86_64.whl", x86)  # setuptools' tag for the empty build
    assert target_takes("vllm-0.23.0+empty-py3-none-any.whl", x86)
    assert not target_takes("vllm-0.23.0+empty-cp311-cp311-linux_x86_64.whl", make_target("3.11", "aarch64"))
    assert not target_takes("vllm-0.23.0+empty-cp311-cp311-linux_x86_64.whl", make_target("3.10", "x86_64"))


def test_the_build_settings_are_the_vendors_and_a_fixed_epoch():
    assert build_settings("vLLM") == {"VLLM_TARGET_DEVICE": "empty", "SOURCE_DATE_EPOCH": "315532800"}


def test_a_build_for_another_arch_or_python_is_refused_before_anything_is_fetched(tmp_path):
    other = "aarch64" if host_arch() == "x86_64" else "x86_64"
    sdist = Sdist("vllm", "0.23.0", "vllm-0.23.0.tar.gz", "http://127.0.0.1:9/vllm-0.23.0.tar.gz", "0" * 64, 1)
    for target in (make_target(host_python(), other), make_target("3.9" if host_python() != "3.9" else "3.10", host_arch())):
        with pytest.raises(CannotRun) as exc:  # nothing listens on 127.0.0.1:9: a fetch would fail otherwise
            build_wheel(
                sdist, target=target, torch="torch==2.10.0", torch_index="http://127.0.0.1:9/", index_url="http://127.0.0.1:9/"
            )
        assert f"target is Python {target.python} on {target.arch}" in exc.value.message
        assert "--exclude vllm" in (exc.value.hint or "")


def test_cann_runtime_pins_yield_to_the_built_wheel_and_the_locks_pins_never():
    lock = SimpleNamespace(
        python=SimpleNamespace(
            cann_runtime=["protobuf==3.20.0", "numpy", "scipy"],
            requirements=[SimpleNamespace(name="numpy", version="1.26.4")],
        )
    )
    roots = ["numpy==1.26.4", "protobuf==3.20.0", "scipy", "attrs"]
    said: list[str] = []
    got = cann_runtime_yields(lock, roots, ["protobuf>=5.29.6", "numpy", "attrs>=1"], said.append)  # type: ignore[arg-type]
    assert got == ["numpy==1.26.4", "protobuf", "scipy", "attrs"]  # numpy is the lock's pin: it stays
    assert len(said) == 1 and said[0].startswith("protobuf==3.20.0 (CANN's install guide) yields")
