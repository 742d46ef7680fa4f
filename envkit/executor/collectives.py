"""`envkit smoke --collectives`: a measured, checked collective profile, like hccl_test / nccl-tests.

all_reduce, all_gather, reduce_scatter, all_to_all and all_to_allv over sizes from 8 KiB to 64 MiB (x2 steps; a
larger maximum on request), in `nproc` fresh processes started as `smoke --nproc` starts them (envkit/executor/dist.py:
torch.multiprocessing spawn, TCP rendezvous on 127.0.0.1; hccl on npu, nccl on cuda, gloo on cpu). Every result is
checked against values computed independently on each rank. Size S is the bytes of the larger buffer of a rank
(nccl-tests' convention). Time t is the slowest rank's mean over the timed iterations, algbw = S / t and
busbw = algbw * factor with the nccl-tests factors (doc/PERFORMANCE.md): all_reduce 2(n-1)/n, all_gather,
reduce_scatter and all_to_all(v) (n-1)/n. Host<->device copies (pinned and pageable) are measured where a device
exists. `compare_profiles` names each size whose time ratio is beyond thresholds fixed in advance
(envkit/data/collective_thresholds.yaml).
"""

from __future__ import annotations

import json
import re
import shlex
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from envkit.errors import BadInput, CannotRun, Where

OPS = ("all_reduce", "all_gather", "reduce_scatter", "all_to_all", "all_to_allv")
MIN_SIZE = 8 << 10
DEFAULT_MAX_SIZE = 64 << 20
ELEM = 4  # float32
BUS_FACTOR: dict[str, Callable[[int], float]] = {
    "all_reduce": lambda n: 2 * (n - 1) / n,
    "all_gather": lambda n: (n - 1) / n,
    "reduce_scatter": lambda n: (n - 1) / n,
    "all_to_all": lambda n: (n - 1) / n,
    "all_to_allv": lambda n: (n - 1) / n,
}
MAX_SIZE = 16 << 30  # the largest message a profile measures (nccl-tests go to a few GiB)


def parse_size(text: str) -> int:
    """'1MiB', '64M', '8K', '4096' -> bytes (binary units), at most MAX_SIZE (`envkit.io.bounded.size`)."""
    from envkit.io.bounded import size

    return size(str(text), "--max-size", hi=MAX_SIZE)


def sizes(max_size: int = DEFAULT_MAX_SIZE, min_size: int = MIN_SIZE) -> list[int]:
    if max_size < min_size:
        raise BadInput(f"--max-size {max_size} is below the smallest size {min_size}")
    out, s = [], min_size
    while s <= max_size:
        out.append(s)
        s *= 2
    return out


def human(n: int) -> str:
    for unit, div in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= div and n % div == 0:
            return f"{n // div} {unit}"
    return f"{n} B"


def iterations(size: int) -> tuple[int, int]:
    """(warm-up, timed) iterations: more for small sizes, at least 3 timed."""
    return (1, 20) if size <= 256 << 10 else ((1, 10) if size <= 8 << 20 else (1, 3))


def splits(n: int, total: int, src: int) -> list[int]:
    """all_to_allv: how many of `total` elements rank `src` sends to each peer (uneven, deterministic)."""
    weights = [1 + (src + p) % n for p in range(n)]
    counts = [total * w // sum(weights) for w in weights]
    counts[-1] += total - sum(counts)
    return counts


# --- one op: inputs, the call, the expected result -------------------------------------------------


def _pattern(torch, count: int, dev, rank: int):
    """Small integers (exact in fp32 after summing a few ranks): (i % 7 + 1) * (rank + 1)."""
    return ((torch.arange(count, device=dev) % 7) + 1).to(torch.float32) * (rank + 1)


def make_case(torch, dist, op: str, size: int, rank: int, n: int, dev):
    """(run, check): run() issues the collective once on fresh-enough buffers; check() -> bool."""
    count = max(n, size // ELEM // n * n)  # divisible by n
    part = count // n
    if op == "all_reduce":
        buf = _pattern(torch, count, dev, rank)  # in place: the timed loop grows it, the check uses a fresh case

        def run():
            dist.all_reduce(buf, op=dist.ReduceOp.SUM)

        return run, lambda: bool(
            torch.equal(buf, ((torch.arange(count, device=dev) % 7) + 1).to(torch.float32) * (n * (n + 1) // 2))
        )
    if op == "all_gather":
        inp = _pattern(torch, part, dev, rank)
        out = torch.empty(count, dtype=torch.float32, device=dev)

        def run():
            dist.all_gather_into_tensor(out, inp)

        return run, lambda: bool(torch.equal(out, torch.cat([_pattern(torch, part, dev, r) for r in range(n)])))
    if op == "reduce_scatter":
        inp = _pattern(torch, count, dev, rank)
        out = torch.empty(part, dtype=torch.float32, device=dev)

        def run():
            dist.reduce_scatter_tensor(out, inp, op=dist.ReduceOp.SUM)

        return run, lambda: bool(
            torch.equal(out, _pattern(torch, count, dev, 0)[rank * part : (rank + 1) * part] * (n * (n + 1) // 2))
        )
    if op == "all_to_all":
        inp = torch.arange(count, device=dev).to(torch.float32) % 1021 + rank * 1024
        out = torch.empty(count, dtype=torch.float32, device=dev)

        def run():
            dist.all_to_all_single(out, inp)

        def expected():
            return torch.cat(
                [
                    (torch.arange(count, device=dev).to(torch.float32) % 1021 + r * 1024)[rank * part : (rank + 1) * part]
                    for r in range(n)
                ]
            )

        return run, lambda: bool(torch.equal(out, expected()))
    if op == "all_to_allv":
        send = splits(n, count, rank)
        recv = [splits(n, count, r)[rank] for r in range(n)]
        inp = torch.arange(count, device=dev).to(torch.float32) % 1021 + rank * 1024
        out = torch.empty(sum(recv), dtype=torch.float32, device=dev)

        def run():
            dist.all_to_all_single(out, inp, output_split_sizes=recv, input_split_sizes=send)

        def expected_v():
            pieces = []
            for r in range(n):
                theirs = splits(n, count, r)
                start = sum(theirs[:rank])
                pieces.append((torch.arange(count, device=dev).to(torch.float32) % 1021 + r * 1024)[start : start + theirs[rank]])
            return torch.cat(pieces)

        return run, lambda: bool(torch.equal(out, expected_v()))
    raise ValueError(op)


def bare_seconds(
    torch, dist, op: str, size: int, rank: int, n: int, dev, sync: Callable[[], None], warmup: int, iters: int
) -> float:
    """Mean seconds of `op` at `size`, timed with a barrier before and a device sync after the loop."""
    run, _check = make_case(torch, dist, op, size, rank, n, dev)
    for _ in range(warmup):
        run()
    sync()
    dist.barrier()
    t0 = time.perf_counter()
    for _ in range(iters):
        run()
    sync()
    return (time.perf_counter() - t0) / iters


def init_rank(
    rank: int, world: int, device_type: str, port: int, timeout_s: int, master: str = "127.0.0.1", local: int | None = None
):
    """Join the process group as `smoke --nproc` does: (torch, dist, device, sync). Across hosts: the rendezvous at
    `master`, and `local` the rank's device index on its own host (default: the rank)."""
    local = rank if local is None else local
    import warnings

    from envkit.executor.dist import join_group, set_device

    torch = set_device(device_type, local)
    warnings.filterwarnings("ignore", category=FutureWarning, module="torch.distributed")
    sync = {
        "cuda": lambda: torch.cuda.synchronize(),
        "npu": lambda: torch.npu.synchronize(),  # torch_npu adds torch.npu
    }.get(device_type, lambda: None)
    dist = join_group(device_type, master, port, rank, world, timeout_s)
    return torch, dist, torch.device("cpu" if device_type == "cpu" else f"{device_type}:{local}"), sync


def _worker(
    local: int,
    world: int,
    device_type: str,
    port: int,
    outdir: str,
    timeout_s: int,
    size_list: list[int],
    ops: list[str],
    master: str = "127.0.0.1",
    first_rank: int = 0,
) -> None:
    rank = first_rank + local
    result: dict[str, Any] = {"rank": rank, "results": []}
    try:
        torch, dist, dev, sync = init_rank(rank, world, device_type, port, timeout_s, master, local)
        for op in ops:
            for size in size_list:
                warmup, iters = iterations(size)
                seconds = bare_seconds(torch, dist, op, size, rank, world, dev, sync, warmup, iters)
                run, check = make_case(torch, dist, op, size, rank, world, dev)
                run()
                sync()
                result["results"].append({"op": op, "size": size, "seconds": seconds, "iters": iters, "correct": check()})
        dist.barrier()
        dist.destroy_process_group()
    except Exception as exc:  # noqa: BLE001 - reported back to the parent as the profile's failure
        result["error"] = f"{type(exc).__name__}: {exc}"
    Path(outdir, f"rank{rank}.json").write_text(json.dumps(result))


def aggregate(ranks: list[dict[str, Any]], world: int, expected: int | None = None) -> list[dict[str, Any]]:
    """Per (op, size): the slowest rank's time, algbw and busbw (GB/s, 1e9), and correct on every rank (on each of
    the `expected` ranks given, default all `world`: one host of several holds only its own)."""
    rows: dict[tuple[str, int], list[dict[str, Any]]] = {}
    for r in ranks:
        for res in r.get("results", []):
            rows.setdefault((res["op"], res["size"]), []).append(res)
    out = []
    for (op, size), items in sorted(rows.items(), key=lambda kv: (OPS.index(kv[0][0]), kv[0][1])):
        t = max(i["seconds"] for i in items)
        algbw = size / t / 1e9 if t > 0 else 0.0
        out.append(
            {
                "op": op,
                "size": size,
                "time_us": t * 1e6,
                "algbw_gbps": algbw,
                "busbw_gbps": algbw * BUS_FACTOR[op](world),
                "correct": len(items) == (expected or world) and all(i["correct"] for i in items),
                "per_rank_time_us": [i["seconds"] * 1e6 for i in items],
            }
        )
    return out


def copy_bandwidth(device_type: str, max_size: int = 256 << 20) -> dict[str, Any]:
    """H2D and D2H, pinned and pageable host memory; skipped with a reason on cpu."""
    if device_type == "cpu":
        return {"skipped": "no device: host<->device copies need --device cuda or npu"}
    import torch

    if device_type == "npu":
        import torch_npu  # noqa: F401
    dev = torch.device(f"{device_type}:0")
    sync = torch.cuda.synchronize if device_type == "cuda" else torch.npu.synchronize  # type: ignore[attr-defined]
    rows = []
    size = 1 << 20
    while size <= max_size:
        for pinned in (True, False):
            host = torch.empty(size, dtype=torch.uint8, pin_memory=pinned)
            devbuf = torch.empty(size, dtype=torch.uint8, device=dev)
            for direction in ("h2d", "d2h"):
                src, dst = (host, devbuf) if direction == "h2d" else (devbuf, host)
                dst.copy_(src, non_blocking=pinned)
                sync()
                iters = 5
                t0 = time.perf_counter()
                for _ in range(iters):
                    dst.copy_(src, non_blocking=pinned)
                sync()
                t = (time.perf_counter() - t0) / iters
                rows.append({"direction": direction, "pinned": pinned, "size": size, "time_us": t * 1e6, "gbps": size / t / 1e9})
        size *= 16 if size < max_size // 16 else 2
    return {"rows": rows}


def run_profile(
    device_type: str,
    world: int,
    max_size: int = DEFAULT_MAX_SIZE,
    ops: tuple[str, ...] = OPS,
    timeout_s: int = 600,
    copy_max: int | None = None,
    *,
    nnodes: int = 1,
    node_rank: int = 0,
    master: str = "127.0.0.1",
    port: int | None = None,
) -> dict[str, Any]:
    """The profile: per-rank raw results, the aggregated table, copy bandwidth; ok when every result is correct.

    Across hosts (`nnodes` > 1): this host runs ranks node_rank*nproc ... (nproc = world / nnodes) against the
    rendezvous at master:port; its profile holds its own ranks (envkit/jobs/launch/profile.py merges the hosts')."""
    import torch.multiprocessing as mp

    from envkit.executor.dist import BACKENDS, free_port

    if world < 2:
        raise BadInput("--collectives needs --nproc 2 or more", hint="collectives run across processes: e.g. --nproc 4")
    size_list = sizes(max_size)
    nproc, first = world // nnodes, node_rank * (world // nnodes)
    with tempfile.TemporaryDirectory(prefix="envkit-coll-") as tmp:
        error = None
        try:
            mp.start_processes(
                _worker,
                args=(world, device_type, port or free_port(), tmp, timeout_s, size_list, list(ops), master, first),
                nprocs=nproc,
                join=True,
                start_method="spawn",
            )
        except Exception as exc:  # noqa: BLE001 - a dead rank is a failed profile
            text = str(exc).strip()
            error = f"{type(exc).__name__}: {text.splitlines()[-1] if text else ''}"
        ranks = []
        for r in range(first, first + nproc):
            path = Path(tmp, f"rank{r}.json")
            ranks.append(json.loads(path.read_text()) if path.is_file() else {"rank": r, "error": "no result"})
    table = aggregate(ranks, world, nproc)
    errors = [r["error"] for r in ranks if r.get("error")] + ([error] if error else [])
    ok = not errors and len(table) == len(ops) * len(size_list) and all(row["correct"] for row in table)
    return {
        "format": "envkit-collectives/1",
        "ok": ok,
        "backend": BACKENDS[device_type],
        "device_type": device_type,
        "world": world,
        "sizes": size_list,
        "ops": list(ops),
        "bus_factors": {op: f"{'2(n-1)/n' if op == 'all_reduce' else '(n-1)/n'} = {BUS_FACTOR[op](world):.4f}" for op in ops},
        "results": table,
        "ranks": ranks,
        "errors": errors,
        "copies": copy_bandwidth(device_type, copy_max or min(max_size * 4, 1 << 30)),
    }


def format_table(profile: dict[str, Any]) -> list[str]:
    lines = [
        f"collectives: {profile['backend']} across {profile['world']} processes",
        f"{'op':<15}{'size':>10}{'time(us)':>12}{'algbw(GB/s)':>13}{'busbw(GB/s)':>13}  check",
    ]
    for row in profile["results"]:
        lines.append(
            f"{row['op']:<15}{human(row['size']):>10}{row['time_us']:>12.1f}{row['algbw_gbps']:>13.3f}"
            f"{row['busbw_gbps']:>13.3f}  {'ok' if row['correct'] else 'WRONG'}"
        )
    copies = profile.get("copies", {})
    if "skipped" in copies:
        lines.append(f"copies: skipped ({copies['skipped']})")
    for row in copies.get("rows", []):
        lines.append(
            f"copy {row['direction']} {'pinned' if row['pinned'] else 'pageable':<8} {human(row['size']):>9} {row['gbps']:.2f} GB/s"
        )
    for name, tool in profile.get("vendor_tools", {}).get("tools", {}).items():
        state = tool.get("skipped") or tool.get("error") or f"{len(tool['rows'])} sizes, ok"
        lines.append(f"{name}: {'skipped: ' if 'skipped' in tool else ''}{state}")
    lines += [f"error: {e}" for e in profile.get("errors", [])]
    return lines


# --- comparing two profiles ------------------------------------------------------------------------


def default_thresholds_path() -> Path:
    from importlib import resources

    return Path(str(resources.files("envkit").joinpath("data/collective_thresholds.yaml")))


def load_thresholds(path: Path | None = None) -> dict[str, Any]:
    from envkit.io.yamlio import load_file

    file = Path(path) if path else default_thresholds_path()
    data, _lines = load_file(file)
    try:
        th = data["collectives"]
        out = {"time_ratio_max": float(th["time_ratio_max"]), "min_time_us": float(th.get("min_time_us", 0.0))}
    except (TypeError, KeyError, ValueError):
        raise BadInput(
            f"{file}: expected collectives.time_ratio_max (and optional min_time_us)", where=Where(str(file))
        ) from None
    if out["time_ratio_max"] < 1.0:
        raise BadInput(f"{file}: time_ratio_max must be at least 1.0", where=Where(str(file), None, "collectives.time_ratio_max"))
    return out


def rerun_at_world(ref: dict[str, Any], cand: dict[str, Any], ref_name: str = "REF") -> str:
    """The next step when two profiles' world sizes differ: the command that profiles the candidate again the way it
    was made (`launch profile` for a multi-host profile, `smoke --collectives` otherwise), with the reference's world
    size and largest size, then the comparison again."""
    world = ref.get("world")
    device = cand.get("device_type") or ref.get("device_type") or "cpu"
    largest = max(ref.get("sizes") or [r["size"] for r in ref.get("results", []) if isinstance(r, dict) and "size" in r] or [0])
    size = f" --max-size {human(largest).replace(' ', '')}" if largest else ""
    nnodes = cand.get("nnodes") or 1
    if nnodes > 1 and isinstance(world, int) and world % nnodes == 0:
        make = f"envkit launch profile -i INVENTORY --nproc {world // nnodes} --device {device}{size} -o DIR"
        where, then = f", on its {nnodes} hosts x {world // nnodes}", "DIR/profile.json"
    elif nnodes > 1:
        make = f"envkit launch profile -i INVENTORY --nproc N --device {device}{size} -o DIR"
        where, then = f", its hosts x N = {world}", "DIR/profile.json"
    else:
        make = f"envkit smoke --collectives --device {device} --nproc {world}{size} --out DIR"
        where, then = "", "DIR"
    return (
        f"Profile the candidate again at the reference's world size ({world} processes{where}):\n  {make}\n"
        f"then compare the two: envkit compare {ref_name} {then}"
    )


def compare_profiles(
    ref: dict[str, Any], cand: dict[str, Any], thresholds: dict[str, Any], ref_name: str = "REF"
) -> dict[str, Any]:
    """Per (op, size) present in both: cand/ref time ratio; names each one beyond time_ratio_max or incorrect.
    Profiles of different world sizes are bad input, with the command that profiles the candidate at the reference's
    (`ref_name`: how the hint names the reference)."""
    if ref.get("world") != cand.get("world"):
        raise BadInput(
            f"profiles of different world sizes do not compare: the reference ran {ref.get('world')} processes, "
            f"the candidate {cand.get('world')}",
            hint=rerun_at_world(ref, cand, ref_name),
        )
    index = {(r["op"], r["size"]): r for r in ref.get("results", [])}
    rows, slower = [], []
    for c in cand.get("results", []):
        r = index.get((c["op"], c["size"]))
        if r is None:
            continue
        ratio = c["time_us"] / r["time_us"] if r["time_us"] > 0 else float("inf")
        noisy = max(c["time_us"], r["time_us"]) < thresholds.get("min_time_us", 0.0)
        bad = (ratio > thresholds["time_ratio_max"] and not noisy) or not c.get("correct", False)
        row = {
            "op": c["op"],
            "size": c["size"],
            "ref_time_us": r["time_us"],
            "cand_time_us": c["time_us"],
            "ratio": ratio,
            "correct": bool(c.get("correct")),
            "beyond": bad,
        }
        rows.append(row)
        if bad:
            slower.append(f"{c['op']} {human(c['size'])}: x{ratio:.2f}" + ("" if c.get("correct") else " (wrong result)"))
    return {"ok": not slower and bool(rows), "thresholds": thresholds, "rows": rows, "beyond": slower}


def load_profile(path: Path) -> dict[str, Any]:
    """A profile from a smoke report.json (its `collectives` section) or a bare profile JSON, read strictly
    (`envkit.io.jsonread`) and of the exact shape `envkit.fleet.profiledoc.Profile` gives: BadInput (exit 2) naming the
    file and the key otherwise."""
    from envkit.fleet.profiledoc import FORMAT, Profile
    from envkit.io.jsonread import checked, read_json
    from envkit.models.smokerun import REPORT_FILE, report_keys

    p = Path(path)
    if p.is_dir():
        p = p / REPORT_FILE
    data = read_json(p, what="collective profile")
    key = ""
    if isinstance(data, dict) and "collectives" in data:  # a smoke report: only its own keys
        try:
            data = report_keys(data, p)  # the document already read: its keys checked, not the file read again
        except BadInput as exc:
            raise BadInput(exc.message, where=exc.where, hint=_ROWS_HINT) from None
        data, key = data["collectives"], "collectives"
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise CannotRun(f"{p} holds no collective profile", where=Where(str(p)), hint="run envkit smoke --collectives first")
    rows = data.get("results")
    for i, row in enumerate(rows if isinstance(rows, list) else []):
        if not isinstance(row, dict) or not isinstance(row.get("op"), str) or type(row.get("size")) is not int:
            raise BadInput(
                f"{p}: results[{i}] is not a profile row (op: string, size: integer, time_us: number)",
                where=Where(str(p), None, ".".join(filter(None, (key, "results", str(i))))),
                hint=_ROWS_HINT,
            )
    checked(data, Profile, p, what="collective profile", key=key)
    return data


_ROWS_HINT = "compare the report.json of `envkit smoke --collectives` runs"


# --- vendor tools: hccl_test and ascend-dmi --bw ---------------------------------------------------

_HCCL_HEADER = re.compile(
    r"data_size\(Bytes\):?\s*\|\s*a(?:ve|v)g_time\(us\):?\s*\|\s*alg_bandwidth\(GB/s\):?\s*\|\s*check_result:?", re.I
)


def parse_hccl_test(text: str) -> dict[str, Any]:
    """Rows of hccl_test's `data_size | avg_time | alg_bandwidth | check_result` table (hicann/oam-tools).

    The binary prints `aveg_time(us):`, the docs `avg_time(us)`: both are read. Lines that are not table rows are
    counted in `skipped`; `ok` is True when there is at least one row and every check_result is success."""
    rows, skipped, in_table = [], 0, False
    for line in text.splitlines():
        if _HCCL_HEADER.search(line):
            in_table = True
            continue
        if not in_table or not line.strip():
            continue
        cells = [c.strip() for c in line.split("|")]
        try:
            size, t, bw = int(cells[0]), float(cells[1]), float(cells[2])
            check = cells[3]
        except (ValueError, IndexError):
            skipped += 1
            continue
        rows.append({"size": size, "avg_time_us": t, "alg_bandwidth_gbps": bw, "check_result": check})
    return {"rows": rows, "skipped": skipped, "ok": bool(rows) and all(r["check_result"] == "success" for r in rows)}


def _walk(node: Any):
    if isinstance(node, dict):
        yield node
        for v in node.values():
            yield from _walk(v)
    elif isinstance(node, list):
        for v in node:
            yield from _walk(v)


def parse_ascend_dmi_bw(text: str) -> dict[str, Any]:
    """`ascend-dmi --bw ... --fmt json`: every object with a size and a bandwidth key; an `error` object is kept.

    No recorded JSON sample was found (tests/fixtures/collectives/SOURCES.md), so keys are matched by name:
    one containing 'size' and one containing 'bandwidth' (GB/s)."""
    try:
        doc = json.loads(text)
    except ValueError as exc:
        return {"rows": [], "error": f"not JSON: {exc}"}
    if isinstance(doc, dict) and isinstance(doc.get("error"), dict):
        err = doc["error"]
        return {"rows": [], "error": f"ascend-dmi error {err.get('code')}: {err.get('description')}"}
    rows = []
    for obj in _walk(doc):
        size_key = next((k for k in obj if "size" in str(k).lower()), None)
        bw_key = next((k for k in obj if "bandwidth" in str(k).lower()), None)
        if size_key is None or bw_key is None:
            continue
        try:
            rows.append({"size": int(float(obj[size_key])), "bandwidth_gbps": float(obj[bw_key])})
        except (TypeError, ValueError):
            continue
    return {"rows": rows, "error": None if rows else "no size / bandwidth values found"}


# --- running the vendor tools (npu hosts only) -------------------------------------------------------

HCCL_TESTS = ("all_reduce_test", "all_gather_test", "reduce_scatter_test", "alltoall_test")
HCCL_TEST_BIN = "tools/hccl_test/bin"
HCCL_TEST_DIRS = (Path("/usr/local/Ascend/ascend-toolkit/latest") / HCCL_TEST_BIN,)
ASCEND_DMI_PATHS = (Path("/usr/local/Ascend/toolbox/latest/Ascend-DMI/bin/ascend-dmi"),)
VENDOR_TIMEOUT_S = 300


def hccl_test_dirs(env: dict[str, str]) -> list[Path]:
    """Where hccl_test's binaries are looked for: $ASCEND_HOME_PATH/tools/hccl_test/bin, then the toolkit's."""
    home = env.get("ASCEND_HOME_PATH")
    return ([Path(home) / HCCL_TEST_BIN] if home else []) + list(HCCL_TEST_DIRS)


def hccl_test_argv(mpirun: str, binary: Path, nproc: int) -> list[str]:
    """The hccl_test guide's single-host run: mpirun -n N BIN -b 8K -e 64M -f 2 -d fp32 [-o sum] -p N."""
    reduce = ["-o", "sum"] if binary.name in ("all_reduce_test", "reduce_scatter_test") else []
    return [mpirun, "-n", str(nproc), str(binary), "-b", "8K", "-e", "64M", "-f", "2", "-d", "fp32", *reduce, "-p", str(nproc)]


def run_vendor_tool(
    argv: list[str], parse: Callable[[str], dict[str, Any]], timeout_s: float, cwd: str | None = None
) -> dict[str, Any]:
    """One tool run (own process group, killed whole at the timeout, output capped; the caller's environment),
    parsed: {argv, returncode, rows, error}; a failure or garbled output is the entry's `error`, never raised."""
    from envkit.executor.proc import run_command

    res = run_command(argv, timeout=timeout_s, cwd=cwd)
    out = res.stdout.decode("utf-8", "replace")
    parsed = parse(out)
    tail = (res.stderr.decode("utf-8", "replace").strip() or out.strip())[-300:]
    error = (
        res.error
        or (f"exited {res.returncode}: {tail}" if res.returncode != 0 else None)
        or parsed.get("error")
        or (None if parsed["rows"] else f"no result table in its output ({len(out.splitlines())} lines)")
        or ("check_result is not success on every size" if parsed.get("ok") is False else None)
    )
    return {"argv": argv, "returncode": res.returncode, "rows": parsed["rows"], "error": error}


def vendor_tools(
    device_type: str,
    nproc: int,
    *,
    bin_dirs: list[Path] | None = None,
    dmi_paths: tuple[Path, ...] = ASCEND_DMI_PATHS,
    search_path: str | None = None,
    timeout_s: float = VENDOR_TIMEOUT_S,
) -> dict[str, Any]:
    """hccl_test (all_reduce_test, and the other tests present) under mpirun, and `ascend-dmi --bw -t h2d --fmt json`,
    where the host has them; npu only. Per tool: {path, argv, returncode, rows | error | skipped}."""
    import os
    import shutil

    if device_type != "npu":
        return {"skipped": f"not looked for on {device_type}: hccl_test and ascend-dmi are Ascend tools"}
    dirs = bin_dirs if bin_dirs is not None else hccl_test_dirs(dict(os.environ))
    mpirun = shutil.which("mpirun", path=search_path)
    tools: dict[str, Any] = {}
    for name in HCCL_TESTS:
        binary = next((d / name for d in dirs if (d / name).is_file()), None)
        if binary is None:
            if name == "all_reduce_test":
                tools[name] = {"path": None, "skipped": "not found in " + ", ".join(map(str, dirs))}
        elif mpirun is None:
            tools[name] = {"path": str(binary), "skipped": "mpirun not found"}
        else:
            argv = hccl_test_argv(mpirun, binary, nproc)
            tools[name] = {"path": str(binary), **run_vendor_tool(argv, parse_hccl_test, timeout_s, str(binary.parent.parent))}
    found = shutil.which("ascend-dmi", path=search_path)
    dmi = found or next((str(p) for p in dmi_paths if p.is_file()), None)
    if dmi is None:
        where = ["PATH", *map(str, dmi_paths)]
        tools["ascend-dmi"] = {"path": None, "skipped": "not found on " + ", ".join(where)}
    else:
        argv = [dmi, "--bw", "-t", "h2d", "--fmt", "json"]
        tools["ascend-dmi"] = {"path": dmi, **run_vendor_tool(argv, parse_ascend_dmi_bw, timeout_s)}
    return {"tools": tools}


# --- `envkit compare` on two profiles ---------------------------------------------------------------


def is_profile(path: str | Path) -> bool:
    """True when `envkit compare` reads `path` as a collective profile: a file that is not a `.safetensors` (a profile
    JSON or a report.json), or a run folder whose report.json has a collectives section. Never raises: whether the
    file is a good profile, `load_profile` then says, naming it."""
    from envkit.io.jsonread import read_json
    from envkit.models.smokerun import LOGITS_FILE, REPORT_FILE

    p = Path(path)
    if not p.is_dir():
        return p.is_file() and p.name != LOGITS_FILE and p.suffix != ".safetensors"
    try:
        data = read_json(p / REPORT_FILE, what="smoke report")
    except BadInput:
        return False  # a smoke run without a readable report.json: compared as a smoke run, which names it
    return isinstance(data, dict) and data.get("collectives") is not None


def compare_profile_files(ref: str | Path, cand: str | Path, thresholds: Path | None = None) -> dict[str, Any]:
    """`envkit compare A B` on two profiles: `compare_profiles` with the thresholds file (default envkit's).

    A profile whose rows lack the fields compared is bad input (exit 2), never a traceback."""
    th = load_thresholds(thresholds)
    a, b = load_profile(Path(ref)), load_profile(Path(cand))
    try:
        cmp = compare_profiles(a, b, th, ref_name=shlex.quote(str(ref)))
    except (KeyError, TypeError, ValueError, ZeroDivisionError, AttributeError) as exc:
        raise BadInput(
            f"a profile row is malformed ({type(exc).__name__}: {exc})",
            hint="compare the report.json of `envkit smoke --collectives` runs",
        ) from None
    if not cmp["rows"]:
        raise BadInput("the two profiles share no (op, size) to compare", hint="run both with the same --max-size")
    return {
        **cmp,
        "ref": str(ref),
        "cand": str(cand),
        "ref_backend": a.get("backend"),
        "cand_backend": b.get("backend"),
        "world": a.get("world"),
    }


def format_comparison(cmp: dict[str, Any]) -> list[str]:
    """A table: each (op, size) with both times and the ratio; each size beyond the threshold marked and named."""
    th = cmp["thresholds"]
    lines = [
        f"collective profiles: {cmp.get('ref')} ({cmp.get('ref_backend')}) vs {cmp.get('cand')} ({cmp.get('cand_backend')}),"
        f" world {cmp.get('world')}; limit x{th['time_ratio_max']:g} (sizes under {th.get('min_time_us', 0):g} us only checked)",
        f"{'op':<15}{'size':>10}{'ref(us)':>12}{'cand(us)':>12}{'ratio':>8}  verdict",
    ]
    for r in cmp["rows"]:
        verdict = "SLOWER" if r["beyond"] and r["correct"] else ("WRONG" if not r["correct"] else "ok")
        lines.append(
            f"{r['op']:<15}{human(r['size']):>10}{r['ref_time_us']:>12.1f}{r['cand_time_us']:>12.1f}{r['ratio']:>8.2f}  {verdict}"
        )
    lines.append("beyond the thresholds: " + "; ".join(cmp["beyond"]) if cmp["beyond"] else "every size within the thresholds")
    return lines
