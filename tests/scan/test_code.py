"""The code rules on projects written for the tests: each CUDA-ism found at its line with its rule, and nothing
reported where nothing is wrong (a false positive is a failure)."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from envkit.artifacts.project.table import load_table
from envkit.jobs.scan import ScanRequest, scan
from envkit.jobs.scan.code import scan_file
from tests.scan.conftest import PROJECTS, by_rule

# (path:line, rule) -> (severity, what the line holds)
GPT_TRAINER = {
    ("train.py:28", "nccl-backend"): ("warn", 'backend = "nccl"'),
    ("train.py:29", "cuda-device-string"): ("warn", 'device = "cuda"'),
    ("train.py:30", "cuda-bf16-check"): ("block", "torch.cuda.is_bf16_supported()"),
    ("train.py:40", "cuda-device-string"): ("warn", 'device = f"cuda:{ddp_local_rank}"'),
    ("train.py:41", "cuda-api"): ("warn", "torch.cuda.set_device(device)"),
    ("train.py:52", "cuda-manual-seed"): ("warn", "torch.cuda.manual_seed(1337 + seed_offset)"),
    ("train.py:53", "cuda-tf32"): ("warn", "torch.backends.cuda.matmul.allow_tf32 = True"),
    ("train.py:54", "cuda-tf32"): ("warn", "torch.backends.cudnn.allow_tf32 = True"),
    ("train.py:55", "cuda-autocast-device-type"): ("block", 'device_type = "cuda" if "cuda" in device else "cpu"'),
    ("train.py:66", "cuda-device-compare"): ("warn", 'if device_type == "cuda":'),
    ("train.py:75", "cuda-gradscaler"): ("block", "torch.cuda.amp.GradScaler("),
    ("train.py:78", "torch-compile"): ("info", "torch.compile(model)"),
    ("train.py:103", "cuda-api"): ("warn", "torch.cuda.synchronize()"),
    ("model.py:37", "cuda-device-compare"): ("warn", 'device_type == "cuda"'),
    ("model.py:42", "cuda-api"): ("warn", "torch.cuda.Event(enable_timing=True)"),
    ("model.py:43", "cuda-api"): ("warn", "torch.cuda.Event(enable_timing=True)"),
    ("model.py:47", "cuda-api"): ("warn", "torch.cuda.synchronize()"),
}


def _line(project: str, where: str) -> str:
    path, line = where.rsplit(":", 1)
    return (PROJECTS / project / path).read_text().splitlines()[int(line) - 1]


def test_the_gpt_trainer_finds_every_cuda_ism_at_its_line(scan_json):
    code, doc = scan_json(str(PROJECTS / "gpt-trainer"))
    assert code == 1  # three blocking findings
    assert by_rule(doc) == {k: sev for k, (sev, _) in GPT_TRAINER.items()}
    for (where, _), (_, text) in GPT_TRAINER.items():
        assert text in _line("gpt-trainer", where), where  # the fixture and the table agree
    assert not [f for f in doc["findings"] if f["path"] == "device_utils.py"]  # the NPU-aware helper: nothing


def test_every_finding_names_the_ascend_way_and_its_source(scan_json):
    _, doc = scan_json(str(PROJECTS / "gpt-trainer"))
    fixes = {f["rule"]: f["fix"] for f in doc["findings"]}
    assert "torch.npu.is_bf16_supported()" in fixes["cuda-bf16-check"]
    assert "torch.npu.amp.GradScaler" in fixes["cuda-gradscaler"]
    assert (
        "torch.npu.matmul.allow_hf32" in {f["fix"] for f in doc["findings"] if f["path"] == "train.py" and f["line"] == 53}.pop()
    )
    assert "hccl" in fixes["nccl-backend"] and "'npu'" in fixes["cuda-device-string"]
    assert "torch.npu.set_device" in {f["fix"] for f in doc["findings"] if f["line"] == 41}.pop()
    for f in doc["findings"]:
        assert f["kind"] == "code" and f["source"] and f["message"] and f["fix"], f
        assert f["confidence"] in ("stated", "derived", "inferred")
        assert "{" not in f["fix"], f  # every placeholder filled


def test_the_trainer_script_needs_nothing(scan_json, lock_aarch64):
    """A Transformers Trainer script chooses no device itself: no finding at all, exit 0; with the lock too."""
    code, doc = scan_json(str(PROJECTS / "hf-trainer"))
    assert code == 0 and doc["findings"] == []
    code, doc = scan_json(str(PROJECTS / "hf-trainer"), "--lock", str(lock_aarch64))
    assert code == 0, doc["findings"]
    assert not [f for f in doc["findings"] if f["severity"] == "block"]
    names = {d["name"]: d for d in doc["dependencies"]}
    assert {"datasets", "evaluate", "sentencepiece", "protobuf", "transformers", "accelerate", "torch"} <= set(names)
    assert names["transformers"]["locked"] == "5.10.1" and names["protobuf"]["locked"] == "3.20.0"


def _scan(tmp_path: Path, text: str, name: str = "t.py") -> dict[tuple[int | None, str], str]:
    (tmp_path / name).write_text(textwrap.dedent(text))
    findings = scan_file(name, (tmp_path / name).read_bytes(), load_table())
    return {(f.line, f.rule): f.severity for f in findings}


def test_a_device_chosen_on_cuda_availability_is_a_silent_cpu_fallback(tmp_path):
    got = _scan(
        tmp_path,
        """\
        import torch
        device = "cuda" if torch.cuda.is_available() else "cpu"
        dev = torch.device("cuda:0" if torch.cuda.is_available() else "cpu")
        if torch.cuda.is_available():
            model = model.cuda()
        use_cuda = torch.cuda.is_available()
        target = "cuda" if use_cuda else "cpu"
        assert torch.cuda.is_available()
        """,
    )
    assert got == {
        (2, "cuda-device-fallback"): "block",
        (3, "cuda-device-fallback"): "block",
        (4, "cuda-device-fallback"): "block",
        (5, "cuda-method"): "warn",
        (6, "cuda-availability-gate"): "warn",
        (7, "cuda-device-fallback"): "block",
        (8, "cuda-availability-gate"): "warn",
    }


def test_a_helper_that_also_checks_npu_is_fine(tmp_path):
    got = _scan(
        tmp_path,
        """\
        import torch
        from transformers.utils import is_torch_npu_available


        def get_device():
            if torch.cuda.is_available():
                return "cuda"
            elif is_torch_npu_available():
                return "npu"
            return "cpu"


        def device_type_of(device):
            return "npu" if "npu" in device else ("cuda" if "cuda" in device else "cpu")


        DEVICE = "npu" if torch.npu.is_available() else "cuda" if torch.cuda.is_available() else "cpu"
        """,
    )
    assert got == {}


def test_names_are_resolved_through_the_imports(tmp_path):
    got = _scan(
        tmp_path,
        """\
        import torch as th
        from torch import cuda
        from torch.cuda.amp import GradScaler, autocast
        from torch.nn import DataParallel

        th.cuda.empty_cache()
        cuda.synchronize()
        scaler = GradScaler()
        with autocast():
            pass
        net = DataParallel(net)
        cuda_stuff = my.cuda_stats()
        """,
    )
    assert got == {
        (6, "cuda-api"): "warn",
        (7, "cuda-api"): "warn",
        (8, "cuda-gradscaler"): "block",
        (9, "cuda-autocast"): "block",
        (11, "dataparallel"): "block",
    }


def test_transfer_to_npu_changes_the_severities(tmp_path):
    """With transfer_to_npu the mapped calls work (info), a silent fallback it rebinds is info, its own limits (jit)
    become warn, and a 'cuda' comparison stays a warn (it is not rewritten)."""
    got = _scan(
        tmp_path,
        """\
        import torch
        import torch_npu
        from torch_npu.contrib import transfer_to_npu

        device = "cuda" if torch.cuda.is_available() else "cpu"
        torch.cuda.synchronize()
        scaler = torch.cuda.amp.GradScaler()
        fn = torch.jit.script(fn)
        if device == "cuda":
            pass
        """,
    )
    # the whole file mentions npu, but each statement is its own scope: only the import lines do
    assert got == {
        (5, "cuda-device-fallback"): "info",
        (6, "cuda-api"): "info",
        (7, "cuda-gradscaler"): "warn",
        (8, "jit-script"): "warn",
        (9, "cuda-device-compare"): "warn",
    }
    without = _scan(tmp_path, "import torch\nfn = torch.jit.script(fn)\n", "plain.py")
    assert without == {(2, "jit-script"): "info"}


def test_the_remaining_code_rules(tmp_path):
    got = _scan(
        tmp_path,
        """\
        import os

        import amp_C
        import torch
        import torch.distributed as dist
        import torchvision
        from torch.utils import cpp_extension
        from transformers import AutoModel
        from transformers.utils import is_flash_attn_2_available

        os.environ["CUDA_VISIBLE_DEVICES"] = "0,1"
        ok = dist.is_nccl_available()
        x = x.contiguous(memory_format=torch.channels_last)
        with torch.backends.cuda.sdp_kernel(enable_flash=True):
            pass
        keep = torchvision.ops.nms(boxes, scores, 0.5)
        fast = is_flash_attn_2_available()
        m = AutoModel.from_pretrained("m", attn_implementation="flash_attention_2")
        with torch.autocast("cuda", dtype=torch.bfloat16):
            pass
        scaler = torch.amp.GradScaler()
        ext = cpp_extension.load_inline("k", cpp_sources="", cuda_sources="__global__ void k() {}")
        torch.cuda.nvtx.range_push("step")
        if x.is_cuda:
            pass
        """,
    )
    assert got == {
        (3, "apex-amp-c"): "block",
        (11, "cuda-env-var"): "warn",
        (12, "nccl-backend"): "warn",
        (13, "channels-last"): "info",
        (14, "cuda-backends-unsupported"): "warn",
        (16, "torchvision-ops-cpu"): "warn",
        (17, "feature-gate"): "info",
        (18, "flash-attention-2"): "info",
        (19, "cuda-autocast"): "block",
        (21, "amp-gradscaler-cuda"): "block",
        (22, "cpp-extension-load"): "block",
        (23, "cuda-api-unmapped"): "block",
        (24, "cuda-is-cuda"): "warn",
    }


@pytest.mark.parametrize(
    "text",
    [
        'x = "the cuda device"\nprint("running on cuda")\n',  # prose, not a device string
        '"""Uses cuda."""\n',  # a docstring
        "import torch\ndevice = torch.device('npu:0')\n",
        "import torch\ntorch.backends.cudnn.benchmark = True\ntorch.backends.cudnn.deterministic = True\n",  # ✔ on A2/A3
        "import torch\nx = torch.compile\n",  # a reference, not a compile
        "import torch\nmodel.to(device)\ntorch.manual_seed(0)\n",
        "inputs = tokenizer(text)  # a word that holds 'npu' is no npu scope\nconfig = {'device': 'npu', 'backend': 'hccl'}\n",
    ],
)
def test_no_false_positives(tmp_path, text):
    assert _scan(tmp_path, text) == {}


def test_a_guarded_import_is_optional_and_an_unguarded_one_blocks(tmp_path):
    got = _scan(
        tmp_path,
        """\
        try:
            import flash_attn
        except ImportError:
            flash_attn = None
        import xformers.ops
        """,
    )
    assert got == {(2, "import-no-ascend-build"): "info", (5, "import-no-ascend-build"): "block"}


def test_the_library_call(tmp_path):
    result = scan(ScanRequest(path=PROJECTS / "gpt-trainer"))
    assert result.blocked and result.python_files == 3 and result.counts()["block"] == 3
    assert [f.path for f in result.findings] == sorted(f.path for f in result.findings)
