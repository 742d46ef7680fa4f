#!/usr/bin/env python3
"""`make mutation`: mutmut over envkit's core modules with the fast unit tests, then the score per module and
the surviving mutants. A habit, not a gate: it exits 0 whatever the score (non-zero only when mutmut cannot run).

    python tools/mutation.py --modules versions,compare      # a few minutes each on 2 cores
    python tools/mutation.py --modules all                   # every group below: hours on 2 cores
    python tools/mutation.py --report-only --diff            # the last run again, each survivor's diff
    python tools/mutation.py --modules verify --survivors    # after new tests: rerun only the survivors

What is mutated, and the pytest options, are [tool.mutmut] in pyproject.toml; the groups here choose which
mutants a run checks and narrow the tests to each group's own (TESTS). Survivors judged equivalent (no test can tell them apart) are listed, one line each with
the reason, in docs/mutation.md; the report counts them apart.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
EQUIVALENTS = ROOT / "docs" / "mutation.md"
# Each module's verdicts, kept after its group's run: mutmut forgets every earlier verdict when the test selection
# changes (each group has its own), so a run of one group would otherwise wipe the figures of the others.
RESULTS = ROOT / ".mutation"

# group -> the source files it covers (paths as in [tool.mutmut] only_mutate)
MODULES: dict[str, tuple[str, ...]] = {
    "versions": ("envkit/versions.py",),
    "constraints": ("envkit/core/constraints.py",),
    "resolve": (
        "envkit/core/resolve/__init__.py",
        "envkit/core/resolve/explain.py",
        "envkit/core/resolve/hints.py",
        "envkit/core/resolve/pins.py",
        "envkit/core/resolve/search.py",
    ),
    "lockfile": ("envkit/lock/file.py",),
    "lockgate": ("envkit/core/derive.py", "envkit/models/safe.py", "envkit/core/validation.py"),
    # validate's plain lock reader (a lock that holds, read without pydantic) and the validators both paths call
    "lockread": ("envkit/lock/read.py", "envkit/models/rules.py"),
    "verify": ("envkit/jobs/bundle/verify.py",),
    "doctor": ("envkit/jobs/doctor/diagnose.py", "envkit/jobs/doctor/hazards.py"),
    "compare": ("envkit/jobs/smoke/compare.py",),
    # the parsers of untrusted input: bounded values, the file reader, envkit's own JSON, mirror URLs
    "inputs": ("envkit/io/bounded.py", "envkit/io/untrusted.py", "envkit/io/jsonread.py", "envkit/io/urlpath.py"),
    # what decides which files an output folder owns, replaces and refuses to delete
    "outputs": ("envkit/io/outputs.py",),
    # wheel tags and their ranking against the target
    "wheels": ("envkit/artifacts/wheels.py",),
    # the multi-host parsers and renderers: inventories and hccn.conf, rank tables, the HCCL env, hccn_tool checks
    "fleet": (
        "envkit/fleet/inventory.py",
        "envkit/fleet/ranktable.py",
        "envkit/fleet/env.py",
        "envkit/fleet/hccn.py",
    ),
    # issue 35: the surfaces added since: run-args, Kubernetes manifests, the index reader, the HTTP client, provision
    "runargs": ("envkit/export/container.py", "envkit/export/runargs.py"),
    "k8s": ("envkit/export/k8s.py",),
    "index": ("envkit/artifacts/index.py",),
    "http": ("envkit/io/httpclient.py",),
    "provision": ("envkit/jobs/provision/__init__.py",),
    # the two Ansible modules the roles run on each host: only their pure functions (FUNCTIONS); the rest touches the
    # host and is proven by the fleet tests
    "ansible": ("playbooks/plugins/modules/envkit_probe.py", "playbooks/plugins/modules/envkit_fetch.py"),
}

# source file -> the only functions of it a run mutates and scores (files not named here: all of their functions)
FUNCTIONS: dict[str, tuple[str, ...]] = {
    "playbooks/plugins/modules/envkit_probe.py": (
        # the version order and ranges the role asserts (one block with envkit.versions, held byte-equal by a test)
        "version_key",
        "in_range",
        "parse_ranges",
        "in_any_range",
        # the vendor's info files, the OS family, and the decisions each role step takes from the facts
        "info_value",
        "os_family_of",
        "preflight_decide",
        "hdk_decide",
        "firmware_range_check",
        "cann_decide",
        "python_decide",
        "smoke_decide",
        "decide",
    ),
    "playbooks/plugins/modules/envkit_fetch.py": (
        # a file's URL on a mirror, its part file, redirects, the answer's headers, the `files` option, the messages
        "url_of",
        "part_of",
        "_next_hop",
        "_one_header",
        "plan_body",
        "_spec",
        "unique_errors",
        "_why",
    ),
    # a container's devices and mounts (run-args, k8s); the image's environment and tag in the same file are held whole
    # by the image goldens (tests/image/test_render.py, a byte compare of each Dockerfile), which this group does not run
    "envkit/export/container.py": (
        "parse_devices",
        "chip_from_row",
        "chip_from_lock",
        "device_facts",
        "_ranges",
        "container_facts",
    ),
    # the Kubernetes renderer's decisions (what a pod asks for, which options are refused, the HCCL and Ray values);
    # the dict-building of the documents is held whole by the goldens and kustomize, and the shell scripts by the
    # tests that run them (in real time: seconds a mutant)
    "envkit/export/k8s.py": (
        "_canonical",
        "ray_in_lock",
        "_multi_node_resolve",
        "_require_ray",
        "chip_k8s",
        "_check_options",
        "cpu_quantity",
        "memory_quantity",
        "_check_path",
        "_check_model_options",
        "_model_mount",
        "_under",
        "_model_volume",
        "_served_model",
        "_schedule_policy",
        "_npus",
        "_super_pod",
        "_volume_name",
        "_hccl_env",
        "_launch_command",
        "_serve_argv",
        "ray_env",
        "pod_specs",
        "pod_templates",
    ),
}

# group -> the fast unit tests that hold it. mutmut runs, for each mutant, only those of them that reach the mutated
# function; a narrow list keeps a survivor cheap (a core function like Version.parse is reached by every test).
TESTS: dict[str, tuple[str, ...]] = {
    "versions": (
        "tests/core/test_versions.py",
        "tests/mutants/test_versions.py",
        "tests/core/test_spellings.py",
        "tests/doctor/test_drift.py",
    ),
    "constraints": (
        "tests/mutants/test_constraints.py",
        "tests/core/test_resolve.py",
        "tests/core/test_rules_break.py",
        "tests/core/test_matrix.py",
        "tests/core/test_torch_builds.py",
        "tests/core/test_serving.py",
    ),
    "resolve": (
        "tests/core/test_resolve.py",
        "tests/core/test_rules_break.py",
        "tests/core/test_properties.py",
        "tests/mutants/test_resolve.py",
    ),
    "lockfile": (
        "tests/mutants/test_lockfile.py",
        "tests/core/test_lock_and_cli.py",
        "tests/core/test_lock_edits.py",
        "tests/core/test_architecture.py",
    ),
    "lockgate": (
        "tests/mutants/test_lockgate.py",
        "tests/mutants/test_validation_fast.py",
        "tests/mutants/test_derived.py",
        "tests/mutants/test_locking_seams.py",
        "tests/core/test_safe_grammar.py",
        "tests/mutants/test_locking.py",
        "tests/mutants/test_lockgate_check.py",
        "tests/core/test_lock_and_cli.py",
        "tests/core/test_lock_edits.py",
        "tests/core/test_architecture.py",
        "tests/core/test_torch_builds.py",
    ),
    "lockread": (
        "tests/core/test_lockread.py",
        "tests/mutants/test_lockgate.py",
        "tests/core/test_safe_grammar.py",
        "tests/core/test_lock_and_cli.py",
        "tests/core/test_lock_edits.py",
        "tests/hostile/test_lock_gate.py",
        "tests/hostile/test_lock_properties.py",
        "tests/hostile/test_mirror_urls.py",
    ),
    "verify": (
        "tests/hostile/test_archives.py",
        "tests/airgap/test_bundle.py",
        "tests/airgap/test_verify_fast.py",
        "tests/mutants/test_verify_folder.py",
        "tests/mutants/test_verify_archive.py",
    ),
    "doctor": ("tests/doctor", "tests/mutants/test_doctor.py"),
    "compare": (
        "tests/smoke/test_compare_metrics.py",
        "tests/smoke/test_smoke_compare.py",
        "tests/mutants/test_compare.py",
        "tests/smoke/test_compare_runs_fast.py",
    ),
    "inputs": (
        "tests/mutants/test_bounded.py",
        "tests/mutants/test_jsonread.py",
        "tests/mutants/test_untrusted.py",
        "tests/mutants/test_urlpath.py",
        "tests/hostile/test_parser_properties.py",
        "tests/hostile/test_fleet_inputs.py",
        "tests/hostile/test_files.py",
        "tests/hostile/test_mirror_urls.py",
    ),  # not test_http.py nor test_own_json.py: their servers and CLI runs reach every function here, seconds each
    "outputs": (
        "tests/mutants/test_fsutil.py",
        "tests/core/test_fsutil.py",
        "tests/hostile/test_output_manifest.py",
        "tests/hostile/test_outputs.py",
    ),
    "wheels": (
        "tests/mutants/test_wheels.py",
        "tests/core/test_wheels.py",
        "tests/core/test_torch_builds.py",
        "tests/airgap/test_torch_index.py",
    ),
    "fleet": (
        "tests/mutants/test_fleet_inventory.py",
        "tests/mutants/test_fleet_env.py",
        "tests/mutants/test_fleet_ranktable.py",
        "tests/mutants/test_fleet_hccn.py",
        "tests/hostile/test_parser_properties.py",
        "tests/hostile/test_fleet_inputs.py",
        "tests/launch/test_launch.py",
        "tests/doctor/test_hccn.py",
        "tests/provision/test_net_preflight.py",
        "tests/provision/test_provision_unit.py",
    ),
    "runargs": (
        "tests/image/test_run_args.py",
        "tests/image/test_run_args_bounds.py",
        "tests/mutants/test_runargs.py",
        "tests/core/test_chip_as_data.py",
    ),
    "k8s": ("tests/k8s",),
    "index": (
        "tests/hostile/test_index_pages.py",
        "tests/airgap/test_page_redirect_base.py",
        "tests/airgap/test_index_shapes.py",
        "tests/mutants/test_index.py",
    ),
    "http": ("tests/hostile/test_http.py", "tests/hostile/test_http_credentials.py", "tests/airgap/test_page_redirect_base.py"),
    "ansible": (
        "tests/provision/test_probe_decide.py",
        "tests/provision/test_firmware_ranges.py",
        "tests/provision/test_probe_fifo.py",
        "tests/provision/test_fetch_module.py",
        "tests/provision/test_mirror_join.py",
        "tests/provision/test_pull_unit.py",
        "tests/mutants/test_probe.py",
        "tests/mutants/test_fetch.py",
    ),
    "provision": (
        "tests/provision/test_provision_unit.py",
        "tests/provision/test_pull_unit.py",
        "tests/provision/test_fanout_unit.py",
        "tests/provision/test_mirror_join.py",
        "tests/provision/test_firmware_ranges.py",
    ),
}

# mutmut's exit-code verdicts (mutmut/stats.py): 1 and 3 killed, 0 survived, 36/24/152/255/-24 timeout
_KILLED = {1, 3, 37}
_TIMEOUT = {36, 24, 152, 255, -24}
_SURVIVED = {0}
_NO_TESTS = {5, 33}


def _module_name(path: str) -> str:
    name = path[:-3].replace("/", ".")
    return name[: -len(".__init__")] if name.endswith(".__init__") else name


def _mutant_globs(path: str) -> list[str]:
    """mutmut names a mutant `<module>.x_<function>__mutmut_<n>` (methods: `<module>.xǁClassǁmethod__mutmut_<n>`);
    a file of FUNCTIONS, only those functions' mutants."""
    module = _module_name(path)
    if path in FUNCTIONS:
        return [f"{module}.x_{name}__mutmut_*" for name in FUNCTIONS[path]]
    return [module + ".x*"]


def _scored(path: str, codes: dict[str, Any]) -> dict[str, Any]:
    """The verdicts of the mutants a run of `path` checks (`_mutant_globs`): mutmut also lists the others."""
    from fnmatch import fnmatchcase

    globs = _mutant_globs(path)
    return {k: c for k, c in codes.items() if any(fnmatchcase(k, g) for g in globs)}


def equivalents() -> dict[str, str]:
    """Mutant name -> reason, from the table rows of docs/mutation.md (`| module | `name` ... | reason |`)."""
    out: dict[str, str] = {}
    if not EQUIVALENTS.is_file():
        return out
    for line in EQUIVALENTS.read_text(encoding="utf-8").splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) < 3:
            continue
        for name in re.findall(r"`((?:envkit|playbooks)\.[^`\s]+__mutmut_\d+)`", cells[1]):
            out[name] = cells[-1]
    return out


def _run_mutmut(args: list[str]) -> None:
    """mutmut in this process, with one fix: copy folders keeping symlinks as links. mutmut copies tests/ into
    mutants/ following links, and the doctor's fixture roots hold absolute links (`latest -> /usr/local/Ascend/...`)
    that resolve only inside the fixture root, so a plain copy fails on them."""
    plain = shutil.copytree

    def copytree(src: Any, dst: Any, *args: Any, **kwargs: Any) -> Any:
        if not args:  # shutil's own recursion passes symlinks positionally
            kwargs.setdefault("symlinks", True)
        return plain(src, dst, *args, **kwargs)

    shutil.copytree = copytree
    from mutmut import configuration
    from mutmut.__main__ import cli

    if args[:1] == ["run"]:  # an incremental run copies tests/ and also_copy again: links already there would fail it
        for folder in ["tests", *configuration.config().also_copy]:
            shutil.rmtree(ROOT / "mutants" / str(folder).rstrip("/"), ignore_errors=True)

    tests = os.environ.get("ENVKIT_MUTATION_TESTS")
    if tests:  # this run's test files, in place of [tool.mutmut]'s whole list
        configuration.config().pytest_add_cli_args_test_selection = tests.split(os.pathsep)

    cli(args, prog_name="mutmut")


def _results(path: str) -> Path:
    return RESULTS / (path + ".json")


def verdicts(path: str) -> dict[str, int | None] | None:
    """mutant -> mutmut's exit code (None: not checked), as kept after the last run of the module's group."""
    f = _results(path)
    return json.loads(f.read_text(encoding="utf-8")) if f.is_file() else None


def keep_verdicts(groups: list[str], only: list[str] | None) -> None:
    """Copy the run's verdicts out of mutants/: all of them, or (a rerun of some: survivors, --mutants globs) the
    rerun ones' new verdicts and the others' kept ones. Mutants the code no longer has are dropped."""
    from fnmatch import fnmatchcase

    for g in groups:
        for path in MODULES[g]:
            meta = ROOT / "mutants" / (path + ".meta")
            if not meta.is_file():
                continue
            codes = _scored(path, json.loads(meta.read_text(encoding="utf-8"))["exit_code_by_key"])
            if only is not None:
                kept = verdicts(path) or {}
                rerun = {k for k, c in codes.items() if c is not None and any(fnmatchcase(k, pat) for pat in only)}
                codes = {k: (c if k in rerun else kept.get(k)) for k, c in codes.items()}
            dest = _results(path)
            dest.parent.mkdir(parents=True, exist_ok=True)
            tmp = dest.with_suffix(".partial")
            tmp.write_text(json.dumps(codes, indent=0, sort_keys=True) + "\n", encoding="utf-8")
            tmp.replace(dest)


def survivors(groups: list[str]) -> list[str]:
    """The last run's surviving mutants of `groups` that docs/mutation.md does not list as equivalent."""
    eq = equivalents()
    out: list[str] = []
    for g in groups:
        for path in MODULES[g]:
            codes = verdicts(path) or {}
            out += sorted(k for k, c in codes.items() if c in _SURVIVED | _NO_TESTS and k not in eq)
    return out


def run(groups: list[str], jobs: int, fresh: bool, only: list[str] | None = None) -> int:
    """mutmut over the mutants of `groups` (or just the named ones in `only`), with the groups' own tests."""
    if fresh:
        shutil.rmtree(ROOT / "mutants", ignore_errors=True)
    globs = only if only is not None else [glob for g in groups for p in MODULES[g] for glob in _mutant_globs(p)]
    tests = sorted({t for g in groups for t in TESTS[g]})
    cmd = [sys.executable, str(Path(__file__).resolve()), "--mutmut", "run", "--max-children", str(jobs), *globs]
    # the property tests (hypothesis) draw 5 examples, derandomized, per mutant (tests/core/test_properties.py)
    env = {**os.environ, "ENVKIT_MUTATION_TESTS": os.pathsep.join(tests), "ENVKIT_PROPERTY_EXAMPLES": "5"}
    rc = subprocess.call(cmd, cwd=ROOT, env=env)
    if rc == 0:
        keep_verdicts(groups, only)
    return rc


def _diff(name: str) -> str:
    r = subprocess.run(
        [sys.executable, str(Path(__file__).resolve()), "--mutmut", "show", name], cwd=ROOT, capture_output=True, text=True
    )
    return "\n".join(line for line in r.stdout.splitlines() if not line.startswith("#"))


def report(groups: list[str], diff: bool) -> list[str]:
    eq = equivalents()
    lines: list[str] = []
    survivors: list[str] = []
    lines.append(
        f"{'module':32} {'mutants':>7} {'killed':>6} {'timeout':>7} {'survived':>8} {'equiv':>5} {'no test':>7} {'score':>6}"
    )
    for g in groups:
        for path in MODULES[g]:
            codes = verdicts(path)
            if codes is None:
                lines.append(f"{path:32} not run (no {_results(path).relative_to(ROOT)})")
                continue
            killed = sum(1 for c in codes.values() if c in _KILLED)
            timeout = sum(1 for c in codes.values() if c in _TIMEOUT)
            alive = sorted(k for k, c in codes.items() if c in _SURVIVED | _NO_TESTS)
            unchecked = sum(1 for c in codes.values() if c is None)
            equiv = [k for k in alive if k in eq]
            notest = sum(1 for k in alive if codes[k] in _NO_TESTS)
            total = len(codes) - unchecked
            # equivalent mutants are not faults: the score is over the others
            denom = total - len(equiv)
            score = f"{100.0 * (killed + timeout) / denom:5.1f}%" if denom else "  n/a"
            extra = f"  ({unchecked} not checked)" if unchecked else ""
            lines.append(
                f"{path:32} {total:7} {killed:6} {timeout:7} {len(alive) - len(equiv):8} {len(equiv):5} "
                f"{notest:7} {score:>6}{extra}"
            )
            survivors += [k for k in alive if k not in eq]
    lines.append("")
    lines.append(f"surviving mutants ({len(survivors)}; `python tools/mutation.py --mutmut show NAME` for a diff):")
    for name in survivors:
        lines.append(f"  {name}")
        if diff:
            lines += ["    " + d for d in _diff(name).splitlines()]
    return lines


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--mutmut"]:
        _run_mutmut(argv[1:])
        return 0
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--modules",
        default=os.environ.get("MODULES", ""),
        help=f"comma-separated groups, or all (the default): {', '.join(MODULES)}",
    )
    ap.add_argument("--jobs", type=int, default=int(os.environ.get("MUTATION_JOBS", "2")))
    ap.add_argument("--keep", action="store_true", help="reuse mutants/ from the last run (incremental)")
    ap.add_argument(
        "--survivors",
        action="store_true",
        help="rerun only the last run's survivors (after new tests; implies --keep): minutes instead of a whole run",
    )
    ap.add_argument(
        "--mutants",
        nargs="+",
        default=[],
        metavar="GLOB",
        help="rerun these mutants too (mutmut names or globs, e.g. 'envkit.jobs.bundle.verify.x__verify_folder*' after a "
        "function changed: its mutants are renumbered); implies --keep",
    )
    ap.add_argument("--report-only", action="store_true", help="print the last run's figures, run nothing")
    ap.add_argument("--diff", action="store_true", help="print each survivor's diff")
    a = ap.parse_args(argv)
    groups = [g.strip() for g in a.modules.split(",") if g.strip() and g.strip() != "all"]
    if not groups or "all" in a.modules.split(","):
        groups = list(MODULES)
    unknown = [g for g in groups if g not in MODULES]
    if unknown:
        print(f"error: unknown module group(s) {', '.join(unknown)}; known: {', '.join(MODULES)}", file=sys.stderr)
        return 2
    if (a.survivors or a.mutants) and not a.report_only:
        alive = (survivors(groups) if a.survivors else []) + a.mutants
        if not alive:
            print("no survivors to rerun (run the groups first, or every survivor is listed as equivalent)")
        else:
            rc = run(groups, a.jobs, fresh=False, only=alive)
            if rc != 0:
                print(f"error: mutmut exited {rc}; its output is above", file=sys.stderr)
                return rc
    elif not a.report_only:
        rc = run(groups, a.jobs, fresh=not a.keep)
        if rc != 0:
            print(f"error: mutmut exited {rc}; its output is above", file=sys.stderr)
            return rc
    print("\n".join(report(groups, a.diff)))
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except BrokenPipeError:  # the report piped into `head`: stop quietly
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        sys.exit(1)
