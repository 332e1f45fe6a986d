"""A serving engine's own command-line table, as its release's argparse parser builds it, for reading pasted lines.

probes/_serve_flags.py writes it under the engine's interpreter (tests/data/<engine>/<release>/flags.json, shipped
as kbtool/_data/<engine>/...): every option string with its dest, whether it is a switch or takes values (and how
many: argparse's nargs), the type argparse converts with (int, float, str, human_int, or another callable kb does
not re-run), its choices, whether the parser takes unique prefixes (allow_abbrev) and whether it reads
`--max_num_seqs` as `--max-num-seqs` (vLLM's FlexibleArgumentParser). A serve-line parser reads every flag
through it, so a value is read as the engine reads it: a switch takes no value (`--trust-remote-code MODEL` keeps
MODEL), `--tp 2` is SGLang's --tp-size by prefix, a bad int or a choice the release lacks is refused naming the
flag and the value as typed and the release the table comes from.

The table read is the pinned release's (`table(engine, prefix, release)`): the release asked for (--vllm /
--sglang, else --lib ENGINE=X), else the default the engine pins, which the solver only knows once the records are
loaded (kbtool/solve/solver.py re-reads a line read with another release's table). A release with no recorded
table is read with the nearest recorded one at or below it (else the oldest), and there a flag or choice another
recorded release has is not refused: kb cannot tell which side of the change the release is on.
"""

from __future__ import annotations

import os

from kbtool.errors import UsageError

TYPE_CHECKING = False  # the pasted-line query imports this module: no typing, re or pathlib at run time
if TYPE_CHECKING:
    from typing import Any

NAMES = {"vllm": "vLLM", "sglang": "SGLang"}


class AmbiguousOption(UsageError):
    """A typed option that is a prefix of several of the release's options (argparse refuses it): `flag` as typed,
    `what` argparse's words for it ("ambiguous option: --x could match --x-a, --x-b")."""

    def __init__(self, message: str, *, flag: str, what: str, fix: str | None = None) -> None:
        super().__init__(message, fix=fix)
        self.flag, self.what = flag, what


_DECIMAL = {"k": 10**3, "m": 10**6, "g": 10**9, "t": 10**12}
_BINARY = {"K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}
MAX_HUMAN = 2**53  # beyond any context or GPU's memory in bytes, and every float's exact integers


def human_int(text: str) -> int:
    """vLLM's reading of --max-model-len / --max-num-batched-tokens (vllm/utils/argparse_utils.py
    human_readable_int): 32k = 32,000 and 32K = 32,768; decimals only with the decimal suffixes; 'auto' or -1 for
    --max-model-len is -1 (fit to memory)."""
    t = text.strip()
    if t == "-1" or t.lower() == "auto":
        return -1
    if t[-1:] in _DECIMAL:
        x = float(t[:-1]) * _DECIMAL[t[-1]]
        if not abs(x) <= MAX_HUMAN:  # inf, nan, 1e400k: vLLM's int() raises too
            raise ValueError(f"{text!r} is out of range")
        return int(x)
    n = int(t[:-1]) * _BINARY[t[-1]] if t[-1:] in _BINARY else int(t)
    if abs(n) > MAX_HUMAN:
        raise ValueError(f"{text!r} is out of range")
    return n


_BLANK = " \t\r\n"  # shlex's whitespace
_QUOTES = "'\""


def split(text: str) -> list[str]:
    """A pasted command's words as a POSIX shell splits them, which is shlex.split(text) (quotes, backslash
    escapes, no comments; tests/solve/test_serve_flags.py holds the two equal on generated lines) without
    importing shlex and `re` on every pasted-line query. One tokenizer for every engine's serve line; raises
    ValueError as shlex does ("No closing quotation", "No escaped character")."""
    words: list[str] = []
    word: list[str] = []
    quoted = False  # the word had quotes: '' is a word
    state, back = " ", "a"  # state: " " between words, "a" in one, a quote inside it, "\\" after a backslash
    for ch in text:
        if state == " " or state == "a":
            if ch in _BLANK:
                if state == "a":
                    words.append("".join(word))
                    word, quoted = [], False
                state = " "
            elif ch in _QUOTES:
                state, quoted = ch, True
            elif ch == "\\":
                state, back = "\\", "a"
            else:
                word.append(ch)
                state = "a"
        elif state == "\\":
            if back in _QUOTES and ch != "\\" and ch != back:
                word.append("\\")  # in double quotes a backslash escapes only itself and the quote
            word.append(ch)
            state = back
        elif ch == state:  # the closing quote
            state = "a"
        elif ch == "\\" and state == '"':
            state, back = "\\", state
        else:
            word.append(ch)
    if state in _QUOTES:
        raise ValueError("No closing quotation")
    if state == "\\":
        raise ValueError("No escaped character")
    if state == "a" and (word or quoted):
        words.append("".join(word))
    return words


_NAME = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_")


def _assignment(word: str) -> bool:
    """`NAME=value` as the shell reads an environment assignment before a command (NAME: [A-Za-z_][A-Za-z0-9_]*)."""
    name, eq, _ = word.partition("=")
    return bool(eq) and bool(name) and not name[0].isdigit() and all(c in _NAME for c in name)


def _python(word: str) -> bool:
    """A Python interpreter's name, with or without its folder: python, python3, python3.12."""
    head, _, base = word.rpartition("/")
    if "\n" in head:
        return False
    if base in ("python", "python3"):
        return True
    return base.startswith("python3.") and base[8:].isdecimal()


# `docker run` / `podman run` options that take a value (Docker CLI reference, docker container run; podman run
# takes the same names): the word after one of them is its value, not the image. The rest of run's options are
# switches (--rm, -d, -i, -t, --privileged, --init, ...); `--opt=value` carries its own value.
_RUN_VALUES = frozenset((
    "--add-host", "--annotation", "-a", "--attach", "--blkio-weight", "--blkio-weight-device", "--cap-add",
    "--cap-drop", "--cgroup-parent", "--cgroupns", "--cidfile", "--cpu-count", "--cpu-percent", "--cpu-period",
    "--cpu-quota", "--cpu-rt-period", "--cpu-rt-runtime", "-c", "--cpu-shares", "--cpus", "--cpuset-cpus",
    "--cpuset-mems", "--detach-keys", "--device", "--device-cgroup-rule", "--device-read-bps", "--device-read-iops",
    "--device-write-bps", "--device-write-iops", "--dns", "--dns-option", "--dns-search", "--domainname",
    "--entrypoint", "-e", "--env", "--env-file", "--expose", "--gpus", "--group-add", "--health-cmd",
    "--health-interval", "--health-retries", "--health-start-interval", "--health-start-period", "--health-timeout",
    "-h", "--hostname", "--ip", "--ip6", "--ipc", "--isolation", "--kernel-memory", "-l", "--label", "--label-file",
    "--link", "--link-local-ip", "--log-driver", "--log-opt", "--mac-address", "-m", "--memory",
    "--memory-reservation", "--memory-swap", "--memory-swappiness", "--mount", "--name", "--network", "--net",
    "--network-alias", "--oom-score-adj", "--pid", "--pids-limit", "--platform", "-p", "--publish", "--pull",
    "--restart", "--runtime", "--security-opt", "--shm-size", "--stop-signal", "--stop-timeout", "--storage-opt",
    "--sysctl", "--tmpfs", "--ulimit", "-u", "--user", "--userns", "--uts", "-v", "--volume", "--volume-driver",
    "--volumes-from", "-w", "--workdir"))
_RUNTIMES = ("docker", "podman", "nerdctl")
_SUDO_VALUES = frozenset(("-u", "--user", "-g", "--group", "-C", "--close-from", "-D", "--chdir", "-h", "--host",
                          "-p", "--prompt", "-R", "--chroot", "-r", "--role", "-t", "--type", "-T", "--command-timeout",
                          "-U", "--other-user"))  # sudo's options that take a value (sudo(8)); the rest are switches


def _sudo(words: list[str], i: int) -> int:
    """Past `sudo [OPTIONS]` at words[i] (sudo runs the rest as the command), else i."""
    if words[i:i + 1] != ["sudo"]:
        return i
    j = i + 1
    while j < len(words) and words[j].startswith("-") and words[j] != "--":
        j += 2 if "=" not in words[j] and words[j] in _SUDO_VALUES else 1
    j += 1 if words[j:j + 1] == ["--"] else 0
    return j if j < len(words) else i  # no command after it: not sudo's line


def _container(words: list[str], i: int) -> int:
    """Where the container's command starts when words[i:] is `docker|podman|nerdctl run OPTIONS IMAGE ...` (the
    words after IMAGE: the image's entrypoint's arguments, or a command that replaces its CMD); else i. The
    options are the container runtime's, not the engine's (a `-d` or `--device` there is not vLLM's), and the image
    is not the model: the vllm/vllm-openai image's ENTRYPOINT runs the server (`vllm serve`, earlier `python3 -m
    vllm.entrypoints.openai.api_server`: docker/Dockerfile, target vllm-openai), so what follows the image is the
    server's own line."""
    j = i
    if words[j:j + 2] not in ([r, "run"] for r in _RUNTIMES):
        return i
    j += 2
    while j < len(words) and words[j].startswith("-") and words[j] != "-":
        w = words[j]
        if w == "--":  # the end of the options: the image follows
            j += 1
            break
        takes = "=" not in w and (w in _RUN_VALUES or (not w.startswith("--") and "-" + w[-1] in _RUN_VALUES))
        j += 2 if takes else 1
    return j + 1 if j < len(words) else i  # past the image; no image: not a container line


_WRAPPERS = frozenset(("nohup", "exec", "env"))
"""Commands that run the rest of the line as the command (`nohup python -m vllm...`, vllm-project/vllm#17470);
`env` takes the assignments after it, as the shell's own do."""


def _lead(words: list[str]) -> tuple[int, dict[str, str]]:
    """Where the command starts past the wrappers `command` drops, and the environment assignments on the way."""
    i, start, env = 0, -1, {}
    while i != start:
        start = i
        while i < len(words) and _assignment(words[i]):
            name, _, value = words[i].partition("=")
            env[name] = value
            i += 1
        if words[i:i + 1] and words[i] in _WRAPPERS and i + 1 < len(words):
            i += 1
        elif words[i:i + 2] == ["uv", "run"] and i + 2 < len(words):
            i += 2
        i = _container(words, _sudo(words, i))
    return i, env


def environment(words: list[str]) -> dict[str, str]:
    """The environment assignments a pasted line sets before its command (`VLLM_USE_V2_MODEL_RUNNER=0 vllm serve`,
    `env X=1 ...`), as the shell reads them; a word after the command is an argument, not the environment."""
    return _lead(words)[1]


def command(words: list[str], modules: tuple[str, ...]) -> list[str]:
    """The words after the command of a pasted line: leading environment assignments (`CUDA_VISIBLE_DEVICES=0,1`),
    `sudo [OPTIONS]`, `nohup` / `exec` / `env`, `uv run`, a container wrapper (`docker run OPTIONS IMAGE`, see
    _container) and `python[3[.x]] [interpreter options] -m MODULE` for one of the engine's `modules` (also with
    the interpreter's name left out, `-m MODULE`: sgl-project/sglang#4708) are dropped, as the shell, sudo, the
    container runtime and Python read them."""
    i = _lead(words)[0]
    j = i
    if j < len(words) and _python(words[j]):
        j += 1
        while j < len(words) and words[j].startswith("-") and words[j] != "-m":
            j += 2 if words[j] in ("-X", "-W") else 1  # the interpreter's options (-O, -u, -X dev)
    if words[j:j + 1] == ["-m"] and words[j + 1:j + 2] and words[j + 1] in modules:
        i = j + 2
    return words[i:]


def number_word(word: str) -> bool:
    """A word argparse reads as a value even though it starts with '-' (a negative number: -1)."""
    try:
        float(word)
    except ValueError:
        return False
    return True


def _folders(engine: str) -> list[str]:
    import kbtool
    from kbtool.paths import records_root

    return [os.path.join(os.path.dirname(records_root()), "tests", "data", engine),
            os.path.join(os.path.dirname(kbtool.__file__), "_data", engine)]


def _key(version: str) -> tuple[int, ...]:
    return tuple(int(p) if p.isdigit() else 0 for p in version.split("."))


class FlagTable:
    """One release's table (see the module docstring), read for the release `asked` (itself, or one with no
    recorded table: `exact` is False)."""

    def __init__(self, doc: dict[str, Any], prefix: str, asked: str | None = None) -> None:
        self.engine, self.release = str(doc["engine"]), str(doc["release"])
        self.allow_abbrev, self.underscores = bool(doc.get("allow_abbrev")), bool(doc.get("underscores"))
        self.flags: dict[str, dict[str, Any]] = doc["flags"]
        self.prefix = prefix  # "--vllm-args" / "--sglang-args": how kb's errors name the pasted line
        self.asked = asked or self.release
        self.exact = self.asked == self.release

    @property
    def name(self) -> str:
        """The release as people write it ("vLLM 0.33.0"), and the table's where it has none of its own."""
        engine = NAMES.get(self.engine, self.engine)
        if self.exact:
            return f"{engine} {self.release}"
        return f"{engine} {self.asked} as read with {self.release}'s recorded parser, the nearest kb has"

    @property
    def refuses(self) -> str:
        """Whose parser refuses what kb refuses."""
        engine = NAMES.get(self.engine, self.engine)
        if self.exact:
            return f"{engine} {self.release}'s parser refuses it"
        return f"{engine} {self.release}'s parser, the nearest recorded to {self.asked}, refuses it"

    def _others(self, has: Any) -> list[str]:
        """The other recorded releases whose table satisfies `has(table)`, oldest first."""
        return [t.release for t in reversed(tables(self.engine, self.prefix)) if t.release != self.release and has(t)]

    def canonical(self, typed: str) -> str | None:
        """The option string `typed` means to this release's parser (itself, its dashed spelling, or the one option
        it is a unique prefix of), or None when the parser does not know it. An ambiguous prefix is refused as
        argparse refuses it."""
        flag = typed
        if self.underscores and flag.startswith("--"):
            flag = "--" + flag[2:].replace("_", "-")
        if flag in self.flags:
            return flag
        if self.allow_abbrev and flag.startswith("--") and len(flag) > 2:
            hits = sorted({f for f in self.flags if f.startswith(flag)})
            dests = {self.flags[f]["dest"] for f in hits}
            if len(dests) == 1:
                return hits[0]
            if hits:
                has = self._others(lambda t: flag in t.flags)  # a release whose parser has the flag itself
                where = f"; {_releases(has)} {'has' if len(has) == 1 else 'have'} {flag}" if has else ""
                fix = (f"write the option you mean in full ({' or '.join(hits[:3])}), or drop {typed}: no recorded "
                       f"release has {typed} itself" if not has else "spell the flag out in full")
                if has:
                    name = NAMES.get(self.engine, self.engine)
                    fix = f"for {name} {has[-1]}, add --{self.engine} {has[-1]}; else {fix}"
                what = f"ambiguous option: {typed} could match {', '.join(hits[:6])}{' ...' if len(hits) > 6 else ''}"
                raise AmbiguousOption(f"{self.prefix}: {what} ({self.refuses}){where}", flag=typed, what=what, fix=fix)
        return None

    def unknown(self, typed: str) -> str:
        """What kb lists for a flag this release's parser does not know (the release refuses the line; the other
        recorded releases that have it are named)."""

        def knows(t: FlagTable) -> bool:
            try:
                return t.canonical(typed) is not None
            except UsageError:  # ambiguous there: that parser knows the prefix
                return True

        had = self._others(knows)
        was = f"; {_releases(had)} {'has' if len(had) == 1 else 'have'} it" if had else ""
        return f"{typed} (not a flag of {self.name}{was})"

    def has(self, typed: str) -> bool:
        """Whether `typed` is one of this release's own option strings (not a prefix of one)."""
        flag = "--" + typed[2:].replace("_", "-") if self.underscores and typed.startswith("--") else typed
        return flag in self.flags

    def spec(self, flag: str) -> dict[str, Any]:
        return self.flags[flag]

    def takes(self, flag: str, words: list[str], i: int, inline: bool) -> int:
        """How many of the words after position `i` are `flag`'s values (0 for a switch or a value given with =)."""
        s = self.flags[flag]
        if s["kind"] == "switch" or inline:
            return 0
        nargs = s.get("nargs")
        rest = words[i + 1:]
        if nargs in (None, 1):
            return 1 if rest else 0
        if isinstance(nargs, int):
            return min(nargs, len(rest))
        n = 0
        while n < len(rest) and not (rest[n].startswith("-") and not number_word(rest[n])):
            n += 1
            if nargs == "?":
                break
        return n

    def check(self, typed: str, flag: str, value: str) -> None:
        """Refuse `value` where this release's parser would (its type or choices), naming the flag as typed."""
        s = self.flags[flag]
        t, choices = s.get("type"), s.get("choices")
        try:
            if t == "int":
                int(value)
            elif t == "float":
                float(value)
            elif t == "human_int":
                human_int(value)
        except ValueError:
            word = {"int": "an integer", "float": "a number"}.get(str(t), "a number such as 32768 or 32k")
            raise UsageError(f"{self.prefix}: {typed} takes {word}; got '{value}' ({self.refuses})",
                             fix=f"e.g. {typed} {'0.9' if t == 'float' else '2'}") from None
        if choices is not None and value not in choices:
            has = self._others(lambda t: value in ((t.flags.get(flag) or {}).get("choices") or ()))
            if has and not self.exact:  # the release has no table of its own: kb cannot tell
                return
            newer = not any(_key(t.release) > _key(self.asked) for t in tables(self.engine, self.prefix))
            if has:
                where = f"{_releases(has)} {'has' if len(has) == 1 else 'have'} it"
                fix = (f"for {NAMES.get(self.engine, self.engine)} {has[-1]}, add --{self.engine} {has[-1]}; else "
                       f"choose from {', '.join(choices)}")
            else:
                rels = [t.release for t in reversed(tables(self.engine, self.prefix))]
                where = f"no recorded release has it ({_releases(rels)})" + ("; a newer release may have it" if
                                                                            newer else "")
                fix = f"choose from {', '.join(choices)}" + ("; for a newer release's value, kb needs that release's"
                                                             " flag table (probes/_serve_flags.py)" if newer else "")
            raise UsageError(f"{self.prefix}: {typed}: invalid choice '{value}' ({self.refuses}); {where}", fix=fix)


_LOADED: dict[str, dict[str, Any]] = {}


def _load(path: str) -> dict[str, Any]:
    """A recorded table's JSON, read once per process (through the cache folder: kbtool.store.jsoncache)."""
    if path not in _LOADED:
        from kbtool.store.jsoncache import load

        _LOADED[path] = load(path)
    return _LOADED[path]


def _release(path: str) -> str:
    """The release a table's path names (<folder>/<release>/flags.json)."""
    return os.path.basename(os.path.dirname(path))


def _paths(engine: str) -> list[str]:
    """The recorded tables of `engine`, newest release first (the checkout's, else the installed copy's)."""
    for folder in _folders(engine):
        try:
            names = os.listdir(folder)
        except OSError:
            continue
        found = [p for p in (os.path.join(folder, n, "flags.json") for n in names if not n.startswith("."))
                 if os.path.isfile(p)]
        if found:
            return sorted(found, key=lambda p: _key(_release(p)), reverse=True)
    return []


def tables(engine: str, prefix: str) -> list[FlagTable]:
    """Every recorded release's table of `engine`, newest first."""
    out = []
    for path in _paths(engine):
        try:
            out.append(FlagTable(_load(path), prefix))
        except (OSError, ValueError, KeyError):
            continue
    return out


def _releases(rels: list[str]) -> str:
    """'0.19.1, 0.20.0 and 3 more to 0.24.0' for a long list."""
    if len(rels) <= 4:
        return ", ".join(rels)
    return f"{', '.join(rels[:2])} and {len(rels) - 3} more to {rels[-1]}"


def _path_for(engine: str, release: str | None) -> str | None:
    """The table that reads `release`'s lines: its own, else the newest recorded at or below it, else the oldest;
    the newest where no release is given."""
    paths = _paths(engine)
    if not paths or release is None:
        return paths[0] if paths else None
    want = _key(release)
    own = next((p for p in paths if _release(p) == release), None)
    return own or next((p for p in paths if _key(_release(p)) <= want), paths[-1])


def table_releases(engine: str) -> list[str]:
    """The releases of `engine` with a recorded flag table, newest first (no table is loaded)."""
    return [_release(p) for p in _paths(engine)]


def reads_with(engine: str, release: str | None) -> str | None:
    """The recorded release whose table reads `release`'s lines (no table is loaded)."""
    path = _path_for(engine, release)
    return _release(path) if path is not None else None


def table(engine: str, prefix: str, release: str | None = None) -> FlagTable | None:
    """The table `release`'s lines are read with (module docstring; None: the newest recorded), or None where
    none is recorded here."""
    path = _path_for(engine, release)
    try:
        return FlagTable(_load(path), prefix, release) if path is not None else None
    except (OSError, ValueError, KeyError):
        return None
