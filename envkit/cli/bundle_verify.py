"""`envkit bundle verify`: the command's body, without typer, so that `main()` can run an ordinary call on an
argparse start-up path (as `resolve` and `validate` do): verify is often timed against `sha256sum`, and typer's
import would be a third of its run. Help and unusual input go to typer (envkit.cli.bundle)."""

from pathlib import Path
from typing import Optional

from envkit import console
from envkit.errors import EXIT_FAILED


def verify(bundle: Path, expect_digest: Optional[str], json_out: bool) -> int:
    """Check every file against the manifest; refuse unsafe archives without extracting anything."""
    from envkit import airgap

    rep = airgap.verify(bundle, expect_digest)
    if json_out:
        console.emit_json(rep.to_dict())
        return 0 if rep.ok else EXIT_FAILED
    out = console.out
    if rep.ok:
        out.print(
            f"bundle {bundle}: OK, {rep.files} files, {rep.bytes / 1e6:.1f} MB match the manifest (sha256:{rep.digest})",
            markup=False,
        )
        return 0
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


def fast_main(args: list[str]) -> Optional[int]:
    """`verify BUNDLE [--expect-digest D] [--json]` with argparse; None when typer should handle argv."""
    import argparse

    if not args or any(a in ("--help", "-h") or a.startswith("--help") for a in args):
        return None
    parser = argparse.ArgumentParser(add_help=False, allow_abbrev=False, exit_on_error=False)
    parser.add_argument("bundle", type=Path)
    parser.add_argument("--expect-digest", dest="expect_digest")
    parser.add_argument("--json", dest="json_out", action="store_true")
    try:
        ns, extra = parser.parse_known_args(args)
    except (argparse.ArgumentError, SystemExit):
        return None
    if extra:
        return None
    return verify(ns.bundle, ns.expect_digest, ns.json_out)
