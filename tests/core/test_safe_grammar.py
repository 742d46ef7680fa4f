"""envkit/models/safe.py, the lock gate's grammars, on both sides of every length and at each character class edge.

mutmut cannot mutate inside a regular expression, so these boundaries are held here: for each grammar, the
longest value it takes and one character more, the first and last characters it allows, and the hostile values
it exists to refuse (`..` in a path, a newline, `$(...)`, a Jinja marker, a `/` in a file name, an option)."""

from __future__ import annotations

import pytest
from pydantic import TypeAdapter, ValidationError

from envkit.models import safe

CASES = {
    "PlainName": (safe.PlainName, ["a", "a" * 255, "Z9._+~-x", "0.tar.gz"], ["", "a" * 256, ".a", "-a", "a/b", "a b", "a\nb", "a$b", "..", "a{{b"]),
    "NameGlob": (safe.NameGlob, ["*", "?", "a*" * 127 + "a", "Ascend-cann-toolkit_*_linux-aarch64.run"], ["", "a" * 256, "/x*", ".*", "a[b]", "a/b"]),
    "Version": (safe.Version, ["0", "1" * 64, "8.0.RC1", "2.6.0+cpu", "9.0.0-beta.2", "1_2"], ["", "1" * 65, "v1", ".1", "1 2", "1;x", "1/2", "1!0"]),
    "Ident": (safe.Ident, ["a", "a" * 32, "ubuntu22.04", "0-x_y"], ["", "a" * 33, "A", "-a", ".a", "a b", "a/b"]),
    "PythonMinor": (safe.PythonMinor, ["3.9", "3.10", "3.99"], ["3", "3.", "3.100", "2.7", "3.1a", " 3.10"]),
    "ProjectName": (safe.ProjectName, ["a", "a" * 100, "torch-npu", "a1"], ["", "a" * 101, "Torch", "torch_npu", "-a", "a-", "a.b"]),
    "PipName": (safe.PipName, ["a", "a" * 100, "torch_npu", "Torch.NPU-x"], ["", "a" * 101, "_a", "a_", "a b", "a==1"]),
    "Requirement": (safe.Requirement, ["six", "six==1.17.0", "torch>=2.1,<2.2", "a[x,y] ~= 1.0 ; python_version >= '3.8'", "a" * 300],
                    ["", "a" * 301, "six==1\n", "six==1;\n-e .", "six==1\t", "six @ https://x", "-e .", "six==$(id)", "six; os.system('x')"]),
    "Flag": (safe.Flag, ["-q", "--quiet", "--install-path=/usr/local/Ascend", "--a" + "b" * 63, "--x=" + "y" * 200],
             ["quiet", "--", "--1x", "--a" + "b" * 64, "--x=" + "y" * 201, "--x=", "--x=a b", "--x=$(id)", "--x=a;b"]),
    "Sha256": (safe.Sha256, ["0" * 64, "f" * 64], ["0" * 63, "0" * 65, "F" * 64, "g" * 64]),
    "Url": (safe.Url, ["https://a", "http://m/x", "file:///srv/m/x.whl", "https://" + "a" * 2000],
            ["ftp://a", "https://", "https://a b", "https://x/\n", "https://x/`id`", "https://x/\"", "https://" + "a" * 2001, "javascript:x"]),
    "AbsPath": (safe.AbsPath, ["/a", "/usr/local/Ascend/", "/a.b/c+d_e-f", "/" + "a" * 1023],
                ["", "/", "a", "//", "/..", "/a/../b", "/a/.b", "/a b", "/a$b", "/" + "a" * 1024, "/a\n"]),
    "EnvKey": (safe.EnvKey, ["A", "_", "A" * 128, "LD_LIBRARY_PATH"], ["", "a", "1A", "A" * 129, "A-B", "A B"]),
    "EnvValue": (safe.EnvValue, ["", "/usr/lib:${LD_LIBRARY_PATH}", "a" * 4096, "x=y@z,w+v"], ["a" * 4097, "a b", "$(id)", "a;b", "a\nb", "`id`", "'"]),
    "Text": (safe.Text, ["", "any text, with ünïcode and $(x)", "a" * 4000], ["a" * 4001, "a\nb", "a\x7f", "{{ x }}", "{% if %}", "{# c #}"]),
}  # fmt: skip


@pytest.mark.parametrize("name", sorted(CASES))
def test_each_grammar_on_both_sides_of_its_edges(name):
    kind, good, bad = CASES[name]
    adapter = TypeAdapter(kind)
    for value in good:
        assert adapter.validate_python(value) == value, (name, value)
    for value in bad:
        with pytest.raises(ValidationError):
            adapter.validate_python(value)
            pytest.fail(f"{name} took {value[:40]!r}")


def test_sizes_on_both_sides_of_64_gib():
    adapter = TypeAdapter(safe.Size)
    assert adapter.validate_python(0) == 0 and adapter.validate_python(64 << 30) == 64 << 30
    for bad in (-1, (64 << 30) + 1):
        with pytest.raises(ValidationError):
            adapter.validate_python(bad)
