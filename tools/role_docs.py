#!/usr/bin/env python3
"""Write each role's README.md from what the role declares: its Galaxy metadata (meta/main.yml: description,
platforms, dependencies) and its variables (meta/argument_specs.yml: type, default, description). The role files
are the one source; tests/provision/test_collection.py checks that the committed READMEs are what this writes.

    python tools/role_docs.py            # rewrite playbooks/roles/*/README.md
    python tools/role_docs.py --check    # exit 1 when one is stale
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
ROLES = ROOT / "playbooks" / "roles"
COLLECTION = "envkit.ascend"  # playbooks/galaxy.yml: namespace.name


def _cell(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False) if not isinstance(value, str) else (value or '""')
    return text.replace("|", "\\|").replace("<", "&lt;").replace("\n", " ")


def render(role: Path) -> str:
    meta = yaml.safe_load((role / "meta" / "main.yml").read_text(encoding="utf-8"))
    specs = yaml.safe_load((role / "meta" / "argument_specs.yml").read_text(encoding="utf-8"))
    info = meta["galaxy_info"]
    main = specs["argument_specs"]["main"]
    deps = [d["role"] if isinstance(d, dict) else d for d in meta.get("dependencies") or []]
    platforms = "; ".join(f"{p['name']} {', '.join(str(v) for v in p['versions'])}" for p in info["platforms"])
    lines = [
        f"# {role.name}",
        "",
        "<!-- written by tools/role_docs.py from meta/main.yml and meta/argument_specs.yml: edit those, then run it -->",
        "",
        info["description"],
        "",
        f"Part of the `{COLLECTION}` collection (playbooks/galaxy.yml). envkit runs it through `envkit provision`,",
        "which renders every variable below from the lock into one vars file (`-e @vars.yml`): set them by hand only",
        "when you run the role without envkit.",
        "",
        "```yaml",
        "- hosts: npu_hosts",
        "  become: true",
        "  gather_facts: false",
        "  roles:",
        f"    - role: {COLLECTION}.{role.name}",
        "```",
        "",
        f"- Platforms: {platforms}: the operating systems of matrices/platform.yaml that Galaxy has a name for",
        "  (openEuler 22.03/24.03 and Kylin V10, rhel-family targets there, have none).",
        f"- Requires ansible-core {info['min_ansible_version']} or later on the controller. ansible-core 2.18 and later",
        "  run modules with Python 3.8 or newer on the host: CentOS 7.6 (Python 3.6) and Debian 10 (3.7) need",
        "  ansible-core 2.16 or 2.17, or a newer Python on the host (`ansible_python_interpreter`).",
        f"- Depends on: {', '.join(f'`{d}`' for d in deps) if deps else 'nothing'}.",
        "",
        "## Variables",
        "",
        "| variable | type | default | description |",
        "| --- | --- | --- | --- |",
    ]
    for name, opt in main.get("options", {}).items():
        kind = opt.get("type", "str") + (f" of {opt['elements']}" if opt.get("elements") else "")
        lines.append(f"| `{name}` | {kind} | `{_cell(opt.get('default'))}` | {_cell(opt.get('description', ''))} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--check", action="store_true", help="exit 1 when a README is not what this writes")
    a = ap.parse_args(argv)
    stale = []
    for role in sorted(p for p in ROLES.iterdir() if (p / "meta" / "main.yml").is_file()):
        text, path = render(role), role / "README.md"
        if path.is_file() and path.read_text(encoding="utf-8") == text:
            continue
        stale.append(path)
        if not a.check:
            path.write_text(text, encoding="utf-8")
    for path in stale:
        print(f"{'stale' if a.check else 'wrote'} {path.relative_to(ROOT)}")
    return 1 if a.check and stale else 0


if __name__ == "__main__":
    sys.exit(main())
