"""Generated hostile inputs for the parsers the fleet-input properties (test_fleet_inputs.py) do not reach.

These parsers read envkit's own JSON back (profiles, reports, snapshots), mirror URLs, wheel file names and
hashed requirements, output manifests, rank tables and hccn_tool's outputs. Each property feeds generated text to
one of them: the answer is a value or the parser's refusal (BadInput, exit 2; None for an hccn_tool output it
cannot read), within a time bound, never another exception (exit 3). Where the parser accepts, what it accepted
is checked against what it promises.
"""

from __future__ import annotations

import json
import math
import posixpath

from hypothesis import given
from hypothesis import strategies as st

from envkit.artifacts.wheels import parse_requirements, parse_wheel_name, wheel_rank
from envkit.errors import BadInput
from envkit.fleet import hccn, ranktable
from envkit.io import urlpath
from envkit.io.jsonread import MAX_DEPTH, parse_json
from envkit.io.outputs import parse_manifest
from tests.hostile.bounds import SETTINGS, bounded_call

# JSON values, including what json.loads takes but envkit refuses (NaN, Infinity, 1e999, a key twice)
_SCALARS = st.one_of(
    st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False, allow_infinity=False), st.text(max_size=20)
)
_VALUES = st.recursive(
    _SCALARS,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=30,
)
_JSONISH = st.text(alphabet='[]{}",:0123456789.eE+-truefalsnulNaIiy \\\n\u00e9\ud800', max_size=300)


@SETTINGS
@given(_VALUES)
def test_envkits_own_json_reads_back_what_json_writes(value):
    assert parse_json(json.dumps(value), "x.json") == value


@SETTINGS
@given(st.one_of(_JSONISH, st.binary(max_size=200), st.integers(0, 3 * MAX_DEPTH).map(lambda d: "[" * d + "]" * d)))
def test_generated_json_is_a_finite_value_or_bad_input(raw):
    value = bounded_call(parse_json, raw, "x.json")
    if value is not None:  # accepted: what json itself reads, with no NaN or infinity anywhere
        text = raw.decode("utf-8-sig") if isinstance(raw, bytes) else raw
        assert value == json.loads(text)
        assert all(math.isfinite(f) for f in _floats(value))


def _floats(value):
    if isinstance(value, float):
        yield value
    elif isinstance(value, list):
        for v in value:
            yield from _floats(v)
    elif isinstance(value, dict):
        for v in value.values():
            yield from _floats(v)


_URL_PATH = st.lists(
    st.sampled_from(
        ["m", "..", ".", "%2e", "%2E%2e", "%252e", "%25252e", "%2f", "%5c", "..;", "%c0%ae", "．．", "%00", "a b", "%"]
    ),
    max_size=8,
).map("/".join)


@SETTINGS
@given(_URL_PATH, st.sampled_from(["file:///m/", "http://mirror.example/m/"]))
def test_a_url_is_under_its_mirror_only_when_its_decoded_path_is(path, mirror):
    url = mirror.split("/m/")[0] + "/m/" + path
    inside = bounded_call(urlpath.under, url, mirror, refusals=(ValueError,))
    if inside:  # the path a server or the file system opens stays inside the mirror's folder
        opened = urlpath.decoded_path(url)
        assert posixpath.normpath(opened).startswith("/m") and ".." not in opened.split("/")


_WHEEL_PART = st.sampled_from(["torch", "torch_npu", "a-b", "1.0", "2.12.0+cpu", "2.12.0%2Bcpu", "!!", "", "cp310", "py3", "none", "any",
                               "manylinux_2_28_aarch64", "manylinux2014_x86_64", "1", "abi3", "x" * 300])  # fmt: skip
_ORDER = {"cp310-cp310-manylinux_2_28_aarch64": 0, "py3-none-any": 5}


@SETTINGS
@given(st.lists(_WHEEL_PART, max_size=7).map(lambda parts: "-".join(parts) + ".whl") | st.text(max_size=80))
def test_wheel_file_names_parse_or_are_none(name):
    parsed = bounded_call(parse_wheel_name, name, refusals=())
    rank = bounded_call(wheel_rank, name, _ORDER, refusals=())
    assert parsed is None or (parsed[0] and parsed[1])
    assert rank is None or rank in _ORDER.values()


_REQ_LINE = st.one_of(
    st.from_regex(r"[A-Za-z][A-Za-z0-9._-]{0,10}==[0-9][0-9a-z.+]{0,8}( --hash=sha256:[0-9a-f]{64}){0,2}( #.*)?", fullmatch=True),
    st.sampled_from(
        ["-r other.txt", "--index-url http://x", "torch>=2", "# a comment", "\\", "pkg==1 \\", "  --hash=sha256:" + "0" * 64]
    ),
    st.text(max_size=40),
)


@SETTINGS
@given(st.lists(_REQ_LINE, max_size=12).map("\n".join), st.booleans())
def test_requirements_are_pinned_and_hashed_or_bad_input(text, options_allowed):
    reqs = bounded_call(parse_requirements, text, "requirements.txt", options_allowed=options_allowed)
    for r in reqs or []:
        assert r.name and r.version and r.hashes and all(len(h) == 64 for h in r.hashes)


_ENTRY = st.fixed_dictionaries(
    {"path": st.sampled_from(["a", "a/b", "../x", "/abs", "a//b", ".envkit-output.json", "b\\c", "c", "a/b/c"])},
    optional={"sha256": st.sampled_from(["0" * 64, "z" * 64, 1]), "size": st.sampled_from([0, -1, 2**60, "1", True]),
              "link": st.sampled_from(["x", "", 1])},
)  # fmt: skip
_MANIFEST = st.fixed_dictionaries(
    {"envkit_output": st.sampled_from([1, 2, True, "1"]), "files": st.lists(_ENTRY, max_size=4)},
    optional={"kind": st.sampled_from(["bundle", "launch-set", "", "A", 1]), "pending": st.lists(_ENTRY, max_size=2), "x": st.none()},
)  # fmt: skip


@SETTINGS
@given(_MANIFEST.map(lambda d: json.dumps(d).encode()) | st.binary(max_size=100) | st.just(b"[" * 100_000))
def test_output_manifests_parse_strictly_or_are_refused(raw):
    # _read_manifest turns these two into "not a valid manifest": the folder is then not envkit's
    m = bounded_call(parse_manifest, raw, refusals=(ValueError, RecursionError))
    for path, e in ({} if m is None else {**m.files, **m.pending}).items():
        parts = path.split("/")
        assert path == e["path"] and not path.startswith("/") and ".." not in parts and "" not in parts
        assert set(e) in ({"path", "link"}, {"path", "sha256", "size"})


_DEVICE = st.fixed_dictionaries(
    {"device_id": st.sampled_from(["0", "7", "65", "-1", "x", 0]), "device_ip": st.sampled_from(["10.0.0.1", "fe80::1%e", "x", ""]),
     "rank_id": st.sampled_from(["0", "1", "a", 1])},
    optional={"super_device_id": st.sampled_from(["0", "x"])},
)  # fmt: skip
_SERVER = st.fixed_dictionaries(
    {"server_id": st.sampled_from(["10.0.0.1", "node-1", "", "a" * 300]), "device": st.lists(_DEVICE, max_size=3)},
    optional={"host_nic_ip": st.sampled_from(["reserve", "10.0.0.1"])},
)
_TABLE = st.fixed_dictionaries(
    {"version": st.sampled_from(["1.0", "1.2", "2.0", "3.0", 1.0]), "server_count": st.sampled_from(["1", "2", "x", 1]),
     "server_list": st.lists(_SERVER, max_size=3), "status": st.sampled_from(["completed", "initializing"])},
    optional={"rank_count": st.sampled_from(["1", "x"]), "rank_list": st.lists(st.dictionaries(st.text(max_size=5), _SCALARS, max_size=3), max_size=2),
              "super_pod_list": st.lists(st.none(), max_size=1)},
)  # fmt: skip


@SETTINGS
@given(_TABLE | _VALUES)
def test_rank_tables_parse_against_their_version_or_are_bad_input(doc):
    table = bounded_call(ranktable.parse, doc, "rank_table.json")
    if table is not None:
        assert table.version == doc["version"]
        assert json.loads(ranktable.to_json(table))["version"] == doc["version"]


_HCCN_OUT = st.lists(
    st.one_of(
        st.sampled_from(["link status: UP", "link status: down", "net health status: Success", "net health status: Fault",
                         "tls switch[0]", "tls switch[1]", "tls switch[" + "9" * 5000 + "]", "tls switch[٣]",
                         "ipaddr: 10.0.0.1", "ipaddr: fe80::1%eth0", "netmask: 255.255.255.0", "netmask: 64",
                         "3 packets transmitted, 3 received, 0% packet loss", "٣ packets transmitted, 3 received, 0% packet loss",
                         "3 packets transmitted, 3 received, 1e9% packet loss", "hccn_tool is busy"]),
        st.text(max_size=60),
    ),
    max_size=6,
).map("\n".join)  # fmt: skip


@SETTINGS
@given(_HCCN_OUT)
def test_hccn_tool_outputs_are_read_or_none_never_an_error(out):
    link = bounded_call(hccn.parse_link, out, refusals=())
    health = bounded_call(hccn.parse_net_health, out, refusals=())
    tls = bounded_call(hccn.parse_tls, out, refusals=())
    ip = bounded_call(hccn.parse_ip, out.encode("utf-8", "surrogatepass"), refusals=())
    ping = bounded_call(hccn.parse_ping, out, refusals=())
    assert link in (None, "UP", "DOWN") and health in (None, *hccn.HEALTH_STATES)
    assert tls is None or 0 <= tls <= 999
    assert ip is None or "%" not in ip[0]
    assert ping is None or (ping.transmitted >= 0 and math.isfinite(ping.loss_percent))


@SETTINGS
@given(
    st.lists(
        st.sampled_from(["10.0.0.1", "fe80::1", "fe80::1%eth0", "fe80::1%$(reboot)", "-c1", "٣.0.0.1", " ", ""]), max_size=5
    ).map(",".join)
)
def test_peers_are_ip_addresses_without_scope_ids_or_bad_input(text):
    peers = bounded_call(hccn.parse_peers, text)
    for p in peers or []:
        assert "%" not in p and not p.startswith("-")


def test_peers_refuse_a_scope_id_and_an_over_long_list():
    for bad in ("fe80::1%eth0", "10.0.0.1," * 1000):
        try:
            hccn.parse_peers(bad)
        except BadInput as exc:
            assert "--peers" in exc.message
        else:
            raise AssertionError(f"{bad[:30]!r} accepted")
    assert hccn.parse_peers("10.0.0.1, fe80::1") == ["10.0.0.1", "fe80::1"]


def test_hccn_conf_addresses_leave_out_scope_ids_and_non_ascii_device_numbers():
    conf = "address_0=fe80::1%eth0\naddress_1=10.0.0.1\naddress_٣=10.0.0.2\naddress_2=10.0.0.3\n".encode()
    assert hccn.hccn_conf_addresses(conf) == {1: "10.0.0.1", 2: "10.0.0.3"}
