"""`envkit bundle verify`: the command's body, without typer, so that `main()` can run an ordinary call on the
generated start-up path (`envkit.cli.fast`, as `resolve` and `validate` do): verify is often timed against
`sha256sum`, and typer's import would be a third of its run. The command itself is defined once, in
envkit.cli.bundle; help and unusual input go to typer."""

from pathlib import Path
from typing import Optional

from envkit import console
from envkit.errors import EXIT_FAILED


def verify(*, bundle: Path, expect_digest: Optional[str], json_out: bool) -> int:
    """Check every file against the manifest; refuse unsafe archives without extracting anything."""
    from envkit.jobs import bundle as airgap

    rep = airgap.verify(bundle, expect_digest)
    if json_out:
        console.emit_json(rep.to_dict())
        return 0 if rep.ok else EXIT_FAILED
    if rep.ok:
        line = f"bundle {bundle}: OK, {rep.files} files, {rep.bytes / 1e6:.1f} MB match the manifest (sha256:{rep.digest})"
        if not console.print_plain([line]):  # rich only where it would print it otherwise
            console.out.print(line, markup=False)
        return 0
    out = console.out
    out.print(f"bundle {bundle}: FAILED", markup=False)
    for p in rep.missing:
        out.print(f"  missing:  {p}", markup=False)
    for m in rep.modified:
        out.print(
            f"  modified: {m['path']}: expected sha256 {m['expected_sha256']} ({m['expected_size']} bytes), "
            f"got {m['actual_sha256']} ({m['actual_size']} bytes)",
            markup=False,
        )
    for p in rep.extra:
        out.print(f"  extra:    {p} (not in the manifest)", markup=False)
    return EXIT_FAILED
