"""Re-judged verdicts shipped beside the records, so a fresh clone validates without judging (issue 43).

`kb validate` judges every evidence record again with today's judge (kbtool.probe.judged); the local verdict cache
(kbtool.probe.verdict_cache) makes that cheap after the first run, but a fresh clone has no cache and paid ~20 s.
The seed (`<records>/.verdicts.json.gz`, written by `kb probe seed --write`) holds, per evidence record, the
verdicts today's judge gave with the digests of everything it read: the judge's own code (kbtool.probe.judge_code:
the probe module and what it imports, not every kbtool file), the claims and records it was handed, the files it
opened (paths relative to the checkout). An entry is used only when all of them still match, so an edit that
reaches a judge judges that probe's records again, and nothing else. An entry whose record kept its own verdicts
because a grid it names is gone (a later run replaced it and no copy was kept: kbtool.probe.recorded) says so
(`held`: "grid superseded, not re-judged"). CI runs `kb probe seed --check`: every entry is judged again from
scratch and must agree, and every judged record must have one.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

from kbtool.probe.judge_code import KBTOOL, JudgeCode

NAME = ".verdicts.json.gz"
VERSION = 1
CHECKOUT = KBTOOL.parent


def path_of(root: Path) -> Path:
    return root / NAME


def portable(path: str) -> str:
    """A file a judge read, relative to the checkout when it lies under it (the seed travels with the clone)."""
    p = Path(path)
    try:
        return p.resolve().relative_to(CHECKOUT).as_posix()
    except ValueError:
        return str(p)


def local(path: str) -> str:
    return str(CHECKOUT / path) if not Path(path).is_absolute() else path


class Seed:
    """The shipped entries by evidence digest, read once, lazily."""

    def __init__(self, root: Path | None, code: JudgeCode | None = None) -> None:
        self.path = path_of(root) if root is not None else None
        self._entries: dict[str, Any] | None = None
        self._code = code
        self.hits = 0

    @property
    def code(self) -> JudgeCode:
        if self._code is None:
            self._code = JudgeCode()
        return self._code

    def entries(self) -> dict[str, Any]:
        if self._entries is None:
            self._entries = {}
            if self.path is not None and self.path.is_file() and self.path.stat().st_size < 64 << 20:
                try:
                    data = json.loads(gzip.decompress(self.path.read_bytes()))
                    if isinstance(data, dict) and data.get("version") == VERSION:
                        self._entries = dict(data.get("entries") or {})
                except (OSError, ValueError, EOFError):
                    self._entries = {}
        return self._entries

    def get(self, key: str, probe_id: str, inputs: Any) -> list[dict[str, Any]] | None:
        """The shipped verdicts of the evidence whose digest is `key`, when its judge's code and everything the
        judge read are unchanged; None otherwise."""
        from kbtool.probe.verdict_cache import file_digest

        entry = self.entries().get(key)
        if not isinstance(entry, dict) or self.path is None:
            return None
        try:
            reads, verdicts = entry["reads"], entry["verdicts"]
            fresh = (entry["code"] == self.code.digest(probe_id)
                     and reads["claims_digest"] == inputs.contexts(reads["claims"])
                     and reads["subjects_digest"] == inputs.subjects(reads["subjects"])
                     and reads["kinds_digest"] == inputs.kinds(reads["kinds"])
                     and all(file_digest(local(f)) == d for f, d in reads["files"].items()))
        except (KeyError, TypeError, AttributeError):
            return None
        if not fresh or not isinstance(verdicts, list):
            return None
        self.hits += 1
        return verdicts

    def reads(self, key: str) -> dict[str, list[str]]:
        """What the judge read for the entry `key` (a fresh one: `get` answered it), as VerdictCache.put takes it:
        so a record answered from the seed is answered from the local cache next time, without the seed."""
        r = self.entries()[key]["reads"]
        return {"claims": list(r["claims"]), "subjects": list(r["subjects"]), "kinds": list(r["kinds"]),
                "files": [local(f) for f in r["files"]]}


def entry(ev_id: str, code: str, reads: dict[str, Any], verdicts: list[dict[str, Any]],
          held: str | None = None) -> dict[str, Any]:
    """A seed entry; `held`: why the record kept its own verdicts (kbtool.probe.rejudge.rejudged), when it did."""
    files = {portable(f): d for f, d in reads["files"].items()}
    out = {"evidence": ev_id, "code": code, "reads": {**reads, "files": files}, "verdicts": verdicts}
    if held:
        out["held"] = held
    return out


def held(entries: dict[str, Any]) -> dict[str, str]:
    """evidence id -> why it was not judged again ("grid superseded, not re-judged"), of the entries that say so."""
    return {str(e["evidence"]): str(e["held"]) for e in entries.values() if isinstance(e, dict) and e.get("held")}


def dump(entries: dict[str, Any]) -> bytes:
    """The seed file's bytes: stable for the same entries (sorted keys, no gzip timestamp)."""
    body = json.dumps({"version": VERSION, "entries": entries}, sort_keys=True, separators=(",", ":"))
    return gzip.compress(body.encode("utf-8"), mtime=0)


def build(kb: Any) -> dict[str, Any]:
    """Every evidence record of `kb` judged again from scratch (no cache, no seed), as seed entries."""
    from kbtool.model import Claim, Evidence
    from kbtool.probe.rejudge import probes_by_id, reads, rejudged
    from kbtool.probe.verdict_cache import Inputs, evidence_key, file_digest

    probes = probes_by_id()
    claims = {c.id: c for c in kb if isinstance(c, Claim)}
    inputs, code = Inputs(kb), JudgeCode()
    out: dict[str, Any] = {}
    for ev in sorted((r for r in kb if isinstance(r, Evidence)), key=lambda r: r.id):
        probe, digest = probes.get(ev.probe.id), code.digest(ev.probe.id)
        if probe is None or digest is None:
            continue  # not judged again: its own verdicts stand, no seed needed
        again, why = rejudged(ev, claims, probes)
        verdicts = [v.model_dump(mode="json") for v in again.verdicts]
        deps = reads(ev, probe)
        got = {"claims": deps["claims"], "claims_digest": inputs.contexts(deps["claims"]),
               "subjects": deps["subjects"], "subjects_digest": inputs.subjects(deps["subjects"]),
               "kinds": deps["kinds"], "kinds_digest": inputs.kinds(deps["kinds"]),
               "files": {f: file_digest(f) for f in deps["files"]}}
        out[evidence_key(ev)] = entry(ev.id, digest, got, verdicts, why)
    return out


def stale(root: Path, entries: dict[str, Any]) -> list[str]:
    """The evidence ids whose shipped entry is missing or differs from `entries` (a fresh judging)."""
    have = Seed(root).entries()
    ids = [e["evidence"] for k, e in entries.items() if have.get(k) != e]
    ids += [e.get("evidence", k) for k, e in have.items() if k not in entries]
    return sorted(set(map(str, ids)))
