"""How a release's recorded evidence was installed (issue 46): the newest no-GPU evidence of an engine probe for a
release, and the requirements that replaced the release's own pins when `kb probe sweep` installed it
(environment.install_overrides), so that answers for that release can say so. Engine-neutral: each engine names
its library and probe."""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

# What this process has read, by evidence id (a dict, not functools.cache: the warm query imports this module and
# not functools). forget() empties it.
_MEMO: dict[str, Any] = {}


def forget() -> None:
    """Read the evidence again on the next call (tests that change it)."""
    _MEMO.clear()


def evidence_id(lib: str, version: str, probe: str) -> str | None:
    """The newest evidence record of `probe` for `lib`'s release (its file name carries library, release, probe)."""
    from kbtool.paths import records_dir

    tag = version.replace(".", "-")
    files = sorted((records_dir() / "evidence").glob(f"*-no-gpu-{lib}-{tag}-{probe}*.yaml"))
    return files[-1].stem if files else None


def install_overrides(evidence: str) -> tuple[str, ...]:
    """The requirements that replaced the release's own pins when the evidence's environment was installed
    (environment.install_overrides, written by `kb probe sweep`); read from the file's text, not parsed."""
    if evidence not in _MEMO:
        _MEMO[evidence] = _overrides(evidence)
    return _MEMO[evidence]  # type: ignore[no-any-return]


def _overrides(evidence: str) -> tuple[str, ...]:
    import re

    from kbtool.paths import records_dir

    try:
        text = (records_dir() / "evidence" / f"{evidence}.yaml").read_text(encoding="utf-8")
    except OSError:
        return ()
    block = re.search(r"^  install_overrides:\n((?:  - .*\n)+)", text, re.MULTILINE)
    return tuple(_unquote(ln.strip()[2:]) for ln in block.group(1).splitlines()) if block else ()


def _unquote(v: str) -> str:
    """A YAML flow scalar's text: quoted ones lose their quotes (and a single-quoted one its doubled quotes); a plain
    one is kept whole (cuda-tile ; sys_platform == 'never' ends in a quote of its own)."""
    if len(v) > 1 and v[0] == v[-1] == "'":
        return v[1:-1].replace("''", "'")
    if len(v) > 1 and v[0] == v[-1] == '"':
        return v[1:-1]
    return v


def override_note(lib: str, version: str | None, probe: str) -> str:
    """", installed with override X" where the release's evidence of `probe` was installed with overrides, else ""."""
    eid = evidence_id(lib, version, probe) if version else None
    over = install_overrides(eid) if eid else ()
    return f", installed with override {', '.join(over)}" if over else ""
