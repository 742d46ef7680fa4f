"""The plain records (built from the tables tools/matrix_records.py derives from the pydantic models), and the compiled
matrix store: one file per matrix digest in the cache dir, loaded with one read and no pydantic; anything that does
not fit is a miss that the YAML path rebuilds."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import types
from pathlib import Path

import pytest

from envkit.core import matrix_records
from envkit.core.matrix import _cache_dir, _store_path, load_matrix_from, plain, record
from envkit.records import Record, asdict, fields
from envkit.resources import matrices_dir
from tests.conftest import load_tool
from tests.core.test_architecture import PRINT_LOADED

ROOT = Path(__file__).resolve().parents[2]


def _generator():
    return load_tool("matrix_records")


def test_the_committed_tables_are_what_the_generator_makes_now():
    assert (ROOT / "envkit" / "models" / "tables.py").read_text() == _generator().render_tables(), "run `make matrix-records`"


def _public(cls: type) -> set[str]:
    """The public methods and properties a class has (its own and its bases'), pydantic's and the records' own left out."""
    from pydantic import BaseModel

    return {
        name
        for klass in cls.__mro__
        if klass not in (BaseModel, Record, object)
        for name, value in vars(klass).items()
        if not name.startswith("_") and isinstance(value, (types.FunctionType, property))
    }


@pytest.mark.parametrize(
    "records, modules",
    [
        ("envkit.core.matrix_records", ("envkit.models.matrix", "envkit.models.hccl")),
        ("envkit.lock.records", ("envkit.models.lock", "envkit.models.stack")),
        ("envkit.core.report_records", ("envkit.models.report",)),
    ],
)
def test_each_record_has_its_models_fields_defaults_and_methods(records, modules):
    import importlib

    from pydantic_core import PydanticUndefined

    found = 0
    for name, rec in vars(importlib.import_module(records)).items():
        if not (isinstance(rec, type) and issubclass(rec, Record)) or rec is Record:
            continue
        model = next(getattr(m, name) for m in map(importlib.import_module, modules) if hasattr(m, name))
        assert list(fields(rec)) == list(model.model_fields), name
        assert _public(rec) == _public(model), name
        assert getattr(rec, "dump_drop_none", frozenset()) == getattr(model, "dump_drop_none", frozenset()), name
        required = {f for f, info in model.model_fields.items() if info.default is PydanticUndefined}
        made = rec(**{f: f"<{f}>" for f in required})
        for f, info in model.model_fields.items():
            if f not in required:
                assert getattr(made, f) == info.default, (name, f)
        found += 1
    assert found >= 4


def test_a_record_is_made_with_keywords_and_gets_fresh_list_and_dict_defaults():
    chip = matrix_records.ChipKubernetes
    one = chip(source="s", confidence="stated", accelerator="a", ring_controller="r", pod_npus=[1])
    two = chip(source="s", confidence="stated", accelerator="a", ring_controller="r", pod_npus=[1])
    assert one.accelerator_type == {} and one.multi_node_pod_npus == [] and one == two
    assert one.accelerator_type is not two.accelerator_type and one.multi_node_pod_npus is not two.multi_node_pod_npus
    with pytest.raises(TypeError, match=r"ChipKubernetes\(\) missing required keyword argument: 'pod_npus'"):
        chip(source="s", confidence="stated", accelerator="a", ring_controller="r")
    with pytest.raises(TypeError, match=r"ChipKubernetes\(\) got an unexpected keyword argument 'nope'"):
        chip(source="s", confidence="stated", accelerator="a", ring_controller="r", pod_npus=[1], nope=1)
    with pytest.raises(TypeError):
        chip("s")  # type: ignore[misc]  # keywords only


def test_a_model_method_outside_the_shared_mixins_is_refused_by_the_generator():
    """A model's own method would be missing on its record: the generator names where it belongs."""
    from envkit.models.base import Sourced

    class Own(Sourced):
        id: str

        def label(self) -> str:
            return self.id

    with pytest.raises(SystemExit, match=r"Own.label is a method of the model: move it into a mixin of envkit.models.methods"):
        _generator().table([Own])
    assert _generator().table([Sourced])["Sourced"][2] == "SourcedMethods"


def test_the_shared_methods_answer_on_the_model_and_the_record():
    from envkit.models.matrix import Matrix

    records = load_matrix_from(matrices_dir()).model
    model = Matrix.model_validate(asdict(records))
    assert isinstance(records.torch_npu[0], Record) and not isinstance(model.torch_npu[0], Record)
    for have in (records, model):
        two = next(r for r in have.torch_npu if r.python_by_arch)
        assert two.pythons_on("aarch64") != two.pythons_on("x86_64") and two.pythons_on("riscv64") == []
        one = next(r for r in have.torch_npu if not r.python_by_arch)
        assert one.pythons_on("x86_64") == one.python == one.pythons_on("riscv64")
        listed = next(r for r in have.chips if not isinstance(r.source, str) and len(r.source) > 1)
        assert listed.sources == list(listed.source) and listed.source_text == "; ".join(listed.source)
        assert have.hccl.rank_table("910b") is not None and have.hccl.rank_table("nope") is None
        assert have.hccl.env_rule("HCCL_CONNECT_TIMEOUT").name == "HCCL_CONNECT_TIMEOUT"
    assert [r.pythons_on("aarch64") for r in records.torch_npu] == [r.pythons_on("aarch64") for r in model.torch_npu]


def _copy(tmp_path: Path) -> Path:
    dst = tmp_path / "matrices"
    shutil.copytree(matrices_dir(), dst)
    return dst


@pytest.fixture
def store(tmp_path, monkeypatch):
    monkeypatch.setenv("ENVKIT_CACHE_DIR", str(tmp_path / "cache"))
    folder = _copy(tmp_path)
    validated = load_matrix_from(folder, use_cache=True)
    return folder, validated


def test_a_hit_is_the_validated_matrix_as_plain_records(store, monkeypatch):
    from envkit.models.matrix import Matrix

    folder, validated = store
    assert [p.name for p in _cache_dir().iterdir()] == [_store_path(validated.digest).name]  # one file

    def no_yaml(path):
        raise AssertionError(f"a store hit read {path}")

    monkeypatch.setattr("envkit.core.matrix.fast_load", no_yaml)
    cached = load_matrix_from(folder, use_cache=True)
    assert cached.model is not validated.model and cached.model == validated.model
    assert type(cached.model.chips[0]) is matrix_records.Chip
    assert type(cached.model.hccl.env[0]) is matrix_records.EnvRule
    assert cached.files == validated.files and cached.digest == validated.digest
    # the records hold what the pydantic model validated, field for field
    model = Matrix.model_validate(json.loads(json.dumps(asdict(cached.model))))
    assert asdict(cached.model) == model.model_dump(mode="json")
    assert plain(model) == cached.model


def _resign(path: Path, body: bytes) -> None:
    head = json.loads(path.read_bytes().partition(b"\n")[0])
    head["sha256"] = hashlib.sha256(body).hexdigest()
    path.write_bytes(json.dumps(head).encode() + b"\n" + body)


DAMAGE = [
    "garbage",
    "empty",
    "truncated",
    "body edited",
    "foreign key",
    "other format",
    "missing key",
    "extra key",
    "wrong shape",
    "list of strings",
    "a section from a file outside the matrix",
    "pickle",
]


@pytest.mark.parametrize("damage", DAMAGE)
def test_a_store_file_that_does_not_fit_is_a_miss_and_is_rewritten(store, damage):
    folder, validated = store
    path = _store_path(validated.digest)
    good = path.read_bytes()
    head, _, body = good.partition(b"\n")
    data = json.loads(body)
    if damage == "garbage":
        path.write_bytes(b"{not json")
    elif damage == "empty":
        path.write_bytes(b"")
    elif damage == "truncated":
        path.write_bytes(good[: len(good) // 2])
    elif damage == "body edited":  # the checksum no longer fits
        path.write_bytes(head + b"\n" + body.replace(b'"910b"', b'"910c"', 1))
    elif damage == "foreign key":  # another matrix's store under this name
        h = json.loads(head)
        h["key"] = "0" * 64 + "-" + h["key"].split("-")[1]
        path.write_bytes(json.dumps(h).encode() + b"\n" + body)
    elif damage == "other format":
        h = json.loads(head)
        h["format"] = "envkit-matrix-store/0"
        path.write_bytes(json.dumps(h).encode() + b"\n" + body)
    elif damage == "pickle":
        import pickle

        path.write_bytes(pickle.dumps(validated.model.defaults))
    else:  # well-formed and signed, but not the records' shape
        if damage == "missing key":
            del data["matrix"]["chips"][0]["name"]
        elif damage == "extra key":
            data["matrix"]["chips"][0]["new_field"] = 1
        elif damage == "wrong shape":
            data["matrix"]["chips"] = 3
        elif damage == "list of strings":
            data["matrix"]["hdk"][0]["patches"] = "24.1.rc2.2"
        else:
            data["files"]["chips"] = "../elsewhere.yaml"
        _resign(path, json.dumps(data).encode())
    again = load_matrix_from(folder, use_cache=True)
    assert again.model == validated.model and again.files == validated.files
    assert path.read_bytes() == good  # rebuilt from the YAML


def test_record_refuses_what_is_not_its_shape():
    with pytest.raises(TypeError):
        record(matrix_records.Index, ["pypi"])
    with pytest.raises(TypeError):
        record(matrix_records.Index, {"id": "pypi", "url": "u", "source": "s", "confidence": "stated", "extra": 1})
    assert record(matrix_records.Index, {"id": "pypi", "url": "u", "source": "s", "confidence": "stated"}).id == "pypi"


def test_a_store_hit_imports_no_pydantic_and_no_matrix_model(tmp_path):
    code = "import sys\nfrom envkit.core.matrix import load_matrix\nlm = load_matrix()\nassert lm.model.chips\n" + PRINT_LOADED
    env = {**os.environ, "ENVKIT_CACHE_DIR": str(tmp_path / "cache")}
    runs = [
        subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
        for _ in range(2)
    ]
    assert "envkit.models.matrix" in runs[0].stdout, runs[0].stdout + runs[0].stderr  # a miss validates the YAML
    assert "LOADED []" in runs[1].stdout, runs[1].stdout + runs[1].stderr


def test_records_are_frozen_compared_by_value_and_copied_with_replace():
    import copy

    from envkit.records import Record, asdict, replace

    row = load_matrix_from(matrices_dir()).model.cann[0]
    assert isinstance(row, Record)
    with pytest.raises(AttributeError, match="frozen"):
        row.version = "0.0"  # type: ignore[misc]
    with pytest.raises(AttributeError, match="frozen"):
        del row.version
    other = replace(row, version="0.0")
    assert other.version == "0.0" and row.version != "0.0" and other != row
    assert replace(other, version=row.version) == row
    with pytest.raises(TypeError, match="no field nope"):
        replace(row, nope=1)
    assert copy.deepcopy(row) == row and copy.copy(row) == row
    assert asdict(row)["version"] == row.version and list(asdict(row)) == list(type(row)._fields)
    assert repr(row).startswith("CannRelease(source=")
    with pytest.raises(TypeError):
        hash(row)
    assert matrix_records.Index(id="a", url="u", source="s", confidence="stated") != "a"
