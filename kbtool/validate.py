"""`kb validate`: load the records, run every check, return the findings."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from kbtool.checks import FOCUS, all_checks
from kbtool.findings import Finding
from kbtool.kb import KB
from kbtool.paths import display
from kbtool.store.records import load_tree


@dataclass
class Report:
    files: int
    records: int
    findings: list[Finding] = field(default_factory=list)
    kb: KB = field(default_factory=KB, repr=False)  # the records that validated

    @property
    def errors(self) -> list[Finding]:
        return [f for f in self.findings if f.severity == "error"]

    @property
    def warnings(self) -> list[Finding]:
        return [f for f in self.findings if f.severity == "warning"]

    def exit_code(self, strict: bool = False) -> int:
        return 1 if self.errors or (strict and self.warnings) else 0


STYLE = ("KB6",)  # formatting checks (KB601): a ruamel round trip per file, run with style=True or `kb fmt --check`


def validate(root: Path, paths: list[Path] | None = None, *, only: tuple[str, ...] = ("KB",),
             style: bool = False) -> Report:
    """Validate the tree at `root`; with `paths`, report only on those files (the tree gives context).
    `only` runs just the checks whose codes start with one of its prefixes (loading, KB100/KB101, always runs).
    The formatting check KB601 runs only with `style` (it costs a ruamel round trip per file, about nine tenths
    of a full run; `kb fmt --check` is the formatting gate in CI and pre-commit)."""
    paths = [p for p in (paths or [])]
    outside = [p for p in paths if not p.resolve().is_relative_to(root.resolve())]
    result = load_tree(root, [root, *outside] if outside else None, cached=True)
    kb = KB.from_load(result)
    kb.root = root
    findings = list(result.findings)
    focus = FOCUS.set(frozenset(display(p, root) for p in _expand(paths)) if paths else None)
    for chk in all_checks():
        if chk.fn is not None and chk.code.startswith(only) and (style or not chk.code.startswith(STYLE)):
            found = chk.fn(kb)
            if outside and chk.code == "KB206":
                keep = {display(p, root) for p in outside}
                found = [f for f in found if f.file not in keep]
            findings += found
    FOCUS.reset(focus)
    if paths:
        wanted = {display(p, root) for p in _expand(paths)}
        findings = [f for f in findings if f.file in wanted]
        files = len(wanted)
    else:
        files = len(result.loaded) + len({f.file for f in result.findings if f.code == "KB100"})
    findings.sort(key=lambda f: (f.code, f.file or "", f.line or 0, f.path))
    return Report(files=files, records=len(kb), findings=findings, kb=kb)


INCOMING = ("KB1", "KB401")  # what a record must pass to be copied into the tree: loading, schema


def check_incoming(root: Path, paths: list[Path]) -> None:
    """Refuse records about to be copied into the tree (`kb probe apply --write`: evidence files, or the folders
    holding them) that `kb validate` would flag: the same checks (INCOMING), run before anything is written.
    Control characters (KB404) are not refused here: the evidence writer (kbtool/probe/evidence.py `printable`)
    takes them out of what it copies in, as it does for what `kb probe run` writes (a CuTe DSL error arrives
    coloured)."""
    from kbtool.errors import UsageError

    files = [f for p in paths for f in (sorted(p.glob("*.yaml")) if p.is_dir() else [p])]
    if not files:
        return
    bad = validate(root, files, only=INCOMING).errors
    if bad:
        lines = "\n".join(f"  {f.file}:{f.line or 1} {f.path}: {f.message}" for f in bad[:5])
        more = f"\n  ... and {len(bad) - 5} more" if len(bad) > 5 else ""
        raise UsageError(f"{len(bad)} problem(s) in what would be copied into {root}, so nothing was written:\n"
                         f"{lines}{more}", fix="fix the files (`kb validate FILE` locates each), then apply again")


def _expand(paths: list[Path]) -> list[Path]:
    out: list[Path] = []
    for p in paths:
        if p.is_dir():
            out += sorted(x for x in p.rglob("*") if x.suffix in (".yaml", ".yml"))
        else:
            out.append(p)
    return out
