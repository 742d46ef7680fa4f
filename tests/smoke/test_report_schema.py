"""The smoke run's report.json against the committed JSON Schema (envkit/schemas/smoke-report.schema.json, generated
from envkit.models.smoke) with check-jsonschema: a real CPU run's report passes, broken copies fail it as they fail
the model."""

from __future__ import annotations

import copy
import json

import pytest

from envkit.schemas import HERE
from tests.core.test_schemas import check_jsonschema

pytestmark = pytest.mark.torch


def test_a_real_report_passes_the_committed_schema_and_broken_ones_fail(run_fp32, tmp_path):
    from pydantic import ValidationError

    from envkit.models.smoke import SmokeReport

    report = run_fp32.out_dir / "report.json"
    schema = str(HERE / "smoke-report.schema.json")
    r = check_jsonschema("--schemafile", schema, str(report))
    assert r.returncode == 0, r.stdout + r.stderr

    doc = json.loads(report.read_text())
    cases = {
        "device-type": lambda d: d.update(device_type="tpu"),
        "no-timings": lambda d: d.pop("timings"),
        "unknown-key": lambda d: d.update(extra=1),
        "check-ok-as-text": lambda d: d["checks"][0].update(ok="true"),
        "schema-version": lambda d: d.update(schema_version=2),
    }
    for name, edit in cases.items():
        bad = copy.deepcopy(doc)
        edit(bad)
        path = tmp_path / f"{name}.json"
        path.write_text(json.dumps(bad))
        r = check_jsonschema("--schemafile", schema, str(path))
        assert r.returncode == 1, (name, r.stdout + r.stderr)
        with pytest.raises(ValidationError):
            SmokeReport.model_validate_json(path.read_text(), strict=True)
