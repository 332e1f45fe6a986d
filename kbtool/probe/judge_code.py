"""The code a probe's judge runs, and its digest: the key under which re-judged verdicts are cached (issue 43).

A judge's verdicts change only when its own code or what it calls changes. The code is the judge module
(kbtool/probe/judges/<name>.py) and every module of kbtool/ it imports, transitively (function-level imports too),
plus the re-judging machinery (kbtool.probe.rejudge and what it imports). Imports are read from the source text,
not by importing, so working the digest out costs a read of the files and no import: an edit to a module no
judge reaches (the solver's verdict, the renderer) judges nothing again, and an edit to one a judge reaches
judges that probe's records again.
Data files of the probe program the judge reads (probes/vllm_boot/models/... for vllm_boot) count as its code.
No probe program is read or imported: judging needs kbtool alone (design.md §3)."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

from kbtool.probe.judges import PROBES

KBTOOL = Path(__file__).resolve().parents[1]
ROOTS = ("kbtool",)
_IMPORT = re.compile(r"[ \t]*(?:from[ \t]+(\.*[\w.]*)[ \t]+import[ \t]+([\w, \t()]+)|import[ \t]+([\w., \t]+))")
_SPEC_ID = re.compile(r"^SPEC\s*[:=][^\n]*\n(?:[^\n]*\n){0,3}?\s*id\s*=\s*['\"]([\w.-]+)['\"]", re.MULTILINE)
_IMPORT_LINE = re.compile(r"^[ \t]*(?:from|import)[ \t][^\n]*", re.MULTILINE)
# an `if TYPE_CHECKING:` line and the lines after it that are blank or indented deeper
_TYPE_ONLY = re.compile(r"^([ \t]*)if TYPE_CHECKING\b[^\n]*\n(?:\1[ \t]+[^\n]*\n|[ \t]*\n)*", re.MULTILINE)
MACHINERY = "kbtool.probe.rejudge"


class Sources:
    """The modules of the kbtool package at `top` by dotted name, read once."""

    def __init__(self, top: Path = KBTOOL) -> None:
        self.files: dict[str, Path] = {}
        if top.is_dir():
            for p in sorted(top.rglob("*.py")):
                if "__pycache__" in p.parts:
                    continue
                parts = [top.name, *p.relative_to(top).with_suffix("").parts]
                if parts[-1] == "__init__":
                    parts = parts[:-1]
                self.files[".".join(parts)] = p
        self._text: dict[str, str] = {}
        self._bytes: dict[Path, bytes] = {}
        self._imports: dict[str, set[str]] = {}  # each module's imports, read once for every judge's closure
        self._dep: dict[str, set[str]] = {}

    def text(self, mod: str) -> str:
        if mod not in self._text:
            self._text[mod] = self.raw(self.files[mod]).decode("utf-8", "replace")
        return self._text[mod]

    def raw(self, path: Path) -> bytes:
        if path not in self._bytes:
            self._bytes[path] = path.read_bytes()
        return self._bytes[path]

    def imports(self, mod: str) -> set[str]:
        """The kbtool modules `mod` imports anywhere in its text."""
        if mod not in self._imports:
            self._imports[mod] = self._read_imports(mod)
        return self._imports[mod]

    def _read_imports(self, mod: str) -> set[str]:
        path = self.files[mod]
        package = mod if path.name == "__init__.py" else mod.rpartition(".")[0]
        out: set[str] = set()
        for line in _runtime_lines(self.text(mod)):
            m = _IMPORT.match(line)
            if m is None:
                continue
            base, names, plain = m.group(1), m.group(2), m.group(3)
            if plain is not None:
                targets = [n.split(" as ")[0].strip() for n in plain.split(",")]
            else:
                if base.startswith("."):
                    level = len(base) - len(base.lstrip("."))
                    parent = package.split(".")
                    parent = parent[: len(parent) - (level - 1)] if level > 1 else parent
                    base = ".".join([*parent, *([base.lstrip(".")] if base.lstrip(".") else [])])
                names = names.replace("(", " ").replace(")", " ")
                targets = [base] + [f"{base}.{n.split(' as ')[0].strip()}" for n in names.split(",") if n.strip()]
            for t in targets:
                while t and t not in self.files:
                    t = t.rpartition(".")[0]
                if t and t.split(".")[0] in ROOTS:
                    out.add(t)
        return out

    def closure(self, roots: list[str]) -> set[str]:
        seen: set[str] = set()
        todo = [r for r in roots if r in self.files]
        while todo:
            mod = todo.pop()
            if mod not in seen:
                seen.add(mod)
                todo += self._deps(mod) - seen
        return seen

    def _deps(self, mod: str) -> set[str]:
        """What loading `mod` runs: the packages above it and the modules it imports."""
        if mod not in self._dep:
            parts = mod.split(".")
            above = {".".join(parts[:i]) for i in range(1, len(parts))}
            self._dep[mod] = (above & self.files.keys()) | self.imports(mod)
        return self._dep[mod]

    def probe_modules(self) -> dict[str, str]:
        """probe id -> its judge module (kbtool.probe.judges.<name>, assigning SPEC with that id), read, not
        imported."""
        out: dict[str, str] = {}
        for mod, path in self.files.items():
            if mod.startswith("kbtool.probe.judges.") and mod.count(".") == 3 and not path.name.startswith("_"):
                m = _SPEC_ID.search(self.text(mod))
                if m:
                    out[m.group(1)] = mod
        return out


def _runtime_lines(text: str) -> list[str]:
    """The import lines that can run: an `if TYPE_CHECKING:` block (imports for the type checker only) is left
    out."""
    if "TYPE_CHECKING" in text:
        text = _TYPE_ONLY.sub("", text)
    return _IMPORT_LINE.findall(text)


class JudgeCode:
    """probe id -> the digest of the code its judge runs (None for a probe kb cannot find)."""

    def __init__(self, top: Path = KBTOOL, data: Path = PROBES) -> None:
        """`top`: the kbtool package; `data`: the probe programs' folder, whose <name>/ data the judges read."""
        self.src = Sources(top)
        self.data = data
        self.modules = self.src.probe_modules()
        self._machinery = self.src.closure([MACHINERY])
        self._memo: dict[str, str | None] = {}
        self._folders: dict[str, list[Path]] = {}
        self._files: dict[Path, str] = {}  # path -> sha256 of its bytes

    def files(self, probe_id: str) -> list[Path]:
        """The files whose bytes make `probe_id`'s judge code, sorted."""
        mod = self.modules.get(probe_id)
        if mod is None:
            return []
        mods = self.src.closure([mod]) | self._machinery
        paths = {self.src.files[m] for m in mods} | set(self._data(mod.rpartition(".")[2]))
        return sorted(paths, key=str)

    def _data(self, name: str) -> list[Path]:
        """The files of the probe program's data folder (probes/vllm_boot/ for vllm_boot), listed once."""
        if name not in self._folders:
            folder = self.data / name
            self._folders[name] = ([p for p in folder.rglob("*") if p.is_file() and "__pycache__" not in p.parts]
                                   if folder.is_dir() else [])
        return self._folders[name]

    def _file_digest(self, path: Path) -> str:
        if path not in self._files:
            self._files[path] = hashlib.sha256(self.src.raw(path)).hexdigest()
        return self._files[path]

    def digest(self, probe_id: str) -> str | None:
        """A digest of the files' names and bytes (each file hashed once however many judges reach it)."""
        if probe_id not in self._memo:
            paths = self.files(probe_id)
            if not paths:
                self._memo[probe_id] = None
            else:
                h = hashlib.sha256(b"kb-judge-code 2\n")
                for p in paths:
                    h.update(f"{p.parent.name}/{p.name}\0{self._file_digest(p)}\n".encode())
                self._memo[probe_id] = h.hexdigest()
        return self._memo[probe_id]
