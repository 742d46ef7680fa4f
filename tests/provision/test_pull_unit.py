"""Pull mode without hosts (issue 27): the mirror URLs (untrusted input), the pull plan from a verified bundle and
the vars it renders; the roles' own URL check agrees with envkit's."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from envkit.errors import BadInput, CheckFailed
from envkit.executor.ansible import dump_vars
from envkit.jobs.provision import (
    MAX_URL,
    Mirror,
    locate_bundle,
    parse_mirror,
    parse_mirrors,
    plan_pull,
    render_vars,
    stage_artifacts,
)
from envkit.lock.file import read_lock
from tests.airgap.mirror import seal
from tests.conftest import plain_id
from tests.provision.conftest import local_ansible_playbook
from tests.provision.fleet import resolve_lock, sha256, write_vendor

ROOT = Path(__file__).resolve().parents[2]


def role_url_pattern() -> str:
    """The regex envkit_preflight's probe checks each mirror URL with (plugins/modules/envkit_probe.py: MIRROR_URL)."""
    from tests.provision.conftest import load_probe

    return load_probe().MIRROR_URL.pattern


GOOD = [
    ("http://10.0.0.5:8080", Mirror("http://10.0.0.5:8080")),
    ("https://mirror.example/bundles/v1/", Mirror("https://mirror.example/bundles/v1")),
    ("rack1=http://10.0.1.5:80", Mirror("http://10.0.1.5:80", "rack1")),
    ("http://[fd00::5]:8080/b", Mirror("http://[fd00::5]:8080/b")),
    ("http://h/a%20b/c+d", Mirror("http://h/a%20b/c+d")),
    ("http://h/" + "a" * (MAX_URL - len("http://h/")), None),  # the longest accepted
]
BAD = [
    ("", "empty"),
    ("http://h/" + "a" * (MAX_URL - len("http://h/") + 1), f"longer than {MAX_URL}"),  # one past it
    ("ftp://h/x", "not an http"),
    ("file:///srv/bundle", "not an http"),
    ("h:8080", "not an http"),
    ("http://user:pw@h/x", "credentials"),
    ("http://user@h/x", "credentials"),
    ("http://h/x?a=1", "query or fragment"),
    ("http://h/x#top", "query or fragment"),
    ("http://h/a b", "' '"),
    ("http://h/a\nb", "'\\n'"),
    ("http://h/{{ lookup('pipe', 'id') }}", "'{'"),
    ("http://h/it's", '"\'"'),
    ("http://h\\x/", "'\\\\'"),
    ("http://hé/", "'é'"),
    ("http:///path", "no host"),
    ("http://h:99999/", "port"),
    ("http://h:0/", "port 0"),
    ("http://h/%2e%2e/secret", ".."),
    ("rack 1=http://h/", "not an http"),  # not a group name: the whole value is the URL
]


@pytest.mark.parametrize(("value", "want"), GOOD, ids=[v[:40] for v, _ in GOOD])
def test_good_mirror_urls(value, want):
    got = parse_mirror(value)
    if want is not None:
        assert got == want
    assert re.match(role_url_pattern(), got.url), got.url  # the roles accept what envkit accepts


@pytest.mark.parametrize(("value", "why"), BAD, ids=[plain_id(v[:40]) for v, _ in BAD])
def test_bad_mirror_urls_are_bad_input(value, why):
    with pytest.raises(BadInput) as e:
        parse_mirror(value)
    assert why in e.value.message and e.value.hint


@pytest.mark.parametrize(
    "url",
    [
        "ftp://h/x",
        "http://user:pw@h/x",
        "http://h/a\n",
        "http://h/a b",
        "http://h/{{ x }}",
        "http://h/x?q",
        "http://h/it's",
        "http://h\\x/",
    ],
)
def test_the_roles_refuse_what_envkit_refuses(url):
    """A URL given another way (-e, the inventory) is checked by envkit_preflight with the same classes."""
    assert not re.match(role_url_pattern(), url)


def test_the_roles_check_urls_as_envkit_does(tmp_path):
    """envkit_preflight's own check, the probe module run by Ansible: it refuses exactly the URLs envkit refuses (of
    these), in one error that names each."""
    from tests.provision.conftest import run_probe

    ap = local_ansible_playbook()
    urls = [parse_mirror(v).url for v, _ in GOOD] + [v for v, _ in BAD if v]
    # as envkit writes its vars (a value with a `{` tagged !unsafe: the lookup below is data, never run)
    (tmp_path / "urls.yml").write_text(dump_vars({"urls": urls}, "test"))
    args = {"npu_smi": False, "hccn": False, "expect": {"preflight": {"host": "h", "mirrors": "{{ urls }}", "min_free_gb": 0}}}
    p = run_probe(ap, tmp_path, args, 120, "-e", f"@{tmp_path / 'urls.yml'}")
    assert p.returncode == 0, p.stdout + p.stderr
    errors = json.loads((tmp_path / "result.json").read_text())["ansible_facts"]["envkit_state"]["decide"]["errors"]
    lead = "Not a mirror URL (http or https, a host, no credentials, query or quotes): "
    refused = [e for e in errors if e.startswith(lead)]
    assert len(refused) == 1
    # the roles' check is the characters, the scheme, no credentials, no query: the length, the port and the
    # decoded path are envkit's alone (a URL given with -e gets only the roles' check)
    role_accepts = {BAD[1][0], "http://h:99999/", "http://h:0/", "http://h/%2e%2e/secret"}
    assert refused[0] == lead + ", ".join(v for v, _ in BAD if v and v not in role_accepts)


def test_parse_mirrors_keeps_the_order_and_drops_repeats():
    got = parse_mirrors(["http://a", "g=http://b", "http://a/", "http://c"])
    assert got == (Mirror("http://a"), Mirror("http://b", "g"), Mirror("http://c"))


@pytest.fixture
def lock(tmp_path_factory):
    return resolve_lock(tmp_path_factory.mktemp("lock") / "old.lock", "--cann", "8.3.RC1")


@pytest.fixture
def bundle(tmp_path, lock) -> Path:
    root = tmp_path / "bundle"
    write_vendor(lock, root / "vendor")
    w = root / "wheels"
    w.mkdir()
    (w / "six-1.17.0-py2.py3-none-any.whl").write_bytes(b"not really a wheel")
    (w / "requirements.txt").write_text(f"six==1.17.0 --hash=sha256:{sha256(w / 'six-1.17.0-py2.py3-none-any.whl')}\n")
    return seal(root)


def test_pull_vars_from_a_verified_bundle(bundle, lock):
    paths = locate_bundle(bundle, None, None)
    mirrors = parse_mirrors(["rack1=http://10.0.1.5:8080", "http://10.0.0.5:8080/"])
    plan = plan_pull(bundle, paths, mirrors, stage_artifacts(read_lock(lock), paths.vendor))
    v = render_vars(read_lock(lock), lock_path=lock, bundle=paths, pull=plan)
    assert v["envkit_preflight_bundle_urls"] == ["http://10.0.0.5:8080"]
    assert v["envkit_preflight_bundle_group_urls"] == [{"group": "rack1", "url": "http://10.0.1.5:8080"}]
    assert v["envkit_hdk_bundle_dir"] == v["envkit_cann_bundle_dir"] == "vendor"
    whl = bundle / "wheels" / "six-1.17.0-py2.py3-none-any.whl"
    assert v["envkit_python_bundle_wheels"] == [
        {"path": "wheels/six-1.17.0-py2.py3-none-any.whl", "sha256": sha256(whl), "size": whl.stat().st_size}
    ]
    assert v["envkit_python_bundle_requirements"] == "wheels/requirements.txt"
    # each file's size (the manifest's): a mirror that sends more is refused
    assert v["envkit_python_bundle_requirements_size"] == (bundle / "wheels" / "requirements.txt").stat().st_size
    assert v["envkit_hdk_driver"]["size"] == (bundle / "vendor" / v["envkit_hdk_driver"]["src"]).stat().st_size
    assert v["envkit_python_requirements_sha256"] == sha256(bundle / "wheels" / "requirements.txt")
    assert v["envkit_hdk_driver"]["sha256"] == sha256(bundle / "vendor" / v["envkit_hdk_driver"]["src"])
    text = dump_vars(v, "test")
    # a URL cannot hold a `{` (parse_mirror): it is written plain; dump_vars tags any string that could hold Jinja
    assert "envkit_preflight_bundle_urls:\n  - http://10.0.0.5:8080\n" in text
    # push mode: none of them
    push = render_vars(read_lock(lock), lock_path=lock, bundle=paths)
    assert not {k for k in push if "bundle_" in k}


def test_pull_needs_the_files_of_the_manifest(bundle, lock, tmp_path):
    mirrors = parse_mirrors(["http://10.0.0.5:8080"])
    paths = locate_bundle(bundle, None, None)
    staged = stage_artifacts(read_lock(lock), paths.vendor)
    with pytest.raises(BadInput, match="needs --bundle DIR"):
        plan_pull(None, locate_bundle(None, bundle / "vendor", bundle / "wheels"), mirrors, staged)
    other = tmp_path / "elsewhere"
    (other / "vendor").mkdir(parents=True)
    with pytest.raises(BadInput, match="outside --bundle"):
        plan_pull(bundle, type(paths)(other / "vendor", None, None), mirrors, staged)
    # a wheel changed after the manifest was written: refused, named
    whl = bundle / "wheels" / "six-1.17.0-py2.py3-none-any.whl"
    whl.write_bytes(whl.read_bytes() + b"#")
    with pytest.raises(CheckFailed, match="wheels/six-1.17.0-py2.py3-none-any.whl not as the bundle's manifest lists"):
        plan_pull(bundle, paths, mirrors, staged)
    seal(bundle)
    plan_pull(bundle, paths, mirrors, staged)
    # a vendor file the manifest does not list with the hash the lock/SHA256SUMS gave
    manifest = json.loads((bundle / "manifest.json").read_text())
    manifest["files"] = [f for f in manifest["files"] if not f["path"].endswith(staged[0].src)]
    (bundle / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(CheckFailed, match=f"vendor/{re.escape(staged[0].src)} not as"):
        plan_pull(bundle, paths, mirrors, staged)
    (bundle / "manifest.json").write_text("{}")
    with pytest.raises(BadInput, match="not a bundle manifest"):
        plan_pull(bundle, paths, mirrors, staged)
    (bundle / "manifest.json").unlink()
    with pytest.raises(BadInput, match="needs --bundle DIR"):
        plan_pull(bundle, paths, mirrors, staged)


def test_the_cli_refuses_a_bad_url_before_writing_anything(bundle, lock, tmp_path):
    out = tmp_path / "out"
    p = subprocess.run(
        [
            sys.executable,
            "-m",
            "envkit",
            "provision",
            "-i",
            "h1,",
            "--lock",
            str(lock),
            "--bundle",
            str(bundle),
            "--bundle-url",
            "http://user:secret@10.0.0.5/",
            "--out",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert p.returncode == 2, p.stderr
    assert "credentials in a URL are refused" in p.stderr and not out.exists()


def test_the_benchmark_model_counts_the_copies_of_the_busiest_sender():
    """benchmarks/pull.py's model: push and pull send every copy from one machine, a mirror per group ceil(H/G),
    fan-out G + ceil(H/G) - 1 on its longest path; the fixed cost once per batch of forks hosts."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("bench_pull", ROOT / "benchmarks" / "pull.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    gb = 1e9
    at_8gbps = {m: bench.model(gb, 0, 50, 100, 8, m, 10) for m in bench.MODES}  # 1 GB takes 1 s at 8 Gb/s
    assert at_8gbps == {"push": 100, "pull": 100, "pull-groups": 10, "fan-out": 19}
    assert bench.model(gb, 0, 50, 101, 8, "pull-groups", 10) == 11  # ceil
    assert bench.model(0, 60, 50, 50, 8, "push", 10) == 60 and bench.model(0, 60, 50, 51, 8, "push", 10) == 120
    p = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "pull.py"), "--help"], capture_output=True, text=True)
    assert p.returncode == 0 and "--pad-mb" in p.stdout
