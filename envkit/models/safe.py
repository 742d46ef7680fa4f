"""Constrained strings for untrusted files (a lock, a bundle manifest): the gate's first line.

Every value that a job later pastes into a Dockerfile, a shell script, a requirements file, Ansible variables or
a path is held to a grammar here, so that a lock edited by someone else cannot carry a newline, a quote, a
`$(...)`, a Jinja `{{ }}`, a `/` in a file name or a scheme we do not fetch. The grammars are deliberately
narrow: they accept every value the matrix and the package indexes produce, and nothing that needs quoting.
"""

from typing import Annotated

from pydantic import AfterValidator, Field

from envkit.models.rules import no_template

# a file name: no directory part, no `..`, no control characters, no shell or Jinja metacharacters
PLAIN_NAME = r"^[A-Za-z0-9][A-Za-z0-9._+~-]{0,254}$"
PlainName = Annotated[str, Field(pattern=PLAIN_NAME, max_length=255)]
# a glob over plain names (installer patterns: `Ascend-cann-toolkit_*_linux-aarch64.run`)
NameGlob = Annotated[str, Field(pattern=r"^[A-Za-z0-9*?][A-Za-z0-9._+~*?-]{0,254}$", max_length=255)]
# a version as Ascend and PEP 440 spell them: 8.0.RC1, 24.1.rc2.2, 9.0.0-beta.2, 2.6.0+cpu, 7.5.0.1.129, 2.1.0.post10
Version = Annotated[str, Field(pattern=r"^[0-9][0-9A-Za-z.+_-]{0,63}$", max_length=64)]
# an id of the matrix (chip, arch, OS): 910b, aarch64, ubuntu22.04, openeuler24.03
Ident = Annotated[str, Field(pattern=r"^[a-z0-9][a-z0-9._-]{0,31}$", max_length=32)]
PythonMinor = Annotated[str, Field(pattern=r"^3\.[0-9]{1,2}$")]
# a normalized Python project name (PEP 503)
ProjectName = Annotated[str, Field(pattern=r"^[a-z0-9](?:[a-z0-9-]{0,98}[a-z0-9])?$", max_length=100)]
# a pip name as the lock writes it (torch_npu, torch-npu)
PipName = Annotated[str, Field(pattern=r"^[A-Za-z0-9](?:[A-Za-z0-9._-]{0,98}[A-Za-z0-9])?$", max_length=100)]
# a requirement string: name, optional extras, one or more version clauses, optional simple marker; spaces only
# between them (`\s` would take a newline, and a root is written one per line into the resolver's input). Written for
# JSON Schema validators too (ECMA-262, backtracking): `"` unescaped (ECMA refuses `\"`), and each run of spaces can be
# matched one way only (`,? *` after ` *` split the spaces two ways per clause: exponential time on a string that
# fails). The same strings as ` *,? *` and `; *[...]+` (tests/core/test_schemas.py).
Requirement = Annotated[
    str,
    Field(
        pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*(\[[A-Za-z0-9._,-]+\])? *((==|>=|<=|~=|!=|<|>) *[0-9A-Za-z.*+!_-]+ *(, *)?)*"
        r"""(;[A-Za-z0-9_. <>=!'"-]+)?$""",
        max_length=300,
    ),
]
# an installer flag: `--quiet`, `--install-path=/usr/local/Ascend`
Flag = Annotated[str, Field(pattern=r"^--?[A-Za-z][A-Za-z0-9-]{0,63}(=[A-Za-z0-9_./:,+-]{1,200})?$")]
Sha256 = Annotated[str, Field(pattern=r"^[0-9a-f]{64}$")]
# where files come from: https, or http / file for a mirror (the fetcher decides what it accepts)
Url = Annotated[str, Field(pattern=r"^(https?|file)://[A-Za-z0-9._~:/?#\[\]@!&'()*+,;=%-]{1,2000}$", max_length=2048)]
# an absolute POSIX path without `..`, spaces or metacharacters (the CANN home, set_env.sh)
AbsPath = Annotated[str, Field(pattern=r"^(/[A-Za-z0-9_+-][A-Za-z0-9._+-]*)+/?$", max_length=1024)]
# a Kubernetes label value (node labels, `ring-controller.atlas`): at most 63, alphanumerics at both ends
LABEL_VALUE = r"^[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$"
LabelValue = Annotated[str, Field(pattern=LABEL_VALUE, max_length=63)]
# NPUs one pod requests on one node, and the same count as a mapping key (a string: JSON keeps keys as strings)
NpuCount = Annotated[int, Field(ge=1, le=64)]
NpuCountKey = Annotated[str, Field(pattern=r"^[1-9][0-9]?$")]
EnvKey = Annotated[str, Field(pattern=r"^[A-Z_][A-Z0-9_]{0,127}$")]
# an environment value: paths and path lists, with ${VAR} references to other variables, nothing else
EnvValue = Annotated[str, Field(pattern=r"^[A-Za-z0-9_./:,+=@${}-]{0,4096}$")]


# one line of printable text (sources, notes, the command that made a lock): no control characters, no Jinja
# (envkit.models.rules.no_template: a plain function, so that the lock's plain reader calls the same rule)
Text = Annotated[str, Field(pattern=r"^[^\x00-\x1f\x7f]{0,4000}$", max_length=4000), AfterValidator(no_template)]
# a size in bytes: at most 64 GiB (a wheel or an installer larger than that is not ours)
MAX_FILE_SIZE = 64 << 30
Size = Annotated[int, Field(ge=0, le=MAX_FILE_SIZE)]
