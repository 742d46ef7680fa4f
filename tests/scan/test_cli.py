"""`envkit scan` on the command line: the JSON document's shape, SARIF 2.1.0, the text report, exit codes, the lock
gate."""

from __future__ import annotations

import json

import jsonschema
import pytest
import yaml

from tests.scan.conftest import PROJECTS

FINDING_KEYS = {"kind", "path", "line", "rule", "severity", "message", "fix", "source", "confidence"}
DEPENDENCY_KEYS = {"name", "spec", "from", "locked", "group", "class"}

# The parts of the SARIF 2.1.0 schema (docs.oasis-open.org sarif-schema-2.1.0.json) that code-scanning tools need:
# version, runs[].tool.driver.name and rules[].id, results[].ruleId/level/message and their physical locations.
SARIF_REQUIRED = {
    "type": "object",
    "required": ["version", "runs"],
    "properties": {
        "version": {"const": "2.1.0"},
        "$schema": {"type": "string", "format": "uri"},
        "runs": {
            "type": "array",
            "minItems": 1,
            "items": {
                "type": "object",
                "required": ["tool", "results"],
                "properties": {
                    "tool": {
                        "type": "object",
                        "required": ["driver"],
                        "properties": {
                            "driver": {
                                "type": "object",
                                "required": ["name", "rules"],
                                "properties": {
                                    "name": {"type": "string", "minLength": 1},
                                    "rules": {
                                        "type": "array",
                                        "items": {
                                            "type": "object",
                                            "required": ["id", "shortDescription", "defaultConfiguration"],
                                            "properties": {
                                                "id": {"type": "string"},
                                                "shortDescription": {
                                                    "type": "object",
                                                    "required": ["text"],
                                                    "properties": {"text": {"type": "string"}},
                                                },
                                                "defaultConfiguration": {
                                                    "type": "object",
                                                    "properties": {"level": {"enum": ["none", "note", "warning", "error"]}},
                                                },
                                            },
                                        },
                                    },
                                },
                            }
                        },
                    },
                    "results": {
                        "type": "array",
                        "items": {
                            "type": "object",
                            "required": ["ruleId", "level", "message", "locations"],
                            "properties": {
                                "ruleId": {"type": "string"},
                                "ruleIndex": {"type": "integer", "minimum": 0},
                                "level": {"enum": ["none", "note", "warning", "error"]},
                                "message": {"type": "object", "required": ["text"], "properties": {"text": {"type": "string"}}},
                                "locations": {
                                    "type": "array",
                                    "minItems": 1,
                                    "items": {
                                        "type": "object",
                                        "required": ["physicalLocation"],
                                        "properties": {
                                            "physicalLocation": {
                                                "type": "object",
                                                "required": ["artifactLocation"],
                                                "properties": {
                                                    "artifactLocation": {
                                                        "type": "object",
                                                        "required": ["uri"],
                                                        "properties": {"uri": {"type": "string", "format": "uri-reference"}},
                                                    },
                                                    "region": {
                                                        "type": "object",
                                                        "required": ["startLine"],
                                                        "properties": {
                                                            "startLine": {"type": "integer", "minimum": 1},
                                                            "startColumn": {"type": "integer", "minimum": 1},
                                                        },
                                                    },
                                                },
                                            }
                                        },
                                    },
                                },
                            },
                        },
                    },
                },
            },
        },
    },
}


def test_the_json_document(scan_json, lock_aarch64):
    code, doc = scan_json(str(PROJECTS / "cuda-package"), "--lock", str(lock_aarch64))
    assert code == 1
    assert {"project", "findings", "dependencies"} <= set(doc)
    assert doc["project"] == str(PROJECTS / "cuda-package") and doc["lock"] == str(lock_aarch64)
    assert doc["findings"] and doc["dependencies"]
    for f in doc["findings"]:
        assert set(f) == FINDING_KEYS, f
        assert f["kind"] in ("code", "dependency") and f["severity"] in ("block", "warn", "info")
        assert isinstance(f["line"], int) and f["line"] >= 1 or f["line"] is None
    for d in doc["dependencies"]:
        assert set(d) == DEPENDENCY_KEYS, d
        assert d["class"] in ("no-ascend-build", "ascend-route", "fine", "unlisted")
    summary = doc["summary"]
    assert summary["block"] == sum(f["severity"] == "block" for f in doc["findings"])
    assert summary["python_files"] == 3 and summary["dependency_files"] == ["pyproject.toml", "setup.py"]


def test_sarif_2_1_0(run_cli, tmp_path):
    out = tmp_path / "scan.sarif"
    r = run_cli("scan", str(PROJECTS / "gpt-trainer"), "--sarif", str(out))
    assert r.code == 1, r.err
    log = json.loads(out.read_text())
    jsonschema.validate(log, SARIF_REQUIRED, format_checker=jsonschema.FormatChecker())
    run = log["runs"][0]
    rules = run["tool"]["driver"]["rules"]
    assert run["tool"]["driver"]["name"] == "envkit scan"
    for result in run["results"]:
        assert rules[result["ruleIndex"]]["id"] == result["ruleId"]
    levels = {(r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"], r["locations"][0]["physicalLocation"]["region"]["startLine"], r["ruleId"]): r["level"] for r in run["results"]}  # fmt: skip
    assert levels[("train.py", 55, "cuda-autocast-device-type")] == "error"
    assert levels[("train.py", 41, "cuda-api")] == "warning"
    assert levels[("train.py", 78, "torch-compile")] == "note"
    assert all("{" not in rule["help"]["text"].split("Severity:")[0] for rule in rules)


def test_the_text_report(run_cli):
    r = run_cli("scan", str(PROJECTS / "gpt-trainer"))
    assert r.code == 1
    lines = r.out.splitlines()
    assert lines[0] == f"{PROJECTS / 'gpt-trainer'}: 3 block, 13 warn, 1 info (3 Python file(s), 0 dependency file(s))"
    assert any(line.startswith("block  train.py:55  [cuda-autocast-device-type]") for line in lines)
    assert "       ascend: torch.npu.amp.GradScaler (dynamic=False for a static scale)" in lines
    assert lines[-1] == "blocked: something fails or computes elsewhere on an NPU (exit 1)"
    quiet = run_cli("scan", str(PROJECTS / "gpt-trainer"), "--no-info")
    assert "[torch-compile]" not in quiet.out and "[cuda-api]" in quiet.out


def test_exit_codes(run_cli, tmp_path):
    assert run_cli("scan", str(PROJECTS / "hf-trainer")).code == 0
    assert run_cli("scan", str(PROJECTS / "gpt-trainer")).code == 1
    assert run_cli("scan", str(PROJECTS / "gpt-trainer" / "train.py")).code == 1  # one file
    assert run_cli("scan", str(PROJECTS / "gpt-trainer" / "device_utils.py")).code == 0
    missing = run_cli("scan", str(tmp_path / "nope"))
    assert missing.code == 2 and "does not exist" in missing.err
    (tmp_path / "notes.md").write_text("cuda")
    assert run_cli("scan", str(tmp_path / "notes.md")).code == 2
    assert run_cli("scan", str(PROJECTS / "hf-trainer"), "--lock", str(tmp_path / "nope.lock")).code == 2
    r = run_cli("scan", str(PROJECTS / "hf-trainer"), "--lock", str(tmp_path / "nope.lock"), "--json")
    assert json.loads(r.out)["error"]["exit_code"] == 2
    empty = tmp_path / "empty"
    empty.mkdir()
    r = run_cli("scan", str(empty))
    assert r.code == 0 and "0 block, 0 warn, 0 info" in r.out


def test_an_edited_lock_is_refused_as_by_every_command(run_cli, lock_aarch64, tmp_path):
    doc = yaml.safe_load(lock_aarch64.read_text())
    doc["layout"]["home"] = "/opt/elsewhere"
    edited = tmp_path / "edited.lock"
    edited.write_text(yaml.safe_dump(doc, sort_keys=False))
    r = run_cli("scan", str(PROJECTS / "hf-trainer"), "--lock", str(edited))
    assert r.code == 2 and "layout.home" in r.err and "Traceback" not in r.err
    assert run_cli("--accept-edited-lock", "scan", str(PROJECTS / "hf-trainer"), "--lock", str(edited)).code == 0


def test_control_characters_in_the_project_are_escaped(run_cli, tmp_path):
    (tmp_path / "evil\x1b[2J.py").write_text("import torch\ntorch.cuda.synchronize()  # \x1b]0;title\x07\n")
    r = run_cli("scan", str(tmp_path))
    assert r.code == 0
    assert "\x1b" not in r.out and "\\x1b" in r.out


@pytest.mark.parametrize("argv", [["scan", "--help"]])
def test_help(run_cli, argv):
    r = run_cli(*argv)
    assert r.code == 0 and "Example:" in r.out and "--sarif" in r.out


def test_the_readme_shows_a_real_report(run_cli, monkeypatch):
    """The README's report is what `envkit scan` prints for the test trainer today."""
    root = PROJECTS.parents[2]
    text = (root / "README.md").read_text()
    command = "$ envkit scan tests/fixtures/projects/gpt-trainer/train.py\n"
    shown = text[text.index(command) + len(command) :].split("```", 1)[0]
    monkeypatch.chdir(root)
    r = run_cli("scan", "tests/fixtures/projects/gpt-trainer/train.py")
    assert r.code == 1 and r.out == shown
