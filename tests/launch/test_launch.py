"""envkit launch: rank tables 1.0 / 1.2 / 2.0, their checks and schemas, the HCCL env rules, EI codes."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml

from envkit.errors import BadInput
from envkit.fleet import ranktable as RT
from envkit.fleet.eicodes import find_codes
from envkit.fleet.inventory import parse_inventory, read_hccn_conf
from envkit.jobs.launch.render import render_launch
from tests.launch.conftest import HCCN, write_inventory

A2_INV = """
[ascend]
node-a ansible_host=192.0.2.11 envkit_hccn_conf=a2_node0.hccn.conf
node-b ansible_host=192.0.2.12 envkit_hccn_conf=a2_node1.hccn.conf

[ascend:vars]
hccl_connect_timeout=600
hccl_exec_timeout = 1800
"""


def test_inventory_groups_vars_and_ranges(tmp_path):
    inv = parse_inventory("[a]\nn[01:03] x=1\n[a:vars]\ny=2\nx=0\n[all:vars]\ny=9\nz=3\n[b]\nn02 x=5\n", tmp_path / "i.ini")
    assert [h.name for h in inv.hosts] == ["n01", "n02", "n03"]
    assert inv.host("n01").vars == {"x": "1", "y": "2", "z": "3"}  # host var beats group var beats all
    assert inv.host("n02").vars["x"] == "5"
    with pytest.raises(BadInput, match="key=value"):
        parse_inventory("[a]\nn1 broken\n", tmp_path / "i.ini")


def test_hccn_conf_parsed_and_bad_address_refused(tmp_path):
    conf = read_hccn_conf(HCCN / "a2_node1.hccn.conf")
    assert sorted(conf) == list(range(8)) and conf[3].address == "10.20.1.13" and conf[3].netmask == "255.255.0.0"
    (tmp_path / "bad.conf").write_text("address_0=10.0.0.1\naddress_1=10.0.0.999\n")
    with pytest.raises(BadInput) as exc:
        read_hccn_conf(tmp_path / "bad.conf")
    assert exc.value.where.line == 2


def test_a2_renders_v10_with_contiguous_ranks_and_schema(site, locks, tmp_path):
    out = tmp_path / "out"
    res = render_launch(write_inventory(site, A2_INV), locks["910b"], out)
    assert (res.version, res.ranks, res.hosts) == ("1.0", 16, ["node-a", "node-b"])
    table = json.loads((out / "rank_table.json").read_text())
    assert table["version"] == "1.0" and table["server_count"] == "2"
    b = table["server_list"][1]
    assert b["server_id"] == "node-b" and [d["rank_id"] for d in b["device"]] == [str(r) for r in range(8, 16)]
    assert b["device"][3] == {"device_id": "3", "device_ip": "10.20.1.13", "rank_id": "11"}
    schema = json.loads((out / "rank_table.schema.json").read_text())
    assert schema["properties"]["version"]["const"] == "1.0" and schema["additionalProperties"] is False
    # the rendered table validates against its own model and passes the checks
    assert RT.check(RT.parse(table, "rank_table.json")) == []
    env_b = (out / "hosts/node-b/hccl_env.sh").read_text()
    assert "export HCCL_CONNECT_TIMEOUT=600" in env_b and "export HCCL_IF_IP=192.0.2.12" in env_b
    assert "export HCCL_EXEC_TIMEOUT=1800" in env_b and "export HCCL_BUFFSIZE=200" in env_b
    acc = (out / "hosts/node-b/accelerate_config.yaml").read_text()
    assert "distributed_type: MULTI_NPU" in acc and "machine_rank: 1" in acc and "num_processes: 16" in acc
    assert "main_process_ip: 192.0.2.11" in acc and "num_machines: 2" in acc
    run = (out / "hosts/node-b/torchrun.sh").read_text()
    assert (
        "--node-rank=1" in run and "--nproc-per-node=8" in run and "--master-addr=192.0.2.11" in run and 'backend="hccl"' in run
    )
    # deterministic: the same inputs give the same bytes
    first = {p: p.read_bytes() for p in out.rglob("*") if p.is_file()}
    render_launch(site / "hosts.ini", locks["910b"], out)
    assert {p: p.read_bytes() for p in out.rglob("*") if p.is_file()} == first
    assert not [p for p in tmp_path.rglob("*.tmp")]


def test_a3_renders_v12_with_super_pods(site, locks, tmp_path):
    inv = write_inventory(
        site,
        "[a3]\nsp0 ansible_host=192.0.2.21 envkit_hccn_conf=a3_node0.hccn.conf envkit_devices=0,1,2,3 envkit_super_pod_id=7\n",
    )
    res = render_launch(inv, locks["a3"], tmp_path / "o")
    table = json.loads((tmp_path / "o/rank_table.json").read_text())
    assert res.version == "1.2" and table["version"] == "1.2"
    devs = table["server_list"][0]["device"]
    assert [d["super_device_id"] for d in devs] == ["0", "1", "2", "3"] and table["server_list"][0]["host_ip"] == "192.0.2.21"
    assert table["super_pod_list"] == [{"super_pod_id": "7", "server_list": [{"server_id": "sp0"}]}]


def test_950_renders_v20_level_list(site, locks, tmp_path):
    inv = write_inventory(site, A2_INV.replace("hccl_exec_timeout = 1800", "envkit_ub_ports=0/4,0/5\nenvkit_inter_ports=0/6"))
    render_launch(inv, locks["950"], tmp_path / "o")
    table = json.loads((tmp_path / "o/rank_table.json").read_text())
    assert table["version"] == "2.0" and table["rank_count"] == 16
    r9 = table["rank_list"][9]
    assert (r9["rank_id"], r9["local_id"], r9["device_id"]) == (9, 1, 1)
    assert r9["level_list"][0]["rank_addr_list"] == [{"addr_type": "IPV4", "addr": "10.20.1.11", "ports": ["0/4", "0/5"]}]


def test_chip_without_rank_table_refused(site, locks, tmp_path):
    """310P: refused, naming why (no matrices/hccl.yaml row, so none in the lock) and what HCCL documents instead."""
    with pytest.raises(BadInput, match="no HCCL rank table") as exc:
        render_launch(write_inventory(site, A2_INV), locks["310p"], tmp_path / "o")
    assert "matrices/hccl.yaml rank_tables has no 310p row" in exc.value.message
    hint = exc.value.hint or ""
    assert "rank_table_config_300i_duo.md" in hint and "Atlas 300I Duo" in hint and "HcclAllGather.md" in hint
    assert not (tmp_path / "o").exists()


def test_any_chip_without_a_rank_table_row_is_refused_with_the_matrix_named(site, locks, tmp_path):
    """A lock whose HCCL facts lack the format (a 910b lock with it removed): the generic reason, no 310P text."""
    doc = yaml.safe_load(locks["910b"].read_text())
    doc["platform"]["hccl"]["rank_table"] = None
    lock = tmp_path / "910b-no-table.lock"
    lock.write_text(yaml.safe_dump(doc, sort_keys=False))
    with pytest.raises(BadInput, match="matrices/hccl.yaml rank_tables has no 910b row") as exc:
        render_launch(write_inventory(site, A2_INV), lock, tmp_path / "o")
    assert "300I Duo" not in (exc.value.hint or "") and "re-lock" in (exc.value.hint or "")


def test_chip_without_rank_table_is_exit_2_from_the_cli(site, locks, tmp_path, run_cli):
    inv = write_inventory(site, A2_INV)
    r = run_cli("launch", "render", "-i", str(inv), "--lock", str(locks["310p"]), "-o", str(tmp_path / "o"))
    assert r.code == 2 and "no 310p row" in r.err and "rank_table_config_300i_duo.md" in r.err and "Traceback" not in r.err
    assert not (tmp_path / "o").exists()


def test_checks_name_interleaving_duplicates_and_device_ip(site):
    conf = {"n0": read_hccn_conf(site / "a2_node0.hccn.conf")}
    table = RT.RankTableV10(
        server_count="2",
        server_list=[
            RT.ServerV10(
                server_id="n0",
                device=[
                    RT.DeviceV1(device_id="0", device_ip="10.20.0.10", rank_id="0"),
                    RT.DeviceV1(device_id="1", device_ip="10.99.0.1", rank_id="3"),
                ],
            ),
            RT.ServerV10(
                server_id="n1",
                device=[
                    RT.DeviceV1(device_id="0", device_ip="10.20.1.10", rank_id="1"),
                    RT.DeviceV1(device_id="1", device_ip="10.20.1.11", rank_id="1"),
                ],
            ),
        ],
    )
    rules = {p.rule for p in RT.check(table, conf)}
    assert {"ranks-not-interleaved", "unique-ranks", "device-ip-matches-hccn-conf", "ranks-from-zero"} <= rules
    with pytest.raises(BadInput, match="rank table rule") as exc:
        RT.raise_problems(RT.check(table, conf))
    assert "rank_table_config_a2.md" in exc.value.hint


def test_duplicate_super_device_id_is_found():
    dev = lambda d, r, s: RT.DeviceV12(device_id=d, device_ip=f"10.0.0.{r}", rank_id=r, super_device_id=s)  # noqa: E731
    table = RT.RankTableV12(
        server_count="1",
        server_list=[RT.ServerV12(server_id="a", device=[dev("0", "0", "4"), dev("1", "1", "4")])],
        super_pod_list=[RT.SuperPod(super_pod_id="0", server_list=[RT.ServerRef(server_id="a")])],
    )
    assert [p.rule for p in RT.check(table)] == ["unique-super-device-id"]


def test_device_missing_from_hccn_conf_refused(site, locks, tmp_path):
    inv = write_inventory(site, "[a]\nn0 ansible_host=192.0.2.1 envkit_hccn_conf=a2_node0.hccn.conf envkit_devices=0,9\n")
    with pytest.raises(BadInput, match=r"no address_N for device\(s\) \[9\]"):
        render_launch(inv, locks["910b"], tmp_path / "o")


@pytest.mark.parametrize(
    ("old", "new", "chip", "rule", "source"),
    [
        ("hccl_connect_timeout=600", "hccl_connect_timeout=60", "910b", "HCCL_CONNECT_TIMEOUT-range", "HCCL_CONNECT_TIMEOUT.md"),
        (
            "hccl_connect_timeout=600",
            "hccl_connect_timeout=9000",
            "910b",
            "HCCL_CONNECT_TIMEOUT-range",
            "HCCL_CONNECT_TIMEOUT.md",
        ),
        ("hccl_exec_timeout = 1800", "hccl_exec_timeout=soon", "910b", "HCCL_EXEC_TIMEOUT-range", "HCCL_EXEC_TIMEOUT.md"),
        (
            "hccl_exec_timeout = 1800",
            "hccl_op_expansion_mode=HOST",
            "950",
            "HCCL_OP_EXPANSION_MODE-legal-for-chip",
            "HCCL_OP_EXPANSION_MODE.md",
        ),
        (
            "hccl_exec_timeout = 1800",
            "hccl_socket_ifname=eth0\nhccl_if_ip=192.0.2.99",
            "910b",
            "one-NIC-variable",
            "HCCL_IF_IP.md",
        ),
        (
            "hccl_exec_timeout = 1800",
            "hccl_socket_ifname=eth0;rm -rf",
            "910b",
            "HCCL_SOCKET_IFNAME-format",
            "HCCL_SOCKET_IFNAME.md",
        ),
    ],
)
def test_bad_env_values_refused_with_rule_and_source(site, locks, tmp_path, old, new, chip, rule, source):
    inv = write_inventory(site, A2_INV.replace(old, new))
    with pytest.raises(BadInput) as exc:
        render_launch(inv, locks[chip], tmp_path / "o")
    assert rule in exc.value.message and source in exc.value.hint and exc.value.exit_code == 2
    assert not (tmp_path / "o").exists()  # nothing written before the inputs pass


def test_env_must_be_identical_on_all_nodes(site, locks, tmp_path):
    inv = write_inventory(
        site,
        A2_INV.replace("envkit_hccn_conf=a2_node1.hccn.conf", "envkit_hccn_conf=a2_node1.hccn.conf hccl_connect_timeout=900"),
    )
    with pytest.raises(BadInput, match="HCCL_CONNECT_TIMEOUT-same-on-all-nodes"):
        render_launch(inv, locks["910b"], tmp_path / "o")


def test_op_expansion_mode_unsupported_on_a2_is_a_warning(site, locks, tmp_path):
    inv = write_inventory(site, A2_INV + "hccl_op_expansion_mode=CCU_SCHED\n")
    res = render_launch(inv, locks["910b"], tmp_path / "o")
    assert any("HCCL ignores it and uses HOST" in w for w in res.warnings)
    assert "export HCCL_OP_EXPANSION_MODE=CCU_SCHED" in (tmp_path / "o/hosts/node-a/hccl_env.sh").read_text()


def test_socket_ifname_rendered_on_every_node(site, locks, tmp_path):
    inv = write_inventory(
        site,
        A2_INV.replace("192.0.2.11", "node-a.example").replace("192.0.2.12", "node-b.example") + "hccl_socket_ifname=^=docker0\n",
    )
    render_launch(inv, locks["910b"], tmp_path / "o")
    for host in ("node-a", "node-b"):
        text = (tmp_path / f"o/hosts/{host}/hccl_env.sh").read_text()
        assert "export HCCL_SOCKET_IFNAME='^=docker0'" in text and "HCCL_IF_IP" not in text.split("# ")[-1]


def test_hostnames_without_nic_setting_refused(site, locks, tmp_path):
    inv = write_inventory(site, A2_INV.replace("192.0.2.11", "node-a.example"))
    with pytest.raises(BadInput, match="NIC-variable-on-every-node"):
        render_launch(inv, locks["910b"], tmp_path / "o")


def test_ei_codes_found_with_cause_fix_and_source():
    log = (
        "[ERROR] ... EI0006: Getting socket times out. Reason: ...\n"
        "RuntimeError: ... ERR02200 ... EI0006 again\n"
        "Communication_Error_Bind_IP_Port(EI0019): The IP address 10.0.0.1 and port 60000 have already been bound.\n"
        "EI9999 something new; also EI00190 is not a code\n"
    )
    found = {f.code: f for f in find_codes(log)}
    assert list(found) == ["EI0006", "EI0019", "EI9999"]
    assert found["EI0006"].count == 2 and found["EI0006"].first_line == 1 and "HCCL_CONNECT_TIMEOUT" in found["EI0006"].fix
    assert "vllm-ascend#9447" in found["EI0006"].source and found["EI0019"].first_line == 3
    assert found["EI9999"].cause is None


def test_every_required_code_is_mapped():
    from envkit.fleet.data import load_hccl

    data = load_hccl()
    for code in ("EI0001", "EI0002", "EI0004", "EI0005", "EI0006", "EI0014", "EI0016", "EI0019"):
        row = data.error_code(code)
        assert row is not None and row.cause and row.fix and row.sources, code


def test_cli_render_and_codes(site, locks, tmp_path, capsys):
    from envkit.cli import main

    inv = write_inventory(site, A2_INV)
    with pytest.raises(SystemExit) as exc:
        main(["launch", "render", "-i", str(inv), "--lock", str(locks["910b"]), "-o", str(tmp_path / "o"), "--json"])
    assert exc.value.code in (0, None)
    doc = json.loads(capsys.readouterr().out)
    assert doc["ranks"] == 16 and "rank_table.json" in doc["files"]
    bad = write_inventory(site, A2_INV.replace("600", "5"))
    with pytest.raises(SystemExit) as exc:
        main(["launch", "render", "-i", str(bad), "--lock", str(locks["910b"]), "-o", str(tmp_path / "o2")])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "HCCL_CONNECT_TIMEOUT-range" in err and "HCCL_CONNECT_TIMEOUT.md" in err
    log = tmp_path / "train.log"
    log.write_text("EI0016: tls mismatch\n")
    with pytest.raises(SystemExit) as exc:
        main(["launch", "codes", str(log)])
    assert exc.value.code == 1 and "hccn_tool -i N -tls -s enable 0" in capsys.readouterr().out
    shutil.rmtree(tmp_path / "o")


def test_hccl_facts_are_part_of_the_matrix_its_digest_and_its_check(tmp_path):
    """matrices/hccl.yaml is a matrix file: an edit changes the digest, a broken row fails `matrix check`."""
    from envkit.core.matrix import check_matrix, load_matrix_from
    from envkit.resources import matrices_dir

    folder = tmp_path / "m"
    shutil.copytree(matrices_dir(), folder)
    before = load_matrix_from(folder)
    assert before.model.hccl.rank_table("950").version == "2.0" and not check_matrix(before)
    path = folder / "hccl.yaml"
    path.write_text(path.read_text().replace('    - chip: a3\n      version: "1.2"', '    - chip: a9\n      version: "1.2"', 1))
    after = load_matrix_from(folder)
    assert after.digest != before.digest
    assert any(p.section == "hccl.rank_tables" and "unknown chip a9" in p.message for p in check_matrix(after))


def test_launch_reads_the_chips_hccl_facts_from_the_lock(site, locks, tmp_path):
    """A lock whose HCCL facts say the 910b takes rank table 1.2 (accepted as edited) renders a 1.2 table: the lock,
    not matrices/hccl.yaml, is what launch reads."""
    import yaml

    from envkit.core.derive import matrix_check

    doc = yaml.safe_load(locks["910b"].read_text())
    assert doc["schema_version"] == 3 and doc["platform"]["hccl"]["rank_table"]["version"] == "1.0"
    assert doc["platform"]["device_plugin_resource"] == "huawei.com/Ascend910"
    doc["platform"]["hccl"]["rank_table"]["version"] = "1.2"
    edited = tmp_path / "edited.lock"
    edited.write_text(yaml.safe_dump(doc, sort_keys=False))
    with pytest.raises(BadInput, match="platform.hccl.rank_table.version"):
        render_launch(write_inventory(site, A2_INV), edited, tmp_path / "o", lock_check=matrix_check())
    res = render_launch(write_inventory(site, A2_INV), edited, tmp_path / "o", lock_check=matrix_check(accept_edited=True))
    assert res.version == "1.2"


@pytest.mark.parametrize(
    "line, match",
    [
        ("../x ansible_host=192.0.2.1", "not a plain host name"),
        ("a/b ansible_host=192.0.2.1", "not a plain host name"),
        ("n" * 10000, "not a plain host name"),
        ("n0 ansible_host=$(reboot)", "neither an IP address nor a DNS host name"),
        ("n0 ansible_host=';touch${IFS}x'", "neither an IP address nor a DNS host name"),
    ],
)
def test_host_names_and_addresses_reaching_folders_and_scripts_refused(tmp_path, line, match):
    with pytest.raises(BadInput, match=match) as exc:
        parse_inventory(f"[a]\n{line}\n", tmp_path / "i.ini")
    assert exc.value.exit_code == 2
    assert [h.address for h in parse_inventory("[a]\nn0 ansible_host=node0.example\n", tmp_path / "i.ini").hosts] == [
        "node0.example"
    ]


def test_long_host_name_and_bad_device_port_refused(site, locks, tmp_path):
    long_name = A2_INV.replace("node-a ", "n" * 65 + " ")
    with pytest.raises(BadInput, match="at most 64"):
        render_launch(write_inventory(site, long_name), locks["910b"], tmp_path / "o")
    bad_port = A2_INV.replace("hccl_exec_timeout = 1800", "envkit_device_port=99999999999999999999")
    with pytest.raises(BadInput, match="envkit_device_port on node-a='99999999999999999999' is not a whole number") as exc:
        render_launch(write_inventory(site, bad_port), locks["910b"], tmp_path / "o")
    assert exc.value.hint == "a TCP port: 1 to 65535"
    assert not (tmp_path / "o").exists()


# --- rank table 2.0 across servers: the guide's multi-server layout -------------------------------------------------
def _950_site(folder: Path, hosts: int, devices: str | None = None) -> Path:
    """`hosts` 950 servers of 8 devices each, hccn.conf in the recorded format (one /16 per server)."""
    lines = ["[ascend]"]
    for n in range(hosts):
        conf = "".join(
            f"address_{d}=10.{30 + n}.0.{10 + d}\nnetmask_{d}=255.255.0.0\nnetdetect_{d}=10.{30 + n}.0.254\n" for d in range(8)
        )
        (folder / f"n{n}.hccn.conf").write_text(conf)
        extra = f" envkit_devices={devices}" if devices else ""
        lines.append(f"n{n} ansible_host=192.0.2.{40 + n} envkit_hccn_conf=n{n}.hccn.conf{extra}")
    lines += ["[ascend:vars]", "envkit_ub_ports=1/0", "envkit_inter_ports=0/4,0/5,0/6,0/7", "envkit_net_instance=az0"]
    return write_inventory(folder, "\n".join(lines) + "\n")


@pytest.mark.parametrize("hosts", [2, 4])
def test_950_across_servers_has_the_inter_server_layer(tmp_path, locks, hosts):
    """As the guide's two-server example: per rank net_layer 0 (TOPO_FILE_DESC, the server's own instance) and
    net_layer 1 (CLOS, one instance every rank shares); the table holds to its own generated JSON Schema."""
    import jsonschema

    render_launch(_950_site(tmp_path, hosts), locks["950"], tmp_path / "o")
    table = json.loads((tmp_path / "o/rank_table.json").read_text())
    schema = json.loads((tmp_path / "o/rank_table.schema.json").read_text())
    jsonschema.Draft202012Validator(schema).validate(table)
    assert table["rank_count"] == 8 * hosts == len(table["rank_list"])
    for r in table["rank_list"]:
        server = r["rank_id"] // 8
        assert [lv["net_layer"] for lv in r["level_list"]] == [0, 1]
        zero, one = r["level_list"]
        assert (zero["net_instance_id"], zero["net_type"]) == (f"n{server}", "TOPO_FILE_DESC")
        assert (one["net_instance_id"], one["net_type"]) == ("az0", "CLOS")
        addr = f"10.{30 + server}.0.{10 + r['device_id']}"
        assert zero["rank_addr_list"] == [{"addr_type": "IPV4", "addr": addr, "ports": ["1/0"]}]
        assert one["rank_addr_list"] == [{"addr_type": "IPV4", "addr": addr, "ports": ["0/4", "0/5", "0/6", "0/7"]}]
        assert r["local_id"] == r["device_id"] == r["rank_id"] % 8


def test_950_one_server_has_no_inter_server_layer(tmp_path, locks):
    inv = _950_site(tmp_path, 1)
    render_launch(inv, locks["950"], tmp_path / "o")
    table = json.loads((tmp_path / "o/rank_table.json").read_text())
    assert {len(r["level_list"]) for r in table["rank_list"]} == {1}


def test_950_devices_4_to_7_are_local_ids_0_to_3(tmp_path, locks):
    """local_id numbers the NPUs of a server from 0 (the guide), device_id is the physical id."""
    render_launch(_950_site(tmp_path, 2, devices="4,5,6,7"), locks["950"], tmp_path / "o")
    ranks = json.loads((tmp_path / "o/rank_table.json").read_text())["rank_list"]
    assert [(r["rank_id"], r["local_id"], r["device_id"]) for r in ranks] == [(i, i % 4, 4 + i % 4) for i in range(8)]


def test_950_across_servers_without_inter_ports_is_bad_input(tmp_path, locks):
    inv = _950_site(tmp_path, 2)
    inv.write_text(inv.read_text().replace("envkit_inter_ports=0/4,0/5,0/6,0/7\n", ""))
    with pytest.raises(BadInput, match="inter-server ports") as exc:
        render_launch(inv, locks["950"], tmp_path / "o")
    assert "envkit_inter_ports" in exc.value.hint and exc.value.where.line == 2
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize(
    ("var", "message"),
    [
        ("envkit_inter_ports=0/4,x", "is not Die/Port"),
        ("envkit_inter_ports=" + ",".join(f"0/{i}" for i in range(17)), "lists 17 ports"),
        ("envkit_net_instance=a$b", "letters, digits"),
    ],
)
def test_950_inter_server_vars_are_checked(tmp_path, locks, var, message):
    inv = _950_site(tmp_path, 2)
    inv.write_text(inv.read_text() + var + "\n")
    with pytest.raises(BadInput, match=message):
        render_launch(inv, locks["950"], tmp_path / "o")


def test_16_inter_ports_are_the_limit(tmp_path, locks):
    inv = _950_site(tmp_path, 2)
    inv.write_text(inv.read_text() + "envkit_inter_ports=" + ",".join(f"0/{i}" for i in range(16)) + "\n")
    render_launch(inv, locks["950"], tmp_path / "o")
    ranks = json.loads((tmp_path / "o/rank_table.json").read_text())["rank_list"]
    assert len(ranks[0]["level_list"][1]["rank_addr_list"][0]["ports"]) == 16


def test_950_servers_in_different_top_instances_are_refused(tmp_path, locks):
    inv = _950_site(tmp_path, 2)
    inv.write_text(inv.read_text().replace("n1 ansible_host=192.0.2.41", "n1 envkit_net_instance=az1 ansible_host=192.0.2.41"))
    with pytest.raises(BadInput, match="servers-share-a-layer"):
        render_launch(inv, locks["950"], tmp_path / "o")


def _v20(levels_of, count=None):
    ranks = [{"rank_id": i, "local_id": i, "device_id": i, "level_list": levels} for i, levels in enumerate(levels_of)]
    return {"version": "2.0", "rank_count": len(ranks) if count is None else count, "rank_list": ranks}


LV0 = {"net_layer": 0, "net_instance_id": "s0", "net_type": "TOPO_FILE_DESC",
       "rank_addr_list": [{"addr_type": "IPV4", "addr": "10.0.0.1", "ports": ["0/0"]}]}  # fmt: skip
LV1 = {**LV0, "net_layer": 1, "net_instance_id": "az0", "net_type": "CLOS"}


@pytest.mark.parametrize(
    ("doc", "message"),
    [
        (_v20([[LV0, {**LV1, "net_layer": 2}]]), "consecutively from 0"),
        (_v20([[{**LV0, "net_type": "CLOS"}]]), "TOPO_FILE_DESC"),
        (_v20([[LV0]], count=2), "rank_count 2 but rank_list has 1"),
        (_v20([[LV0, *[{**LV1, "net_layer": i} for i in range(1, 9)]]]), "at most 8"),
        (_v20([[{**LV0, "rank_addr_list": [{"addr_type": "IPV4", "addr": "a", "ports": ["0/0"] * 17}]}]]), "at most 16"),
        (_v20([[{**LV0, "rank_addr_list": [{"addr_type": "IPV4", "addr": "a", "ports": ["x"]}]}]]), "pattern"),
    ],
)
def test_a_v20_table_breaking_the_guides_limits_is_refused(doc, message):
    with pytest.raises(BadInput, match=message):
        RT.parse(doc, "rank_table.json")


def test_a_v20_table_at_the_guides_limits_is_read():
    """8 layers, 16 ports, the vendor's host-NIC port `d2h`: accepted."""
    levels = [LV0, *[{**LV1, "net_layer": i} for i in range(1, 8)]]
    levels[7] = {**levels[7], "rank_addr_list": [{"addr_type": "IPV4", "addr": "a", "ports": ["d2h"] + ["0/1"] * 15}]}
    table = RT.parse(_v20([levels]), "rank_table.json")
    assert len(table.rank_list[0].level_list) == 8


def test_derived_a3_super_device_ids_are_a_warning(site, locks, tmp_path, run_cli):
    text = "[a3]\nsp0 ansible_host=192.0.2.21 envkit_hccn_conf=a3_node0.hccn.conf envkit_devices=0,1,2,3\n"
    res = render_launch(write_inventory(site, text), locks["a3"], tmp_path / "o")
    assert any("super_device_id of sp0 derived" in w for w in res.warnings)
    given = text.replace("0,1,2,3\n", "0,1,2,3 envkit_super_device_ids=8,9,10,11\n")
    r = run_cli(
        "launch",
        "render",
        "-i",
        str(write_inventory(site, given)),
        "--lock",
        str(locks["a3"]),
        "-o",
        str(tmp_path / "p"),
        "--json",
    )
    assert r.code == 0, r.err
    assert not [w for w in json.loads(r.out)["warnings"] if "super_device_id" in w]
    r = run_cli(
        "launch",
        "render",
        "-i",
        str(write_inventory(site, text)),
        "--lock",
        str(locks["a3"]),
        "-o",
        str(tmp_path / "q"),
        "--json",
    )
    assert any("derived" in w for w in json.loads(r.out)["warnings"])
    r = run_cli("launch", "render", "-i", str(write_inventory(site, text)), "--lock", str(locks["a3"]), "-o", str(tmp_path / "t"))
    assert "warning: super_device_id of sp0 derived" in r.out + r.err
