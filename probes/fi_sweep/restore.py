"""Rebuild FlashInfer release trees from a de-duplicated bundle (probes/fi_sweep/pack.py).

    python3 probes/fi_sweep/restore.py BUNDLE_DIR DEST [RELEASE ...]

BUNDLE_DIR holds manifest.json ({release: [[path, sha1, mode], ...]}) and one file per sha1; each release becomes
DEST/RELEASE, a site folder to put first on PYTHONPATH. Files are hard-linked where the filesystem allows."""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path


def main() -> int:
    bundle, dest, *wanted = sys.argv[1:]
    manifest = json.loads((Path(bundle) / "manifest.json").read_text())
    for release in wanted or sorted(manifest):
        root = Path(dest) / release
        for rel, sha, mode in manifest[release]:
            target = root / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            try:
                os.link(Path(bundle) / sha, target)
            except OSError:
                shutil.copyfile(Path(bundle) / sha, target)
            os.chmod(target, mode | 0o400)
        print(f"{release}: {len(manifest[release])} files in {root}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
