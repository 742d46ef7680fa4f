"""`envkit image run-args` whole: every format's exact text for a chip with the driver's parts mounted (910B) and
one with the whole driver folder (950), the chip's facts from its row and from a lock, and the --devices messages.
Written for the survivors of the first mutation run of export/runargs.py (`make mutation MODULES=runargs`): the
older tests checked one line of each format."""

from __future__ import annotations

import json

import pytest
import yaml

from envkit.core.matrix import load_matrix
from envkit.errors import BadInput
from envkit.export.container import ChipDevices, chip_from_lock, chip_from_row, parse_devices
from envkit.export.runargs import run_args

D = "/usr/local/Ascend/driver"
NAME_950 = "Ascend 950 (950PR / 950DT; Atlas 950 SuperPoD, Atlas 850, Atlas 350)"

COMPOSE_910B = f"""\
# envkit image run-args --chip 910b --format compose
services:
  app:
    devices:
      - /dev/davinci2:/dev/davinci2
      - /dev/davinci_manager:/dev/davinci_manager
      - /dev/devmm_svm:/dev/devmm_svm
      - /dev/hisi_hdc:/dev/hisi_hdc
    volumes:
      - /etc/ascend_install.info:/etc/ascend_install.info:ro
      - {D}/lib64:{D}/lib64:ro
      - {D}/tools/hccn_tool:{D}/tools/hccn_tool:ro
      - {D}/version.info:{D}/version.info:ro
      - /usr/local/bin/npu-smi:/usr/local/bin/npu-smi:ro
      - /usr/local/dcmi:/usr/local/dcmi:ro
# With the Ascend Docker Runtime instead of the lists above:
#   runtime: ascend
#   environment:
#     - ASCEND_VISIBLE_DEVICES=2
"""

FLAGS_950 = f"""\
--device /dev/davinci0 \\
  --device /dev/davinci1 \\
  --device /dev/davinci3 \\
  --device /dev/davinci_manager \\
  --device /dev/devmm_svm \\
  --device /dev/hisi_hdc \\
  -v /etc/ascend_install.info:/etc/ascend_install.info:ro \\
  -v {D}:{D}:ro \\
  -v /usr/local/bin/npu-smi:/usr/local/bin/npu-smi:ro \\
  -v /usr/local/dcmi:/usr/local/dcmi:ro
# or, with the Ascend Docker Runtime: --runtime ascend -e ASCEND_VISIBLE_DEVICES=0-1,3
# {NAME_950} needs the whole driver directory ({D}) mounted
# with the Ascend Docker Runtime, also mount {D} (-v {D}:{D}:ro)
"""

MOUNTS_950 = [("/etc/ascend_install.info", "ro"), (D, "ro"), ("/usr/local/bin/npu-smi", "ro"), ("/usr/local/dcmi", "ro")]
DEVICES_950 = ["/dev/davinci0", "/dev/davinci1", "/dev/davinci3", "/dev/davinci_manager", "/dev/devmm_svm", "/dev/hisi_hdc"]


def _cli(run_cli, *args: str) -> str:
    r = run_cli("image", "run-args", *args)
    assert r.code == 0, r.err
    return r.out


def test_compose_of_910b_is_exact_and_the_compose_file_compose_reads(run_cli):
    out = _cli(run_cli, "--chip", "910b", "--devices", "2", "--format", "compose")
    assert out == COMPOSE_910B
    app = yaml.safe_load(out)["services"]["app"]  # the runtime alternative stays a comment
    assert set(app) == {"devices", "volumes"}
    assert app["devices"][0] == "/dev/davinci2:/dev/davinci2" and len(app["volumes"]) == 6


def test_flags_of_950_are_exact(run_cli):
    assert _cli(run_cli, "--chip", "950", "--devices", "0-1,3", "--format", "flags") == FLAGS_950


def test_json_of_950_is_exact(run_cli):
    got = json.loads(_cli(run_cli, "--chip", "950", "--devices", "0-1,3", "--format", "json"))
    flags = [x for d in DEVICES_950 for x in ("--device", d)] + [x for m, mode in MOUNTS_950 for x in ("-v", f"{m}:{m}:{mode}")]
    assert got == {
        "chip": "950",
        "devices": DEVICES_950,
        "mounts": [{"source": m, "target": m, "mode": mode} for m, mode in MOUNTS_950],
        "flags": flags,
        "ascend_docker_runtime": {
            "runtime": "ascend",
            "env": {"ASCEND_VISIBLE_DEVICES": "0-1,3"},
            "flags": ["--runtime", "ascend", "-e", "ASCEND_VISIBLE_DEVICES=0-1,3"],
        },
        "notes": [
            f"{NAME_950} needs the whole driver directory ({D}) mounted",
            f"with the Ascend Docker Runtime, also mount {D} (-v {D}:{D}:ro)",
        ],
    }


def test_without_devices_a_910b_host_gets_its_eight_and_no_notes():
    ra = run_args(ChipDevices("910b", "Ascend 910B", 8, False), None)
    assert ra.devices[:8] == [f"/dev/davinci{i}" for i in range(8)] and len(ra.devices) == 11
    assert ra.runtime_env == {"ASCEND_VISIBLE_DEVICES": "0-7"} and ra.notes == []
    assert ra.mounts[0] == ("/etc/ascend_install.info", "/etc/ascend_install.info", "ro")
    assert ra.mounts[-1] == ("/usr/local/dcmi", "/usr/local/dcmi", "ro")  # sorted by the container path


def test_a_chip_of_unknown_count_without_devices_is_refused_naming_the_way():
    with pytest.raises(BadInput) as exc:
        run_args(ChipDevices("310p", "Atlas 300I Duo", None, False), None)
    assert exc.value.message == "the number of /dev/davinciN on a Atlas 300I Duo host depends on the cards installed"
    assert exc.value.hint == "Pass --devices, e.g. --devices 0-3 (see `ls /dev/davinci*` on the host)."


def test_an_id_past_the_hosts_devices_names_the_range():
    with pytest.raises(BadInput) as exc:
        run_args(ChipDevices("910b", "Ascend 910B", 8, False), "6-8")
    assert exc.value.message == "--devices 6-8: a Ascend 910B host has /dev/davinci0..7"
    assert run_args(ChipDevices("910b", "Ascend 910B", 8, False), "7").runtime_env == {"ASCEND_VISIBLE_DEVICES": "7"}


def test_the_devices_text_is_shown_whole_up_to_60_characters_then_cut():
    sixty = "0," * 29 + "x-"  # 60 characters, the last part bad
    with pytest.raises(BadInput) as exc:
        parse_devices(sixty)
    assert exc.value.message == f"--devices {sixty!r}: expected ids and ranges like 0-3,7"
    with pytest.raises(BadInput) as exc:
        parse_devices(sixty + "1")
    assert exc.value.message == f"--devices {sixty + '...'!r}: expected ids and ranges like 0-3,7"
    with pytest.raises(BadInput) as exc:
        parse_devices("3-1")
    assert exc.value.message == "--devices '3-1': range 3-1 goes backwards"
    with pytest.raises(BadInput) as exc:
        parse_devices("65")
    assert exc.value.message == "--devices '65': device ids are 0 to 64 (/dev/davinciN)"
    assert parse_devices(" 1 , 0-1 ") == [0, 1]  # spaces around a part, duplicates once


def test_the_chip_facts_from_its_row_and_from_a_lock(run_cli, tmp_path):
    row = load_matrix().chips["950"]
    assert chip_from_row(row) == ChipDevices("950", NAME_950, 8, True)
    from envkit.lock.file import read_lock

    path = tmp_path / "a3.lock"
    assert run_cli("resolve", "--chip", "a3", "-o", str(path)).code == 0
    assert chip_from_lock(read_lock(path)) == ChipDevices("a3", "a3", 16, False)


def test_the_container_facts_of_a_lock_whole(run_cli, tmp_path):
    """Every field of `ContainerFacts`, for the base and serving variants, with and without the devices (the image
    plan takes the image's facts alone: it runs on no host)."""
    from envkit.export.container import NPU_SERVING_ENV, atb_abi, container_facts, default_tag, device_facts, image_env
    from envkit.lock.file import read_lock

    path = tmp_path / "a3.lock"
    assert run_cli("resolve", "--chip", "a3", "-o", str(path)).code == 0
    lock = read_lock(path)
    dev = device_facts(chip_from_lock(lock), "2-3")
    image = {
        "chip": "a3",
        "environment": tuple(image_env(lock)),
        "device_plugin_resource": lock.platform.device_plugin_resource,
        "atb_cxx_abi": atb_abi(lock),
    }
    assert lock.platform.device_plugin_resource and image["environment"]
    on_host = {"devices": dev.devices, "mounts": dev.mounts, "visible_devices": "2-3", "device_count": 2, "notes": dev.notes}
    assert vars(container_facts(lock, "2-3")) == {
        **image,
        **on_host,
        "image_tag": default_tag(lock),
        "serving_env": (),
    }
    assert vars(container_facts(lock, "2-3", "serving")) == {
        **image,
        **on_host,
        "image_tag": default_tag(lock, "serving"),
        "serving_env": tuple(sorted(NPU_SERVING_ENV.items())),
    }
    assert vars(container_facts(lock, variant="serving", with_devices=False)) == {
        **image,
        "devices": (),
        "mounts": (),
        "visible_devices": "",
        "device_count": 0,
        "notes": (),
        "image_tag": default_tag(lock, "serving"),
        "serving_env": tuple(sorted(NPU_SERVING_ENV.items())),
    }
    assert default_tag(lock, "serving") == default_tag(lock) + "-serving"


def test_the_container_facts_carry_the_device_notes(run_cli, tmp_path):
    from envkit.export.container import container_facts
    from envkit.lock.file import read_lock

    path = tmp_path / "950.lock"
    assert run_cli("resolve", "--chip", "950", "-o", str(path)).code == 0
    facts = container_facts(read_lock(path), "0")
    assert facts.notes and facts.notes[0].endswith("needs the whole driver directory (/usr/local/Ascend/driver) mounted")
