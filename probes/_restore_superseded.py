"""Restore the recorded grids later runs replaced, from git history, as the copies kbtool.probe.recorded reads.

Before the probe kept a replaced grid by its digest (kbtool.probe.recorded.keep_superseded), a release probed again
wrote its new grid over the old one, and the older evidence record named a file that no longer held what its run
wrote. For every case of an evidence record of the given probes whose `raw` file does not hold its `sha256`, this
looks through the file's history in this checkout for the version whose sha256 is the recorded one and writes it
to `<folder>/superseded/<sha256>-<name>`. Only bytes whose digest is the one the record names are written: the
copy is the run's own output, byte for byte; nothing is written for a digest the history does not hold.

    python probes/_restore_superseded.py [--dry-run] [PROBE_ID ...]   # default: vllm-selector vllm-rocm-selector
"""

from __future__ import annotations

import hashlib
import subprocess
import sys
from pathlib import Path

import yaml

from kbtool.probe.recorded import GridSuperseded, kept_copy, verified

ROOT = Path(__file__).resolve().parents[1]
DEFAULT = ("vllm-selector", "vllm-rocm-selector")


def wanted(probes: tuple[str, ...]) -> dict[tuple[str, str], list[str]]:
    """(raw path, sha256) -> the evidence ids whose case names it and that cannot read it now."""
    out: dict[tuple[str, str], list[str]] = {}
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    for f in sorted((ROOT / "records" / "evidence").glob("*.yaml")):
        rec = yaml.load(f.read_text(encoding="utf-8"), Loader=loader)
        if not isinstance(rec, dict) or (rec.get("probe") or {}).get("id") not in probes:
            continue
        for case in rec.get("cases") or []:
            m = case.get("metrics") or {}
            raw, sha = m.get("raw"), m.get("sha256")
            if not raw or not sha or Path(raw).is_absolute():
                continue
            try:
                verified(ROOT / raw, sha)
            except GridSuperseded:
                out.setdefault((str(raw), str(sha)), []).append(str(rec["id"]))
    return out


def from_history(raw: str, sha: str) -> bytes | None:
    """The version of `raw` in this checkout's history whose sha256 is `sha`."""
    commits = subprocess.run(["git", "-C", str(ROOT), "log", "--all", "--format=%H", "--", raw],
                             capture_output=True, text=True, check=True).stdout.split()
    for c in commits:
        got = subprocess.run(["git", "-C", str(ROOT), "show", f"{c}:{raw}"], capture_output=True, check=False)
        if got.returncode == 0 and hashlib.sha256(got.stdout).hexdigest() == sha:
            return got.stdout
    return None


def main(argv: list[str]) -> int:
    dry = "--dry-run" in argv
    probes = tuple(a for a in argv if not a.startswith("--")) or DEFAULT
    missing = 0
    for (raw, sha), ids in sorted(wanted(probes).items()):
        data = from_history(raw, sha)
        dest = kept_copy(ROOT / raw, sha)
        if data is None:
            missing += 1
            print(f"not in history: {raw} sha256 {sha[:12]} ({', '.join(ids)})")
            continue
        print(f"{'would write' if dry else 'wrote'} {dest.relative_to(ROOT)} ({len(data)} bytes; {', '.join(ids)})")
        if not dry:
            dest.parent.mkdir(parents=True, exist_ok=True)
            dest.write_bytes(data)
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
