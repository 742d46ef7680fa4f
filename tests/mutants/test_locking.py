"""The derive side of envkit.core.derive: the lock a stack gives, section by section (cases `make mutation` showed no
test held).

The lock of a few chosen stacks is pinned whole by tests/golden/locking/<stack>.json (all but the envkit version
and the matrix digest): provenance (origin, rule, source, confidence), the artifacts of each installer (file,
pattern, flags, order, zip, package_version, compatible, firmware_version), the platform, the layout and the Python
pins with their indexes. They change with the matrix; `ENVKIT_UPDATE_GOLDEN=1` rewrites them. A matrix edited in
memory reaches the branches no row of the shipped matrix takes.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from envkit.core.derive import _flags, _framework_provenance, build_layout, build_lock, derive_lock, differ
from envkit.core.matrix import LoadedMatrix, load_matrix
from envkit.core.resolve import pins_from_mapping, solve
from envkit.core.resolve.search import chosen, framework_keys
from envkit.models.lock import Lock
from envkit.records import asdict, replace
from tests.core.conftest import edited_matrix

GOLDEN = Path(__file__).parents[1] / "golden" / "locking"

# name -> the declared pins (and the workload); each reaches branches the others do not
STACKS: dict[str, dict[str, str]] = {
    # the matrix defaults: CANN 9.x (ops package, versioned layout), an RC driver, no firmware file name, hdk zips
    "default": {},
    # x86_64 (torch +cpu), CANN 9.0.0 (toolkit and ops zips), openEuler: an image row with a note and no digest
    "x86_64": {"arch": "x86_64", "cann": "9.0.0", "os": "openeuler24.03"},
    # serving: vLLM, vllm-ascend (derived), Transformers from its row, triton-ascend from the Ascend index
    "serving": {"workload": "serving"},
    # training: MindSpeed (derived) on CANN 8.3.RC1 (kernels package, toolkit-latest layout, kernels zips)
    "training": {"workload": "training-mindspeed", "cann": "8.3.RC1"},
    # torch_npu 2.7.1.post1: not on PyPI (the Ascend index); a firmware with its own version
    "vendor_torch_npu": {"vllm_ascend": "0.11.0"},
    # A3: the chip's own driver spelling, no hdk zip token; triton-ascend alone and from PyPI
    "a3_triton": {"chip": "a3", "driver": "25.0.RC1", "triton_ascend": "3.2.0"},
    # 310P on Ubuntu 20.04: no davinci count, no base image, a Python newer than the OS ships
    "310p_focal": {"chip": "310p", "os": "ubuntu20.04"},
}


def _lock(lm: LoadedMatrix, declared: dict[str, str]) -> Lock:
    declared = dict(declared)
    workload = declared.pop("workload", None)
    pins = pins_from_mapping(lm, declared)
    res = solve(lm, pins, framework_keys(pins, workload))
    assert res is not None, declared
    return build_lock(lm, res, "test")


@pytest.mark.parametrize("name", sorted(STACKS))
def test_the_derived_lock_of_a_stack(name, golden):
    lock = _lock(load_matrix(), STACKS[name])
    got = lock.model_dump(mode="json", exclude={"envkit_version", "matrix_digest"})
    Lock.model_validate(lock.model_dump(mode="json"))  # the derived lock meets the schema
    golden(GOLDEN / f"{name}.json", json.dumps(got, indent=1, sort_keys=True, ensure_ascii=False) + "\n")


def test_the_goldens_hold_the_cases_they_are_for():
    """The goldens above reach each branch they are chosen for (a matrix change that drops one fails here)."""
    lm = load_matrix()
    locks = {name: _lock(lm, declared) for name, declared in STACKS.items()}
    by = {name: {a.component: a for a in lock.artifacts} for name, lock in locks.items()}
    assert by["default"]["firmware"].run.file is None and by["default"]["firmware"].zip is not None
    assert by["default"]["firmware"].package_version == "26.0.rc1"
    assert by["vendor_torch_npu"]["firmware"].firmware_version == "7.8.0.7.220"
    assert by["a3_triton"]["driver"].run.file == "Atlas-A3-hdk-npu-driver_25.0.rc1.3_linux-aarch64.run"
    assert by["a3_triton"]["driver"].compatible and by["a3_triton"]["firmware"].compatible
    assert by["a3_triton"]["driver"].zip is None and by["x86_64"]["cann-ops"].zip is not None
    assert by["training"]["cann-kernels"].zip is not None and "cann-ops" not in by["training"]
    assert locks["310p_focal"].platform.base_image is None and locks["310p_focal"].platform.davinci_devices is None
    assert locks["x86_64"].platform.base_image.note and locks["x86_64"].platform.base_image.digest is None
    assert locks["310p_focal"].provenance["python"].rule.startswith("newest Python with")
    assert locks["vendor_torch_npu"].provenance["cann"].rule.endswith("(compatible line)")
    assert {locks[n].provenance[k].origin for n, k in (("serving", "vllm_ascend"), ("training", "mindspeed"))} == {"derived"}
    assert locks["default"].provenance["cann"].rule.endswith("(vendor table)")
    indexes = {n: {p.name: p.index for p in lock.python.requirements} for n, lock in locks.items()}
    assert indexes["vendor_torch_npu"]["torch_npu"] == "ascend-pypi" and indexes["default"]["torch_npu"] is None
    assert indexes["serving"]["triton-ascend"] == "ascend-pypi" and indexes["a3_triton"]["triton-ascend"] is None
    # a triton-ascend with no vllm-ascend is declared: the rule derived for it names its own row
    assert locks["a3_triton"].provenance["triton_ascend"].origin == "declared"
    stack = dict(locks["a3_triton"].stack.model_dump(exclude_none=True))
    rule = _framework_provenance(stack, chosen(lm, stack))["triton_ascend"][0]
    assert rule == "triton_ascend/3.2.0, bound to CANN 8.5.0, 8.5.1"
    assert locks["serving"].hints and locks["vendor_torch_npu"].hints


def test_a_platform_value_no_default_names_is_the_first_that_fits():
    lm = load_matrix()
    lock = _lock(edited_matrix(lm, defaults={"chip": "910b", "arch": "aarch64"}), {})
    got = {k: lock.provenance[k].model_dump() for k in ("chip", "os")}
    assert got == {
        "chip": {
            "declared": False,
            "origin": "default",
            "rule": "defaults",
            "source": "matrices/platform.yaml",
            "confidence": None,
        },
        "os": {
            "declared": False,
            "origin": "derived",
            "rule": "first that fits",
            "source": "matrices/platform.yaml",
            "confidence": None,
        },
    }
    assert lock.stack.os != lm.model.defaults["os"]


def test_a_torch_without_a_build_row_has_no_build_rule():
    lm = edited_matrix(load_matrix(), torch_builds=[])
    lock = _lock(lm, {})
    t = lm.torch_npu_row(lock.stack.torch_npu)
    assert lock.provenance["torch"].rule == f"torch_npu/{t.version} pins torch=={t.torch}"


def test_a_layout_fills_version_and_home_into_its_env():
    lm = load_matrix()
    rule = next(r for r in lm.model.cann_layouts if r.kind == "cann-versioned")
    edited = replace(rule, **{"env": {"B": "{home}/{version}", "A": "v{version}"}, "set_env": ["/x/{version}/set_env.sh"]})
    layout = build_layout(edited_matrix(lm, cann_layouts=[edited]), lm.cann_row("9.1.0"))
    assert (layout.home, layout.set_env) == ("/usr/local/Ascend/cann-9.1.0", ["/x/9.1.0/set_env.sh"])
    assert list(layout.env.items()) == [("A", "v9.1.0"), ("B", "/usr/local/Ascend/cann-9.1.0/9.1.0")]


def test_the_nnal_installer_takes_its_own_zip():
    lm = load_matrix()
    base = next(a for a in lm.model.artifacts if a.component == "cann" and a.kind == "toolkit" and a.arch == "aarch64")
    nnal = replace(base, **{"kind": "nnal", "release": "9.1.0", "file": "nnal.zip", "sha256": "a" * 64})
    lock = _lock(edited_matrix(lm, artifacts=[*lm.model.artifacts, nnal]), {})
    zips = {a.component: a.zip for a in lock.artifacts}
    assert zips["cann-nnal"].model_dump() == {"file": "nnal.zip", "sha256": "a" * 64, "url": base.url, "source": base.source}
    assert zips["cann-toolkit"] is None  # no 9.1.0 toolkit zip: the nnal one is not taken for it


def test_derive_lock_reads_the_lock_s_stack_as_declared_in_the_file():
    lm = load_matrix()
    lock = _lock(lm, {"vllm_ascend": "0.25.1rc1"}).model_copy(update={"generated_by": "someone"})
    again = derive_lock(lm, lock, "my.lock")
    assert again is not None and again.generated_by == "someone"
    assert asdict(again.provenance["cann"]) == {
        "declared": True,
        "origin": "declared",
        "rule": None,
        "source": "my.lock stack.cann",
        "confidence": None,
    }
    assert again.provenance["vllm_ascend"].source == "my.lock stack.vllm_ascend"


def test_derive_lock_of_a_stack_the_matrix_does_not_allow_is_none():
    lm = load_matrix()
    lock = _lock(lm, {})
    bad = lock.model_copy(update={"stack": lock.stack.model_copy(update={"cann": "8.0.RC1"})})
    assert derive_lock(lm, bad, "my.lock") is None


def test_an_unknown_component_has_no_install_flags():
    lm = load_matrix()
    assert _flags(lm, "cann-ops") == (["--quiet", "--install", "--install-for-all"], 4)
    with pytest.raises(KeyError) as e:
        _flags(lm, "cann-nope")
    assert e.value.args == ("cann-nope",)


def test_the_rows_of_a_stack_name_an_unknown_triton_ascend():
    lm = load_matrix()
    stack = dict(_lock(lm, {}).stack.model_dump(exclude_none=True))
    with pytest.raises(KeyError) as e:
        chosen(lm, {**stack, "triton_ascend": "9.9.9"})
    assert e.value.args == ("triton_ascend 9.9.9 is not in the matrix",)


def test_differ_compares_a_list_whose_names_repeat_by_position():
    want = [{"name": "a", "v": 1}, {"name": "a", "v": 2}]
    assert differ(want, [{"name": "a", "v": 3}, {"name": "a", "v": 2}]) == ["0.v"]
