"""The code a probe's judge runs, and its digest: the key under which re-judged verdicts are cached (issue 43).

A judge's verdicts change only when its own code or what it calls changes. The code is the judge module
(kbtool/probe/judges/<name>.py) and every module of kbtool/ it imports, transitively (function-level imports too),
plus the re-judging machinery (kbtool.probe.rejudge and what it imports). Imports are read from the source text,
not by importing, so working the digest out costs a read of the files and no import (and each file's digest and
imports are kept in the cache folder by size and mtime: `Facts`): an edit to a module no judge reaches (the
solver's verdict, the renderer) judges nothing again, and an edit to one a judge reaches judges that probe's
records again.
Data files of the probe program the judge reads (probes/vllm_boot/models/... for vllm_boot) count as its code.
No probe program is read or imported: judging needs kbtool alone (design.md §3)."""

from __future__ import annotations

import hashlib
import marshal
import os
import re
from pathlib import Path
from typing import Any, NamedTuple

from kbtool.probe.judges import PROBES

KBTOOL = Path(__file__).resolve().parents[1]
ROOTS = ("kbtool",)
_IMPORT = re.compile(r"[ \t]*(?:from[ \t]+(\.*[\w.]*)[ \t]+import[ \t]+([\w, \t()]+)|import[ \t]+([\w., \t]+))")
_SPEC_ID = re.compile(r"^SPEC\s*[:=][^\n]*\n(?:[^\n]*\n){0,3}?\s*id\s*=\s*['\"]([\w.-]+)['\"]", re.MULTILINE)
_IMPORT_LINE = re.compile(r"^[ \t]*(?:from|import)[ \t][^\n]*", re.MULTILINE)
# an `if TYPE_CHECKING:` line and the lines after it that are blank or indented deeper
_TYPE_ONLY = re.compile(r"^([ \t]*)if TYPE_CHECKING\b[^\n]*\n(?:\1[ \t]+[^\n]*\n|[ \t]*\n)*", re.MULTILINE)
MACHINERY = "kbtool.probe.rejudge"
FACTS_MAGIC = b"KB-JUDGE-CODE 1\n"


class Sources:
    """The modules of the kbtool package at `top` by dotted name; what each imports, read once (Facts)."""

    def __init__(self, top: Path = KBTOOL) -> None:
        self.top = top
        self.files: dict[str, Path] = {}
        for folder, dirs, names in os.walk(top):
            dirs[:] = sorted(d for d in dirs if d != "__pycache__")
            package = [top.name, *Path(folder).relative_to(top).parts]
            for n in sorted(names):
                if n.endswith(".py"):
                    mod = package if n == "__init__.py" else [*package, n[:-3]]
                    self.files[".".join(mod)] = Path(folder, n)
        self._imports: dict[str, set[str]] = {}  # each module's imports, read once for every judge's closure
        self._dep: dict[str, set[str]] = {}
        self.facts = Facts(self)

    def imports(self, mod: str) -> set[str]:
        """The kbtool modules `mod` imports anywhere in its text."""
        if mod not in self._imports:
            self._imports[mod] = self._read_imports(mod)
        return self._imports[mod]

    def _read_imports(self, mod: str) -> set[str]:
        out: set[str] = set()
        for t in self.facts.of(self.files[mod]).targets:
            while t and t not in self.files:
                t = t.rpartition(".")[0]
            if t and t.split(".")[0] in ROOTS:
                out.add(t)
        return out

    def targets(self, path: Path, text: str) -> list[str]:
        """What the module at `path` names in its import lines that can run, as absolute dotted names (a name
        imported from a module may be a module itself: `from kbtool.solve import parts`)."""
        mod = self.module_of(path)
        package = mod if path.name == "__init__.py" else mod.rpartition(".")[0]
        out: list[str] = []
        for line in _runtime_lines(text):
            m = _IMPORT.match(line)
            if m is None:
                continue
            base, names, plain = m.group(1), m.group(2), m.group(3)
            if plain is not None:
                out += [n.split(" as ")[0].strip() for n in plain.split(",")]
                continue
            if base.startswith("."):
                level = len(base) - len(base.lstrip("."))
                parent = package.split(".")
                parent = parent[: len(parent) - (level - 1)] if level > 1 else parent
                base = ".".join([*parent, *([base.lstrip(".")] if base.lstrip(".") else [])])
            names = names.replace("(", " ").replace(")", " ")
            out += [base] + [f"{base}.{n.split(' as ')[0].strip()}" for n in names.split(",") if n.strip()]
        return out

    def module_of(self, path: Path) -> str:
        parts = [self.top.name, *path.relative_to(self.top).with_suffix("").parts]
        return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)

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
                spec = self.facts.of(path).spec
                if spec:
                    out[spec] = mod
        return out


def _runtime_lines(text: str) -> list[str]:
    """The import lines that can run: an `if TYPE_CHECKING:` block (imports for the type checker only) is left
    out."""
    if "TYPE_CHECKING" in text:
        text = _TYPE_ONLY.sub("", text)
    return _IMPORT_LINE.findall(text)


class Fact(NamedTuple):
    sha256: str
    targets: tuple[str, ...]  # what its import lines name (Sources.targets); () for a file that is not Python
    spec: str  # the probe id a judge module's SPEC assigns; "" for any other file


class Facts:
    """path -> Fact of a file, from its bytes, kept in the cache folder (`judge-code.marshal`, sealed as every kb
    cache is: kbtool.store.cache) under the file's size and mtime_ns, as the query image keeps kbtool's listing:
    a run after no edit reads no source file, one after an edit reads the edited files. Off with the cache."""

    def __init__(self, src: Sources) -> None:
        from kbtool.store.cache import cache_dir

        base = cache_dir()
        self.src = src
        self.path = os.path.join(base, "judge-code.marshal") if base else None
        self.old = self._load()
        self.new: dict[str, tuple[int, int, Fact]] = {}
        self.read = 0  # files read this run
        self._saved = 0  # of which already written

    def of(self, path: Path) -> Fact:
        key = str(path)
        got = self.new.get(key)
        if got is not None:
            return got[2]
        try:
            st = os.stat(key)
            stamp = (st.st_size, st.st_mtime_ns)
        except OSError:
            stamp = (-1, -1)
        old = self.old.get(key)
        if isinstance(old, tuple) and len(old) == 5 and old[:2] == stamp:
            fact = Fact(str(old[2]), tuple(old[3]), str(old[4]))
        else:
            raw = path.read_bytes()
            self.read += 1
            text = raw.decode("utf-8", "replace") if path.suffix == ".py" else ""
            spec = _SPEC_ID.search(text) if "SPEC" in text else None
            fact = Fact(hashlib.sha256(raw).hexdigest(),
                        tuple(self.src.targets(path, text)) if text and path.is_relative_to(self.src.top) else (),
                        spec.group(1) if spec else "")
        self.new[key] = (*stamp, fact)
        return fact

    def _load(self) -> dict[str, Any]:
        from kbtool.store.cache import unseal
        from kbtool.store.untrusted import read_cache

        if self.path is None:
            return {}
        raw = read_cache(self.path, "cache-judge-code")
        body = None if raw is None else unseal(self.path, FACTS_MAGIC, raw)
        try:
            data = marshal.loads(body) if body else {}
        except (ValueError, EOFError, TypeError):
            return {}
        return data if isinstance(data, dict) else {}

    def save(self) -> None:
        """Write the facts of every file this run looked at, when one of them was read."""
        if self.path is None or self.read == self._saved:
            return
        from kbtool.errors import WriteError
        from kbtool.store.cache import make_room, seal
        from kbtool.store.writer import atomic_write

        body = marshal.dumps({**self.old, **{k: (*v[:2], *v[2]) for k, v in self.new.items()}})
        try:
            os.makedirs(os.path.dirname(self.path), mode=0o700, exist_ok=True)
            sealed = seal(self.path, FACTS_MAGIC, body)
            if sealed is not None:
                make_room(self.path)
                atomic_write(Path(self.path), sealed)
        except (OSError, WriteError):
            pass  # a cache that cannot be written only costs time
        self._saved = self.read


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
        self._lines: dict[Path, bytes] = {}

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

    def _line(self, path: Path) -> bytes:
        """What `path` adds to a judge's digest: its folder and name and the digest of its bytes."""
        line = self._lines.get(path)
        if line is None:
            line = self._lines[path] = f"{path.parent.name}/{path.name}\0{self.src.facts.of(path).sha256}\n".encode()
        return line

    def digest(self, probe_id: str) -> str | None:
        """A digest of the files' names and bytes (each file hashed once however many judges reach it)."""
        if probe_id not in self._memo:
            paths = self.files(probe_id)
            if not paths:
                self._memo[probe_id] = None
            else:
                h = hashlib.sha256(b"kb-judge-code 2\n")
                for p in paths:
                    h.update(self._line(p))
                self._memo[probe_id] = h.hexdigest()
                self.src.facts.save()  # writes only when a file was read
        return self._memo[probe_id]
