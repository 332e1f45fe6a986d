"""Re-judged verdicts, cached by content: an evidence record judged again is judged once per distinct input.

`kb validate` judges every evidence record again with today's probe and today's claims (kbtool.probe.rejudge).
The answer depends only on inputs, so it is stored under a key made of them, as mypy's incremental cache does:

- the code: the digest of the code the probe's judge runs (kbtool.probe.judge_code: the judge module, what it
  imports, the re-judging machinery and its probe program's data), so an edit no judge reaches (the solver, the
  renderer) keeps every entry, and an edit one judge reaches judges that probe's records again;
- the evidence record's content less its id (its JSON, not its file bytes: `kb fmt` does not invalidate; the
  verdicts do not depend on the id, so two records of the same run share an entry);
- what the judge read (kbtool.probe.rejudge.reads): of each claim the probe lists, what a judge is handed of it
  (subject, effect, conditions, reason code: editing a claim's name, notes or sources judges nothing again); and
  what the probe module's `judge_inputs(observations)` says its judge reads itself: every claim of some subjects
  (their gates: JUDGED_FIELDS), every record of some kinds (the vLLM selector reads the engine-backend records)
  and files (the recorded vLLM grids), each by a digest of its content.

An entry lives at `<cache dir>/verdicts/v2/<evidence digest>.json` (kbtool.store.cache.cache_dir; off
with KB_NO_CACHE=1 or KB_CACHE_DIR set empty) and holds its judge's code digest and the digests of what it read
beside the verdicts; it is used only when every one of them still matches. The file is sealed
(kbtool.store.cache.seal: kb's version and a digest keyed by the cache folder's secret) and read through
kbtool.store.untrusted.read_cache. A missing, stale, unreadable, edited or foreign entry is judged again (and
rewritten), so the folder is safe to delete at any time; folders of older layouts (one per digest of all of
kbtool) are removed when the first entry is written.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from kbtool.model import Claim, Evidence, Record
from kbtool.store.cache import cache_dir, make_room, seal, unseal
from kbtool.store.untrusted import LIMITS, UntrustedInputError, read_bytes, read_cache

VERSION = 2  # 2: one folder, each entry keyed by its own judge's code (1: a folder per digest of all of kbtool)
MAGIC = b"kb-verdicts"  # the seal's purpose (kbtool.store.cache.seal)

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
    """Re-judged verdicts of evidence records, read from and written to the cache folder. `code` gives the digest of
    a probe's judge code (default: kbtool.probe.judge_code.JudgeCode, read once per run); a string is every
    probe's (tests); None from it: that probe's verdicts are not cached."""

    def __init__(self, base: str | None = None, code: str | Callable[[str], str | None] | None = None) -> None:
        base = base if base is not None else cache_dir()
        self.base = base
        self._code = code
        self.folder = Path(base, "verdicts", f"v{VERSION}") if base else None
        self.hits = self.misses = 0

    def code(self, probe_id: str) -> str | None:
        """The digest of the code `probe_id`'s judge runs."""
        if self._code is None:
            from kbtool.probe.judge_code import JudgeCode

            self._code = JudgeCode().digest
        return self._code if isinstance(self._code, str) else self._code(probe_id)

    def path(self, ev: Evidence) -> Path | None:
        if self.folder is None:
            return None
        return self.folder / f"{evidence_key(ev)}.json"

    def get(self, ev: Evidence, inputs: Inputs) -> list[dict[str, Any]] | None:
        """The verdicts stored for `ev` when its judge's code and everything the judge read are unchanged; None
        otherwise."""
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
            code = self.code(ev.probe.id)
            fresh = (code is not None and entry["code"] == code
                     and reads["claims_digest"] == inputs.contexts(reads["claims"])
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
        path, code = self.path(ev), self.code(ev.probe.id)
        if path is None or code is None:
            return
        ids, subjects, kinds = sorted(set(claims)), sorted(set(subjects)), sorted(set(kinds))
        reads = {"claims": ids, "claims_digest": inputs.contexts(ids), "subjects": subjects,
                 "subjects_digest": inputs.subjects(subjects), "kinds": kinds,
                 "kinds_digest": inputs.kinds(kinds), "files": {f: file_digest(f) for f in sorted(set(files))}}
        body = json.dumps({"evidence": ev.id, "code": code, "reads": reads, "verdicts": verdicts}, sort_keys=True)
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
        """Remove the folders of other layouts (their entries can never be read again)."""
        assert self.folder is not None
        parent = self.folder.parent
        if not parent.is_dir():
            os.makedirs(parent, mode=0o700, exist_ok=True)
            return
        for other in parent.iterdir():
            if other.is_dir() and other.name != self.folder.name:
                shutil.rmtree(other, ignore_errors=True)
