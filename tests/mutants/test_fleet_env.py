"""envkit/fleet/env.py, pinned for `make mutation MODULES=fleet`: the HCCL environment `plan_env` renders per host
(each variable's name, value, default and order; HCCL_IF_IP from the inventory address; HCCL_SOCKET_IFNAME instead),
its warnings word for word, and each broken rule's words, hint (the rule's source) and place (the inventory, the
line of the host when the rule names one): ranges on both sides of their bounds, the values HCCL needs identical,
the op expansion mode per chip (950: an error; A2/A3: a warning), AIV's cap on HCCL_EXEC_TIMEOUT, one NIC variable.

matrices/hccl.yaml's rules (through `load_hccl`) and, for the branches no shipped rule takes (no bound, no default,
a rule not the same on every node, a chip with no op expansion row), a small HcclData of its own."""

from __future__ import annotations

import pytest

from envkit.core.derive import hccl_facts
from envkit.errors import BadInput, Where
from envkit.fleet.data import EnvRule, HcclData, cite, load_hccl
from envkit.fleet.env import EnvPlan, NodeValues, plan_env
from envkit.fleet.inventory import Host

DATA = load_hccl()
SRC = {r.name: cite(r) for r in DATA.env}
MODES = {m.chip: cite(m) for m in DATA.op_expansion_modes}
INV = "site/hosts.ini"
CT, ET, BS, OP, IP, IFN = (
    "HCCL_CONNECT_TIMEOUT",
    "HCCL_EXEC_TIMEOUT",
    "HCCL_BUFFSIZE",
    "HCCL_OP_EXPANSION_MODE",
    "HCCL_IF_IP",
    "HCCL_SOCKET_IFNAME",
)
DEFAULTS = {CT: "120", ET: "1836", BS: "200"}


def _rule(name: str, kind: str, **kw) -> EnvRule:
    return EnvRule(name=name, kind=kind, source=f"{name}.md", confidence="stated", **kw)


# no bounds, no default, nothing that must be identical: the branches matrices/hccl.yaml takes none of
CUSTOM = HcclData(
    rank_tables=[],
    env=[
        _rule(CT, "int", max=5, same_on_all_nodes=False),
        _rule(BS, "int", min=2, default="7", same_on_all_nodes=False),
        _rule(ET, "int", same_on_all_nodes=False),
        _rule(IP, "ip", same_on_all_nodes=False),
        _rule(IFN, "ifname", same_on_all_nodes=False),
    ],
    op_expansion_modes=[],
    ip_plans=[],
    error_codes=[],
)


def hosts(*rows: dict[str, str]) -> list[Host]:
    """Hosts a, b, c... on lines 2, 3, 4..., each at 192.0.2.N unless its row says otherwise."""
    return [Host(chr(ord("a") + i), {"ansible_host": f"192.0.2.{i + 1}", **row}, i + 2) for i, row in enumerate(rows)]


def plan(hs: list[Host], chip: str = "910b", data: HcclData = DATA) -> EnvPlan:
    """`plan_env` as `launch render` calls it: the inventory's hosts as nodes, the chip's rules as the lock holds them."""
    return plan_env({h.name: NodeValues(h.vars, h.address, h.line) for h in hs}, chip, hccl_facts(data, chip), INV)


def refusal(hs: list[Host], chip: str = "910b", data: HcclData = DATA) -> BadInput:
    with pytest.raises(BadInput) as info:
        plan(hs, chip, data)
    return info.value


def broken(rule: str, message: str, source: str, line: int | None = None, more: str = "") -> tuple:
    """What BadInput says of one broken rule: its words, hint and place."""
    return (f"HCCL rule '{rule}' broken: {message}{more}", f"source: {source}", Where(INV, line))


def said(e: BadInput) -> tuple:
    return (e.message, e.hint, e.where)


# --- what is rendered -------------------------------------------------------------------------------------------------
def test_nothing_set_renders_the_defaults_and_each_host_address_as_hccl_if_ip():
    p = plan(hosts({}, {}))
    assert p == EnvPlan(
        per_host={"a": {**DEFAULTS, IP: "192.0.2.1"}, "b": {**DEFAULTS, IP: "192.0.2.2"}},
        warnings=[],
        nic_variable=IP,
    )
    assert list(p.per_host["a"]) == [CT, ET, BS, IP]


def test_given_values_are_stripped_normalised_and_rendered_in_order_hccl_if_ip_before_the_address():
    same = {"hccl_connect_timeout": " 0600 ", ET.lower(): "1800", "hccl_buffsize": "1", "hccl_op_expansion_mode": " AI_CPU "}
    hs = hosts(
        {**same, "ansible_host": "a.example", "hccl_if_ip": " 10.1.0.1 ", "HCCL_CONNECT_TIMEOUT": "9"},
        same,
        {**same, "hccl_if_ip": "10.1.0.3"},
    )
    p = plan(hs)
    values = {CT: "600", ET: "1800", BS: "1", OP: "AI_CPU"}
    assert p == EnvPlan(
        per_host={"a": {**values, IP: "10.1.0.1"}, "b": {**values, IP: "192.0.2.2"}, "c": {**values, IP: "10.1.0.3"}},
        warnings=[],
        nic_variable=IP,
    )
    assert list(p.per_host["c"]) == [CT, ET, BS, OP, IP]


@pytest.mark.parametrize("ifname", ["eth0", "=eth0", "^=eth0", "enp1s0f0,bond0.100", "ib0:1", "veth@x", "a-b_c", " eth0 "])
def test_hccl_socket_ifname_replaces_hccl_if_ip(ifname):
    p = plan(hosts({"hccl_socket_ifname": ifname}, {"hccl_socket_ifname": ifname}))
    assert p == EnvPlan(
        per_host={h: {**DEFAULTS, IFN: ifname.strip()} for h in "ab"},
        warnings=[],
        nic_variable=IFN,
    )


@pytest.mark.parametrize("ifname", ["eth0;reboot", "", "^eth0", "eth0,", ",eth0", "eth 0", "=", "^=", "==eth0", "$(x)"])
def test_a_hccl_socket_ifname_that_is_no_interface_list_is_refused(ifname):
    e = refusal(hosts({"hccl_socket_ifname": ifname}, {"hccl_socket_ifname": ifname}))
    shown = f"a={ifname!r}, b={ifname!r}"
    message = f"HCCL_SOCKET_IFNAME {shown} is not an interface list (eth0, ^=eth0, =eth0)"
    assert said(e) == broken("HCCL_SOCKET_IFNAME-format", message, SRC[IFN])
    assert e.details == {"problems": [{"rule": "HCCL_SOCKET_IFNAME-format", "message": message, "source": SRC[IFN]}]}


def test_only_the_hosts_whose_interface_list_is_bad_are_named():
    e = refusal(hosts({"hccl_socket_ifname": "eth0"}, {"hccl_socket_ifname": "bad;x"}), data=CUSTOM)
    message = "HCCL_SOCKET_IFNAME b='bad;x' is not an interface list (eth0, ^=eth0, =eth0)"
    assert said(e) == broken("HCCL_SOCKET_IFNAME-format", message, f"{IFN}.md (stated)")


def test_both_nic_variables_are_refused():
    e = refusal(hosts({"hccl_if_ip": "10.0.0.1", "hccl_socket_ifname": "eth0"}))
    message = "set HCCL_IF_IP or HCCL_SOCKET_IFNAME, not both (HCCL_IF_IP wins and hides the other)"
    assert said(e) == broken("one-NIC-variable", message, SRC[IP])


# --- the values HCCL needs identical ----------------------------------------------------------------------------------
def test_a_value_that_differs_between_nodes_is_refused():
    e = refusal(hosts({"hccl_connect_timeout": "600"}, {"hccl_connect_timeout": "900"}))
    message = f"{CT} must be identical on every node: a=600, b=900"
    assert said(e) == broken(f"{CT}-same-on-all-nodes", message, SRC[CT])


def test_a_value_set_on_some_nodes_only_is_refused():
    e = refusal(hosts({"hccl_buffsize": "64"}, {}, {"hccl_buffsize": "64"}))
    message = f"{BS} must be identical on every node: a=64, b=(unset), c=64"
    assert said(e) == broken(f"{BS}-same-on-all-nodes", message, SRC[BS])


def test_each_rule_is_checked_after_one_that_differs_and_the_place_is_the_first_problem():
    e = refusal(
        hosts({"hccl_connect_timeout": "600", "hccl_buffsize": "0"}, {"hccl_connect_timeout": "900", "hccl_buffsize": "0"})
    )
    first = f"{CT} must be identical on every node: a=600, b=900"
    second = f"{BS}='0' on a is not an integer in [1, inf]"
    assert said(e) == broken(f"{CT}-same-on-all-nodes", first, SRC[CT], None, " (and 1 more)")
    assert e.details == {
        "problems": [
            {"rule": f"{CT}-same-on-all-nodes", "message": first, "source": SRC[CT]},
            {"rule": f"{BS}-range", "message": second, "source": SRC[BS]},
        ]
    }


def test_hccl_if_ip_may_differ_and_an_unset_rule_is_no_problem():
    assert plan(hosts({"hccl_if_ip": "10.0.0.1"}, {"hccl_if_ip": "10.0.0.2"})).per_host["b"][IP] == "10.0.0.2"


# --- ranges on both sides ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("name", "value", "rng"),
    [(CT, "119", "[120, 7200]"), (CT, "7201", "[120, 7200]"), (CT, "abc", "[120, 7200]"), (CT, "", "[120, 7200]"),
     (ET, "-1", "[0, 2147483647]"), (ET, "2147483648", "[0, 2147483647]"), (ET, "1.5", "[0, 2147483647]"),
     (BS, "0", "[1, inf]")],
)  # fmt: skip
def test_an_integer_out_of_its_range_is_refused_on_its_host_line(name, value, rng):
    e = refusal(hosts({name.lower(): value}))
    message = f"{name}={value!r} on a is not an integer in {rng}"
    assert said(e) == broken(f"{name}-range", message, SRC[name], 2)
    assert e.details == {"problems": [{"rule": f"{name}-range", "message": message, "source": SRC[name]}]}


@pytest.mark.parametrize(
    ("name", "value"), [(CT, "120"), (CT, "7200"), (ET, "0"), (ET, "2147483647"), (BS, "1"), (BS, "99999999999")]
)
def test_an_integer_at_its_bound_is_rendered(name, value):
    assert plan(hosts({name.lower(): value})).per_host["a"] == {**DEFAULTS, name: value, IP: "192.0.2.1"}


def test_a_value_out_of_range_on_every_node_is_one_problem_on_the_first():
    e = refusal(hosts({"hccl_connect_timeout": "119"}, {"hccl_connect_timeout": "119"}))
    assert said(e) == broken(f"{CT}-range", f"{CT}='119' on a is not an integer in [120, 7200]", SRC[CT], 2)
    assert len(e.details["problems"]) == 1


def test_a_rule_without_bounds_or_default_and_not_the_same_everywhere():
    p = plan(hosts({"hccl_connect_timeout": "-100000", ET.lower(): "123456789012"}, {}), data=CUSTOM)
    assert p == EnvPlan(
        per_host={"a": {CT: "-100000", BS: "7", ET: "123456789012", IP: "192.0.2.1"}, "b": {BS: "7", IP: "192.0.2.2"}},
        warnings=[],
        nic_variable=IP,
    )
    assert list(p.per_host["a"]) == [CT, BS, ET, IP]


def test_the_host_out_of_range_is_named_with_its_line_and_only_the_first():
    e = refusal(hosts({"hccl_connect_timeout": "5"}, {"hccl_connect_timeout": "6"}), data=CUSTOM)
    assert said(e) == broken(f"{CT}-range", f"{CT}='6' on b is not an integer in [-inf, 5]", f"{CT}.md (stated)", 3)
    e = refusal(hosts({"hccl_connect_timeout": "9"}, {"hccl_connect_timeout": "8"}), data=CUSTOM)
    assert said(e) == broken(f"{CT}-range", f"{CT}='9' on a is not an integer in [-inf, 5]", f"{CT}.md (stated)", 2)
    assert len(e.details["problems"]) == 1
    e = refusal(hosts({"hccl_buffsize": "2"}, {"hccl_buffsize": "1"}), data=CUSTOM)
    assert said(e) == broken(f"{BS}-range", f"{BS}='1' on b is not an integer in [2, inf]", f"{BS}.md (stated)", 3)


# --- the op expansion mode per chip, AIV's cap on HCCL_EXEC_TIMEOUT ----------------------------------------------------
def test_an_op_expansion_mode_the_950_does_not_take_is_an_error():
    e = refusal(hosts({"hccl_op_expansion_mode": "HOST"}), chip="950")
    text = "HCCL_OP_EXPANSION_MODE=HOST is not supported on chip 950 (legal: AI_CPU, AICPU_TS, AIV, CCU_MS, CCU_SCHED)"
    assert said(e) == broken("HCCL_OP_EXPANSION_MODE-legal-for-chip", text + "; HCCL reports an error", MODES["950"])


@pytest.mark.parametrize(
    ("chip", "mode", "legal", "default"),
    [("910b", "CCU_MS", "HOST, HOST_TS, AI_CPU, AIV", "HOST"), ("a3", "HOST", "AI_CPU, AICPU_CacheDisable, AIV", "AI_CPU")],
)
def test_an_op_expansion_mode_a2_or_a3_does_not_take_is_a_warning_and_still_rendered(chip, mode, legal, default):
    p = plan(hosts({"hccl_op_expansion_mode": mode}), chip=chip)
    assert p.warnings == [
        f"HCCL_OP_EXPANSION_MODE={mode} is not supported on chip {chip} (legal: {legal}); "
        f"HCCL ignores it and uses {default} ({MODES[chip]})"
    ]
    assert p.per_host == {"a": {**DEFAULTS, OP: mode, IP: "192.0.2.1"}}


def test_a_legal_mode_is_silent_and_a_chip_without_modes_is_a_warning():
    assert plan(hosts({"hccl_op_expansion_mode": "AICPU_TS"}), chip="950").warnings == []
    p = plan(hosts({"hccl_op_expansion_mode": "X"}), chip="310p")
    assert p.warnings == ["HCCL_OP_EXPANSION_MODE=X: no legal values are recorded for chip 310p; not checked"]
    assert p.per_host["a"][OP] == "X"


@pytest.mark.parametrize(
    ("timeout", "shown"), [(None, None), ("0", "0"), ("1", None), ("1091", None), ("1092", "1092"), ("01092", "1092")]
)
def test_aiv_caps_hccl_exec_timeout_at_1091_and_treats_0_the_same(timeout, shown):
    row = {"hccl_op_expansion_mode": "AIV"} | ({} if timeout is None else {"hccl_exec_timeout": timeout})
    p = plan(hosts(row, row))
    assert p.warnings == ([] if shown is None else [f"HCCL_EXEC_TIMEOUT={shown} with AIV: HCCL uses 1091 s instead ({SRC[ET]})"])
    assert p.per_host["b"][OP] == "AIV"


def test_no_aiv_warning_without_aiv_or_without_a_recorded_cap():
    assert plan(hosts({"hccl_op_expansion_mode": "HOST", "hccl_exec_timeout": "0"})).warnings == []
    p = plan(hosts({"hccl_op_expansion_mode": "AIV", "hccl_exec_timeout": "0"}), data=CUSTOM)
    assert p.warnings == ["HCCL_OP_EXPANSION_MODE=AIV: no legal values are recorded for chip 910b; not checked"]


# --- HCCL_IF_IP on every node, an address, once -------------------------------------------------------------------------
def test_hosts_without_an_ip_are_named_from_the_first_one_s_line():
    hs = hosts({}, {"ansible_host": "b.example"}, {}, {})
    hs[2] = Host("c", {}, 4)  # no ansible_host: its name, no IP
    e = refusal(hs)
    message = "HCCL_IF_IP is unknown for b, c: set hccl_if_ip per host (or ansible_host to an IP), or hccl_socket_ifname for all"
    assert said(e) == broken("NIC-variable-on-every-node", message, SRC[IP], 3)


def test_a_hccl_if_ip_that_is_no_address_is_refused():
    e = refusal(hosts({"hccl_if_ip": "10.0.0.300"}, {"hccl_if_ip": "x"}))
    first, second = "HCCL_IF_IP='10.0.0.300' on a is not an IP address", "HCCL_IF_IP='x' on b is not an IP address"
    assert said(e) == broken("HCCL_IF_IP-address", first, SRC[IP], None, " (and 1 more)")
    assert [p["message"] for p in e.details["problems"]] == [first, second]


def test_an_address_given_to_two_nodes_is_refused_once_in_order():
    hs = hosts({"hccl_if_ip": "10.0.0.2"}, {"ansible_host": "10.0.0.2"}, {"hccl_if_ip": "10.0.0.1"}, {"hccl_if_ip": "10.0.0.1"})
    hs.append(Host("e", {"hccl_if_ip": "10.0.0.1"}, 9))
    e = refusal(hs)
    message = "HCCL_IF_IP 10.0.0.1, 10.0.0.2 is given to more than one node"
    assert said(e) == broken("HCCL_IF_IP-per-node", message, SRC[IP])
    assert len(e.details["problems"]) == 1


def test_the_place_is_the_first_problem_s_line_not_a_later_one():
    e = refusal(
        hosts({"hccl_connect_timeout": "1", "hccl_if_ip": "10.0.0.1"}, {"hccl_connect_timeout": "1", "hccl_if_ip": "10.0.0.1"})
    )
    assert e.where == Where(INV, 2)
    assert [p["rule"] for p in e.details["problems"]] == [f"{CT}-range", "HCCL_IF_IP-per-node"]
    e = refusal(hosts({"hccl_if_ip": "x"}, {"ansible_host": "b.example"}))
    assert e.where == Where(INV, 3)
    assert [p["rule"] for p in e.details["problems"]] == ["NIC-variable-on-every-node", "HCCL_IF_IP-address"]


@pytest.mark.parametrize(
    ("raw", "value"),
    [("600", 600), (" 600 ", 600), ("-5", -5), ("9" * 19, int("9" * 19)), ("9" * 20, None), ("1_000", None), ("+600", None),
     ("٣", None), ("", None), ("-", None), ("0x10", None)],
)  # fmt: skip
def test_an_inventory_number_is_ascii_digits_of_bounded_length(raw, value):
    from envkit.fleet.env import _int

    assert _int(raw) == value


def test_uniform_env_holds_one_set_of_values_to_the_rules_across_the_nodes():
    """`envkit k8s render`'s pods: no name or address is known, every pod gets the same values."""
    from envkit.fleet.env import uniform_env

    assert uniform_env({CT: "600", IFN: "eth0"}, 3, "910b", hccl_facts(DATA, "910b"), "--hccl") == {
        **DEFAULTS,
        CT: "600",
        IFN: "eth0",
    }
    with pytest.raises(BadInput) as info:
        uniform_env({CT: "119", IFN: "eth0"}, 3, "910b", hccl_facts(DATA, "910b"), "--hccl")  # under the rule's 120
    assert info.value.where == Where("--hccl", None)
    assert uniform_env({IP: "192.0.2.1"}, 1, "910b", hccl_facts(DATA, "910b"), "--hccl") == {**DEFAULTS, IP: "192.0.2.1"}
    with pytest.raises(BadInput, match="more than one node"):  # one address for two nodes
        uniform_env({IP: "192.0.2.1"}, 2, "910b", hccl_facts(DATA, "910b"), "--hccl")


def test_a_node_without_an_address_gets_no_hccl_if_ip_of_its_own():
    """The pods of `envkit k8s render` are nodes with no address: HCCL_IF_IP has no default for them (a node's
    name is never taken for one), and the refusal names every node."""
    from envkit.fleet.env import uniform_env

    with pytest.raises(BadInput, match=r"HCCL_IF_IP is unknown for node-0, node-1: ") as info:
        uniform_env({}, 2, "910b", hccl_facts(DATA, "910b"), "--hccl")
    assert info.value.where == Where("--hccl", None)
    named = {"192.0.2.9": NodeValues({}, "192.0.2.9", 4), "b": NodeValues({}, None, 5)}
    assert said(refusal_of(named)) == broken(
        "NIC-variable-on-every-node",
        "HCCL_IF_IP is unknown for b: set hccl_if_ip per host (or ansible_host to an IP), or hccl_socket_ifname for all",
        SRC[IP],
        5,
    )


def refusal_of(nodes: dict[str, NodeValues]) -> BadInput:
    with pytest.raises(BadInput) as info:
        plan_env(nodes, "910b", hccl_facts(DATA, "910b"), INV)
    return info.value


def test_a_rule_with_several_sources_cites_each_and_its_confidence():
    from envkit.fleet.env import cite
    from envkit.models.lock import HcclEnvRule

    rule = HcclEnvRule(name=CT, kind="int", same_on_all_nodes=True, source=["HCCL guide §3", "CANN notes"], confidence="stated")
    assert cite(rule) == "HCCL guide §3; CANN notes (stated)"


def test_uniform_env_names_the_chip_whose_expansion_modes_refuse_a_value():
    """The pods' one environment is held to the lock's chip: 950 refuses an expansion mode it does not have."""
    from envkit.fleet.env import uniform_env

    with pytest.raises(BadInput) as info:
        uniform_env({OP: "NOPE", IFN: "eth0"}, 2, "950", hccl_facts(DATA, "950"), "--hccl")
    assert "HCCL_OP_EXPANSION_MODE=NOPE is not supported on chip 950" in info.value.message, info.value.message


@pytest.mark.parametrize("missing", [IP, IFN, ET])
def test_a_lock_without_a_rule_plan_env_reads_is_bad_input_not_a_traceback(missing):
    """An edited lock (--accept-edited-lock) whose platform.hccl.env lacks a rule the plan reads: exit 2 naming the
    rule and the lock's key. HCCL_EXEC_TIMEOUT is read only with AIV."""
    from envkit.records import replace

    facts = hccl_facts(DATA, "950")
    edited = replace(facts, env=[r for r in facts.env if r.name != missing])
    values = {IFN.lower(): "eth0", OP.lower(): "AIV"}
    with pytest.raises(BadInput) as info:
        plan_env({"a": NodeValues(values, None, 2)}, "950", edited, INV)
    assert info.value.message == f"the lock's HCCL rules (platform.hccl.env) have no rule for {missing}"
    assert info.value.where == Where("envkit.lock", None, "platform.hccl.env")
    assert info.value.hint == "The lock was edited: resolve it again (`envkit resolve`), which writes every HCCL rule."
