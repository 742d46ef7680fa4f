"""A hostile project: FIFOs, links out of the root, a 50 MB file, an include cycle, non-UTF-8 and unparsable files, a
link loop, a non-literal setup.py. The scan reads none of them past its rules: no traceback, no hang, each one an
`info` finding, and nothing outside the project is read."""

from __future__ import annotations

import os

import pytest

from tests.scan.conftest import by_rule


@pytest.fixture
def hostile(tmp_path):
    root = tmp_path / "project"
    root.mkdir()
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.py").write_text("import torch\ntorch.cuda.synchronize()\n")
    (outside / "reqs.txt").write_text("flash-attn\n")
    os.mkfifo(root / "evil.py")
    os.mkfifo(root / "requirements-fifo.txt")
    (root / "leak.py").symlink_to(outside / "secret.py")
    (root / "requirements-leak.txt").symlink_to(outside / "reqs.txt")
    (root / "linked-dir").symlink_to(outside)  # a link to a folder: not followed
    (root / "loop").symlink_to(root)
    with open(root / "big.py", "wb") as fh:  # 50 MB, sparse
        fh.truncate(50 << 20)
    (root / "latin.py").write_bytes(b"import torch\nx = '\xff\xfe'  # cuda\n")
    (root / "broken.py").write_text("import torch\ndef f(:\n    torch.cuda.synchronize()\n")
    (root / "nul.py").write_bytes(b"import torch\nx = torch.cuda.is_available()\x00\n")
    (root / "deep.py").write_text("x = " + "(" * 300 + "1" + ")" * 300 + "  # cuda\n")
    (root / "requirements-a.txt").write_text("-r requirements-b.txt\nnumpy\n")
    (root / "requirements-b.txt").write_text(
        f"-r requirements-a.txt\n-r {outside / 'reqs.txt'}\n-r ../outside/reqs.txt\n-r requirements-leak.txt\n-r requirements-fifo.txt\n"
    )
    (root / "requirements-latin.txt").write_bytes(b"torch\xff\n")
    (root / "pyproject.toml").write_text("[project\nname=")
    (root / "setup.py").write_text("from setuptools import setup\nsetup(install_requires=open('r.txt').read().splitlines())\n")
    (root / "environment.yml").write_text("dependencies: [&a [*a, *a]]\n")
    (root / "setup.cfg").write_text("[options\ninstall_requires = x\n")
    return root


@pytest.mark.timeout(60)
def test_a_hostile_project_gives_findings_not_tracebacks(hostile, scan_json):
    code, doc = scan_json(str(hostile))
    assert code == 0  # nothing blocks: everything hostile is an info finding
    got = by_rule(doc)
    assert got == {
        ("big.py:None", "scan-unreadable"): "info",
        ("broken.py:2", "scan-syntax-error"): "info",
        ("deep.py:1", "scan-syntax-error"): "info",
        ("environment.yml:1", "scan-unreadable"): "info",
        ("evil.py:None", "scan-unreadable"): "info",
        ("latin.py:2", "scan-syntax-error"): "info",
        ("leak.py:None", "scan-unreadable"): "info",
        ("nul.py:None", "scan-syntax-error"): "info",
        ("pyproject.toml:None", "scan-unreadable"): "info",
        ("requirements-b.txt:1", "dep-include-cycle"): "info",
        ("requirements-b.txt:2", "dep-include-outside"): "info",
        ("requirements-b.txt:3", "dep-include-outside"): "info",
        ("requirements-b.txt:4", "dep-include-outside"): "info",
        ("requirements-b.txt:5", "dep-include-outside"): "info",
        ("requirements-fifo.txt:None", "scan-unreadable"): "info",
        ("requirements-latin.txt:None", "scan-unreadable"): "info",
        ("requirements-leak.txt:None", "scan-unreadable"): "info",
        ("setup.cfg:None", "scan-unreadable"): "info",
        ("setup.py:2", "dep-not-literal"): "info",
    }
    messages = {f["path"]: f["message"] for f in doc["findings"]}
    assert "FIFO" in messages["evil.py"] and "not opened" in messages["evil.py"]
    assert "leads out of" in messages["leak.py"]
    assert "over the" in messages["big.py"]
    assert str(hostile) not in " ".join(messages.values())  # paths relative to the project
    assert [d["name"] for d in doc["dependencies"]] == ["numpy"]  # nothing from outside the root
    assert not [f for f in doc["findings"] if "secret" in f["path"] or f["path"].startswith("linked-dir")]


@pytest.mark.timeout(60)
def test_caps_bound_the_walk(tmp_path, monkeypatch, scan_json):
    from envkit.artifacts.project import deps, walk

    monkeypatch.setattr(walk, "MAX_PYTHON_FILES", 3)
    monkeypatch.setattr(walk, "MAX_DEPTH", 2)
    monkeypatch.setattr(deps, "MAX_DEPENDENCIES", 3)
    (tmp_path / "requirements.txt").write_text("".join(f"pkg{i}\n" for i in range(10)))
    for i in range(5):
        (tmp_path / f"m{i}.py").write_text("import torch\ntorch.cuda.synchronize()\n")
    deep = tmp_path / "a" / "b" / "c"
    deep.mkdir(parents=True)
    (deep / "x.py").write_text("import torch\ntorch.cuda.synchronize()\n")
    code, doc = scan_json(str(tmp_path))
    assert code == 0
    assert doc["summary"]["python_files"] == 3
    limits = [f["message"] for f in doc["findings"] if f["rule"] == "scan-limit"]
    assert any("Python files" in m for m in limits) and any("deeper than 2" in m for m in limits)
    assert any("more than 3 dependencies" in m for m in limits) and len(doc["dependencies"]) == 3


@pytest.mark.timeout(60)
def test_a_huge_dependency_list_stays_linear(tmp_path, scan_json):
    """40,000 requirement strings in pyproject.toml (under the 1 MiB cap): read up to the cap in well under the
    timeout (finding each one's line is bounded, not quadratic)."""
    items = ",\n".join(f'  "pkg{i}>=1"' for i in range(40_000))
    (tmp_path / "pyproject.toml").write_text(f'[project]\nname = "x"\ndependencies = [\n{items}\n]\n')
    code, doc = scan_json(str(tmp_path))
    assert code == 0 and len(doc["dependencies"]) == 5000
    assert doc["dependencies"][-1]["from"] == "pyproject.toml:5003"  # pkg4999: lines 4 to 5003
