"""Build small records trees for topic tests."""

from __future__ import annotations

from pathlib import Path

import yaml

from kbtool.kb import KB
from kbtool.store.records import load_tree

SEED = {"type": "seed", "seed": "001_cecac612a9e92bba.txt"}


def claim(cid: str, status: str = "unverified", evidence: list[str] | None = None) -> dict[str, object]:
    ver: dict[str, object] = {"status": status}
    if evidence:
        ver["evidence"] = evidence
    return {"id": cid, "kind": "claim", "name": f"claim {cid}", "subject": "flash-attention-3",
            "statement": f"statement of {cid}", "effect": "reject",
            "reason": {"code": "TEST", "message": "test"}, "sources": [SEED], "verification": ver}


def topic(tid: str = "t", **fields: object) -> dict[str, object]:
    return {"id": tid, "kind": "topic", "name": f"topic {tid}", "sources": [SEED], **fields}


def tree(tmp: Path, *records: dict[str, object]) -> Path:
    folders = {"claim": "claims", "topic": "topics", "accelerator": "accelerators",
               "hardware-parameter": "hardware-parameters"}
    root = tmp / "records"
    for r in records:
        d = root / folders[str(r["kind"])]
        d.mkdir(parents=True, exist_ok=True)
        (d / f"{r['id']}.yaml").write_text(yaml.safe_dump(r, sort_keys=False, width=100))
    root.mkdir(exist_ok=True)
    return root


def load(root: Path) -> KB:
    return KB.from_load(load_tree(root))
