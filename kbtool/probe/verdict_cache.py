"""Re-judged verdicts, cached by content: an evidence record judged again is judged once per distinct input.

`kb validate` judges every evidence record again with today's probe and today's claims (kbtool.probe.rejudge).
The answer depends only on inputs, so it is stored under a key made of them, as mypy's incremental cache does:

- the code: a digest of the sources of kbtool/ and of the files of probes/ (any edit there judges everything again);
- the evidence record's content less its id (its JSON, not its file bytes: `kb fmt` does not invalidate; the
  verdicts do not depend on the id, so two records of the same run share an entry);
- what the judge read (kbtool.probe.rejudge.reads): of each claim the probe lists, what a judge is handed of it
  (subject, effect, conditions, reason code: editing a claim's name, notes or sources judges nothing again); and
  what the probe module's `judge_inputs(observations)` says its judge reads itself: every claim of some subjects
  (their gates: JUDGED_FIELDS), every record of some kinds (the vLLM selector reads the engine-backend records)
  and files (the recorded vLLM grids), each by a digest of its content.

An entry lives at `<cache dir>/verdicts/<code digest>/<evidence digest>.json` (kbtool.store.cache.cache_dir; off
with KB_NO_CACHE=1 or KB_CACHE_DIR set empty) and holds the digests of what it read beside the verdicts; it is
used only when every one of them still matches. The file is sealed (kbtool.store.cache.seal: kb's version and a
digest keyed by the cache folder's secret) and read through kbtool.store.untrusted.read_cache. A missing, stale,
unreadable, edited or foreign entry is judged again,
so the folder is safe to delete at any time; folders of other code digests are removed when a new one is made.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from kbtool.model import Claim, Evidence, Record
from kbtool.probe.judges import PROBES
from kbtool.store.cache import cache_dir, make_room, seal, unseal
from kbtool.store.untrusted import LIMITS, UntrustedInputError, read_bytes, read_cache

VERSION = 1
MAGIC = b"kb-verdicts"  # the seal's purpose (kbtool.store.cache.seal)
_PKG = Path(__file__).resolve().parents[1]


def _sources(top: Path, pattern: str) -> Iterable[tuple[str, bytes]]:
    for p in sorted(top.rglob(pattern)):
        if "__pycache__" not in p.parts and p.is_file():
            yield p.relative_to(top).as_posix(), p.read_bytes()


def code_digest(probes_dir: Path | None = None) -> str:
    """A digest of kbtool's sources (the judges and what they call) and of every file of the probes folder (the data
    the judges read: vllm_boot reads its models' config.json)."""
    h = hashlib.sha256(f"kb-verdicts {VERSION}\n".encode())
    tops = [(_PKG, "*.py")]
    probes_dir = PROBES if probes_dir is None else probes_dir
    if probes_dir.is_dir():  # read as bytes, never imported
        tops.append((probes_dir, "*"))
    for top, pattern in tops:
        for rel, data in _sources(top, pattern):
            h.update(f"{top.name}/{rel}\0{len(data)}\0".encode())
            h.update(data)
    return h.hexdigest()


def _digest(*parts: str | bytes) -> str:
    h = hashlib.sha256()
    for p in parts:
        b = p.encode() if isinstance(p, str) else p
        h.update(len(b).to_bytes(8, "little"))
        h.update(b)
    return h.hexdigest()


def evidence_key(ev: Evidence) -> str:
    """An evidence record's content less its id: two records of the same run share their verdicts."""
    return _digest(ev.model_dump_json(exclude={"id"}))


def record_digest(record: Record) -> str:
    return _digest(record.model_dump_json())


JUDGED_FIELDS = {"id", "subject", "effect", "reason", "statement", "when", "requires", "scope"}
"""What of a claim a judge that reads claims itself may read: its gate, not its name, notes, sources or verification
(which `kb probe apply` writes from the verdicts), nor the evidence a scope range cites."""


def claim_digest(claim: Claim) -> str:
    data = claim.model_dump(mode="json", include=JUDGED_FIELDS)
    data["scope"] = [{k: v for k, v in r.items() if k != "evidence"} for r in data.get("scope") or []]
    return _digest(json.dumps(data, sort_keys=True, default=str))


def _plain(obj: Any) -> Any:
    """A condition (a pydantic model) as the JSON of its fields; anything else as its text."""
    dump = getattr(obj, "model_dump", None)
    return dump(mode="json", exclude_none=True) if callable(dump) else str(obj)


def file_digest(path: str) -> str | None:
    """The digest of a file a judge read; None when it is not a regular file within the limit (never hangs)."""
    try:
        return _digest(read_bytes(path, limit=LIMITS["probe-data"]))
    except UntrustedInputError:
        return None


class Inputs:
    """Digests of the KB's records as a judge may read them, each computed at most once."""

    def __init__(self, records: Iterable[Record]) -> None:
        self.records = list(records)
        self._by_subject: dict[str, list[Claim]] | None = None
        self._claims: dict[str, Claim] | None = None
        self._memo: dict[tuple[str, str], str] = {}

    def contexts(self, ids: Iterable[str]) -> str:
        """What a judge is handed of these claims (kbtool.probe.rejudge.claim_context), as one digest."""
        from kbtool.probe.rejudge import claim_context

        if self._claims is None:
            self._claims = {r.id: r for r in self.records if isinstance(r, Claim)}
        claims = self._claims
        parts = []
        for cid in sorted(set(ids)):
            key = ("context", cid)
            if key not in self._memo:
                ctx = claim_context(claims, [cid]).get(cid)
                self._memo[key] = _digest(cid, json.dumps(ctx, sort_keys=True, default=_plain))
            parts.append(self._memo[key])
        return _digest(*parts)

    def subjects(self, subjects: Iterable[str]) -> str:
        """Every claim about these subjects (its JUDGED_FIELDS), as one digest."""
        if self._by_subject is None:
            self._by_subject = {}
            for r in self.records:
                if isinstance(r, Claim):
                    self._by_subject.setdefault(r.subject, []).append(r)
        parts = []
        for s in sorted(set(subjects)):
            key = ("subject", s)
            if key not in self._memo:
                claims = sorted(self._by_subject.get(s, []), key=lambda c: c.id)
                self._memo[key] = _digest(s, *(claim_digest(c) for c in claims))
            parts.append(self._memo[key])
        return _digest(*parts)

    def kinds(self, kinds: Iterable[str]) -> str:
        """The content of every record of these kinds, as one digest."""
        parts = []
        for k in sorted(set(kinds)):
            key = ("kind", k)
            if key not in self._memo:
                of = sorted((r for r in self.records if r.kind == k), key=lambda r: r.id)
                self._memo[key] = _digest(k, *(record_digest(r) for r in of))
            parts.append(self._memo[key])
        return _digest(*parts)


class VerdictCache:
    """Re-judged verdicts of evidence records, read from and written to the cache folder."""

    def __init__(self, base: str | None = None, code: str | None = None) -> None:
        base = base if base is not None else cache_dir()
        self.base = base
        self.code = code or code_digest()
        self.folder = Path(base, "verdicts", self.code[:32]) if base else None
        self.hits = self.misses = 0

    def path(self, ev: Evidence) -> Path | None:
        if self.folder is None:
            return None
        return self.folder / f"{evidence_key(ev)}.json"

    def get(self, ev: Evidence, inputs: Inputs) -> list[dict[str, Any]] | None:
        """The verdicts stored for `ev` when everything the judge read is unchanged; None otherwise."""
        path = self.path(ev)
        if path is None:
            return None
        raw = read_cache(str(path), "cache-verdicts")  # a regular file of this user's, size-limited
        body = None if raw is None else unseal(str(path), MAGIC, raw, self.base)  # edited or foreign: judged again
        try:
            if body is None:
                raise ValueError("no entry")
            entry = json.loads(body.decode("utf-8"))
            reads, verdicts = entry["reads"], entry["verdicts"]
            fresh = (reads["claims_digest"] == inputs.contexts(reads["claims"])
                     and reads["subjects_digest"] == inputs.subjects(reads["subjects"])
                     and reads["kinds_digest"] == inputs.kinds(reads["kinds"])
                     and all(file_digest(f) == d for f, d in reads["files"].items()))
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            fresh = False
        if not fresh or not isinstance(verdicts, list):
            self.misses += 1
            return None
        self.hits += 1
        return verdicts

    def put(self, ev: Evidence, inputs: Inputs, verdicts: list[dict[str, Any]], *, claims: Iterable[str],
            subjects: Iterable[str], kinds: Iterable[str], files: Iterable[str]) -> None:
        path = self.path(ev)
        if path is None:
            return
        ids, subjects, kinds = sorted(set(claims)), sorted(set(subjects)), sorted(set(kinds))
        reads = {"claims": ids, "claims_digest": inputs.contexts(ids), "subjects": subjects,
                 "subjects_digest": inputs.subjects(subjects), "kinds": kinds,
                 "kinds_digest": inputs.kinds(kinds), "files": {f: file_digest(f) for f in sorted(set(files))}}
        body = json.dumps({"evidence": ev.id, "reads": reads, "verdicts": verdicts}, sort_keys=True)
        from kbtool.errors import WriteError
        from kbtool.store.writer import atomic_write

        try:
            if not path.parent.is_dir():
                self._prune()
            sealed = seal(str(path), MAGIC, body.encode("utf-8"), self.base)
            if sealed is not None:
                make_room(str(path))
                atomic_write(path, sealed)
        except (OSError, WriteError):
            pass  # a cache that cannot be written only costs time

    def _prune(self) -> None:
        """Remove the folders of other code digests (their entries can never be read again)."""
        assert self.folder is not None
        parent = self.folder.parent
        if not parent.is_dir():
            os.makedirs(parent, mode=0o700, exist_ok=True)
            return
        for other in parent.iterdir():
            if other.is_dir() and other.name != self.folder.name:
                shutil.rmtree(other, ignore_errors=True)

