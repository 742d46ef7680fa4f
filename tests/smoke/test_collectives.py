"""The collective profile: 4 gloo processes on this CPU, every result checked; bandwidth maths; vendor parsers."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from envkit.errors import BadInput
from envkit.executor import collectives as C

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "collectives"


def test_sizes_and_parse_size():
    assert C.sizes() == [8192 << i for i in range(14)] and C.sizes()[-1] == 64 << 20
    assert C.parse_size("1MiB") == 1 << 20 and C.parse_size("64M") == 64 << 20 and C.parse_size("8K") == 8192
    with pytest.raises(BadInput):
        C.parse_size("lots")
    with pytest.raises(BadInput):
        C.sizes(4096)


def test_alltoallv_splits_are_uneven_and_complete():
    for src in range(4):
        counts = C.splits(4, 1000, src)
        assert sum(counts) == 1000 and len(set(counts)) > 1


def test_aggregate_uses_slowest_rank_and_nccl_tests_factors():
    ranks = [
        {
            "results": [
                {"op": "all_reduce", "size": 1 << 20, "seconds": s, "correct": True},
                {"op": "all_to_all", "size": 1 << 20, "seconds": s, "correct": r != 2},
            ]
        }
        for r, s in enumerate([0.001, 0.002, 0.001, 0.001])
    ]
    rows = {row["op"]: row for row in C.aggregate(ranks, 4)}
    ar = rows["all_reduce"]
    assert ar["time_us"] == pytest.approx(2000) and ar["algbw_gbps"] == pytest.approx((1 << 20) / 0.002 / 1e9)
    assert ar["busbw_gbps"] == pytest.approx(ar["algbw_gbps"] * 2 * 3 / 4)
    assert rows["all_to_all"]["busbw_gbps"] == pytest.approx(rows["all_to_all"]["algbw_gbps"] * 3 / 4)
    assert ar["correct"] and not rows["all_to_all"]["correct"]


def test_compare_profiles_names_slow_sizes():
    th = C.load_thresholds()
    assert th["time_ratio_max"] >= 1.0
    row = lambda op, size, t: {"op": op, "size": size, "time_us": t, "correct": True}  # noqa: E731
    ref = {"world": 4, "results": [row("all_reduce", 8192, 1000.0), row("all_to_all", 1 << 20, 5000.0)]}
    cand = {"world": 4, "results": [row("all_reduce", 8192, 1100.0), row("all_to_all", 1 << 20, 20000.0)]}
    cmp = C.compare_profiles(ref, cand, {"time_ratio_max": 1.5, "min_time_us": 200})
    assert not cmp["ok"] and cmp["beyond"] == ["all_to_all 1 MiB: x4.00"]
    assert C.compare_profiles(ref, ref, th)["ok"]
    with pytest.raises(BadInput):
        C.compare_profiles(ref, {"world": 8, "results": []}, th)


def test_hccl_test_parser_on_recorded_layout():
    ok = C.parse_hccl_test((FIX / "hccl_test_all_reduce.txt").read_text())
    assert (
        ok["ok"]
        and len(ok["rows"]) == 6
        and ok["rows"][-1]
        == {"size": 67108864, "avg_time_us": 1421.90, "alg_bandwidth_gbps": 47.19661, "check_result": "success"}
    )
    bad = C.parse_hccl_test((FIX / "hccl_test_failed.txt").read_text())
    assert not bad["ok"] and [r["check_result"] for r in bad["rows"]] == ["success", "failed", "NULL"]
    assert C.parse_hccl_test("garbage\n\x00|||\n") == {"rows": [], "skipped": 0, "ok": False}


def test_ascend_dmi_parser():
    res = C.parse_ascend_dmi_bw((FIX / "ascend_dmi_bw_h2d.json").read_text())
    assert res["error"] is None and res["rows"][0] == {"size": 1048576, "bandwidth_gbps": 21.35}
    assert C.parse_ascend_dmi_bw((FIX / "ascend_dmi_error.json").read_text())["error"] == "ascend-dmi error 2: internal error"
    assert C.parse_ascend_dmi_bw("{not json")["rows"] == []


@pytest.mark.slow
@pytest.mark.torch
def test_smoke_collectives_cpu_4_processes(tmp_path, capsys, smoke_cache):
    pytest.importorskip("torch")
    from envkit.cli import main

    out = tmp_path / "run"
    with pytest.raises(SystemExit) as exc:
        main(
            [
                "smoke",
                "--device",
                "cpu",
                "--dtype",
                "fp32",
                "--nproc",
                "4",
                "--collectives",
                "--max-size",
                "1MiB",
                "--out",
                str(out),
            ]
        )
    text = capsys.readouterr().out
    assert exc.value.code in (0, None), text
    report = json.loads((out / "report.json").read_text())
    prof = report["collectives"]
    assert report["ok"] and prof["ok"] and prof["backend"] == "gloo" and prof["world"] == 4
    assert prof["sizes"] == [8192 << i for i in range(8)]
    assert {(r["op"], r["size"]) for r in prof["results"]} == {(op, s) for op in C.OPS for s in prof["sizes"]}
    assert all(r["correct"] and r["time_us"] > 0 and len(r["per_rank_time_us"]) == 4 for r in prof["results"])
    assert "skipped" in prof["copies"] and "busbw(GB/s)" in text and "all_to_allv" in text
    assert C.compare_profiles(C.load_profile(out), C.load_profile(out / "report.json"), C.load_thresholds())["ok"]


def _profile_file(
    path: Path, times: dict[tuple[str, int], float], *, wrapped: bool = False, world: int = 4, **more: object
) -> Path:
    prof = {
        "format": "envkit-collectives/1",
        "ok": True,
        "backend": "gloo",
        "world": world,
        **more,
        "results": [{"op": op, "size": s, "time_us": t, "correct": True} for (op, s), t in times.items()],
    }
    if wrapped:  # a smoke run folder: report.json with a collectives section
        path.mkdir()
        (path / "report.json").write_text(json.dumps({"ok": True, "collectives": prof}))
    else:
        path.write_text(json.dumps(prof))
    return path


def test_compare_cli_dispatches_profiles(tmp_path, run_cli):
    base = {("all_reduce", 8192): 1000.0, ("all_to_all", 1 << 20): 5000.0}
    ref = _profile_file(tmp_path / "ref-run", base, wrapped=True)
    same = _profile_file(tmp_path / "same.json", {k: v * 1.1 for k, v in base.items()})
    slow = _profile_file(tmp_path / "slow.json", {**base, ("all_to_all", 1 << 20): 20000.0})
    r = run_cli("compare", str(ref), str(same))
    assert r.code == 0 and "every size within the thresholds" in r.out
    r = run_cli("compare", str(ref), str(slow))
    assert r.code == 1 and "all_to_all 1 MiB: x4.00" in r.out and "SLOWER" in r.out
    r = run_cli("compare", "--json", str(ref), str(slow))
    assert r.code == 1
    doc = json.loads(r.out)
    assert doc["beyond"] == ["all_to_all 1 MiB: x4.00"] and len(doc["rows"]) == 2
    # bad input: a profile against a file holding none, rows without times, no shared sizes
    junk = tmp_path / "junk.json"
    junk.write_text('{"format": "envkit-collectives/1", "world": 4, "results": [{"op": "all_reduce", "size": 8192}]}')
    other = _profile_file(tmp_path / "other.json", {("all_gather", 8192): 1.0})
    (tmp_path / "not-a-profile.json").write_text("[1, 2]")
    for bad in (junk, other, tmp_path / "not-a-profile.json"):
        r = run_cli("compare", str(ref), str(bad))
        assert r.code == 2 and "Traceback" not in r.err, (bad, r.err)


@pytest.mark.parametrize(
    "row",
    [
        {"op": None, "size": 8192, "time_us": 1.0, "correct": True},
        {"op": "all_reduce", "size": "8K", "time_us": 1.0, "correct": True},
    ],
)
def test_compare_profile_files_refuses_rows_that_would_break_the_table(tmp_path, row):
    doc = {"format": "envkit-collectives/1", "world": 2, "ops": ["all_reduce"], "sizes": [8192], "results": [row]}
    for name in ("a.json", "b.json"):
        (tmp_path / name).write_text(json.dumps(doc))
    with pytest.raises(BadInput, match=r"a.json: results\[0\] is not a profile row") as exc:
        C.format_comparison(C.compare_profile_files(tmp_path / "a.json", tmp_path / "b.json"))
    assert exc.value.exit_code == 2


def test_compare_of_different_world_sizes_says_how_to_profile_the_candidate_again(tmp_path, run_cli):
    """Exit 2 naming both world sizes, and the next step: the command that profiles the candidate the way it was made
    (one host: smoke --collectives; several: launch profile) at the reference's world size and largest size."""
    import shlex

    from tests.core.test_cli_help import _parse

    base = {("all_reduce", 8192): 1000.0, ("all_to_all", 1 << 20): 5000.0}
    ref = _profile_file(tmp_path / "ref-run", base, wrapped=True, device_type="cpu")
    two = _profile_file(tmp_path / "two.json", base, world=2, device_type="cpu")
    r = run_cli("compare", str(ref), str(two))
    assert r.code == 2, r.out + r.err
    assert "different world sizes do not compare: the reference ran 4 processes, the candidate 2" in r.err
    step = "envkit smoke --collectives --device cpu --nproc 4 --max-size 1MiB --out DIR"
    assert f"  next: Profile the candidate again at the reference's world size (4 processes):\n          {step}\n" in r.err
    assert f"then compare the two: envkit compare {ref} DIR" in r.err
    assert _parse(shlex.split(step)[1:]) == ("smoke",)  # the step is a command envkit takes

    fleet = _profile_file(tmp_path / "fleet.json", base, world=16, nnodes=2, device_type="npu")
    r = run_cli("compare", "--json", str(ref), str(fleet))
    assert r.code == 2
    hint = json.loads(r.out)["error"]["hint"]
    step = "envkit launch profile -i INVENTORY --nproc 2 --device npu --max-size 1MiB -o DIR"
    assert "(4 processes, on its 2 hosts x 2)" in hint and step in hint and f"envkit compare {ref} DIR/profile.json" in hint
    assert _parse(shlex.split(step)[1:]) == ("launch", "profile")
    # hosts that cannot split the reference's world evenly: N left to choose
    odd = _profile_file(tmp_path / "odd.json", base, world=6, nnodes=3)
    r = run_cli("compare", str(ref), str(odd))
    assert r.code == 2 and "its hosts x N = 4" in r.err and "--nproc N --device cpu" in r.err
