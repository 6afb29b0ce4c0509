"""[tools] Reading a repository's git configuration well enough to know that it names no program.

git runs programs named in its configuration, and the keys that do are many and grow with
git's releases: `core.fsmonitor`, `core.hooksPath`, `core.pager`, `core.sshCommand`,
`diff.external`, `filter.<driver>.clean`/`smudge`/`process`, `diff.<driver>.textconv`/
`command`, `alias.<name> = !…`, `gpg.program` (with `log.showSignature`), `include.path` and
`includeIf` (another file's keys), `credential.helper`, `core.editor`… A list of dangerous
keys would lose to the next one, as a deny list of options lost to the next spelling
(command_rules.py). So this module lists the keys that only ever hold data — what `git init`,
`git clone`, `git remote`, `git branch` and `git config user.*` write, and settings of the same
kind — and every other key counts as one that may name a program.

The reader accepts a strict subset of git's syntax and calls the rest unreadable (which, like
an unknown key, only means a human is asked): one key per line, never on a section header's
line; no line ending in a backslash (git joins it with the next line, which can move the lines
after it into another section); only spaces and tabs as blanks. On what it accepts it reads
the same sections and names git reads (section and key names case-insensitive, `[a "b"]` and
the older `[a.b]`), so no key git would see can hide from it.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass


def _keys(text: str) -> frozenset[tuple[str, ...]]:
    return frozenset(tuple(k.split(".")) for k in text.split())


# Keys that hold data only: (section, name) with no subsection ...
_PLAIN = _keys(
    """
    core.repositoryformatversion core.filemode core.bare core.logallrefupdates core.ignorecase
    core.precomposeunicode core.symlinks core.autocrlf core.eol core.safecrlf core.quotepath
    core.checkstat core.trustctime core.abbrev core.compression core.loosecompression
    core.sharedrepository core.untrackedcache core.splitindex core.preloadindex
    core.commentchar core.commentstring core.whitespace core.bigfilethreshold
    core.multipackindex core.commitgraph core.sparsecheckout core.sparsecheckoutcone
    core.warnambiguousrefs core.protecthfs core.protectntfs core.checkroundtripencoding
    core.fsync core.fsyncmethod core.fsyncobjectfiles core.packedrefstimeout
    core.filesreftimeout core.deltabasecachesize core.packedgitwindowsize core.packedgitlimit
    core.excludesfile core.attributesfile core.notesref
    extensions.objectformat extensions.worktreeconfig extensions.refstorage
    extensions.preciousobjects extensions.noop
    user.name user.email user.signingkey author.name author.email committer.name
    committer.email init.defaultbranch lfs.repositoryformatversion
    index.version index.threads index.skiphash index.sparse feature.manyfiles
    gc.auto gc.autodetach gc.autopacklimit
    fetch.prune fetch.prunetags fetch.writecommitgraph pull.rebase pull.ff
    push.default push.autosetupremote push.followtags merge.ff merge.conflictstyle
    rebase.autosquash rebase.autostash rebase.updaterefs
    status.showuntrackedfiles status.short status.branch status.relativepaths status.renames
    status.aheadbehind log.decorate log.date log.abbrevcommit log.follow
    diff.renames diff.algorithm diff.mnemonicprefix diff.noprefix diff.context diff.colormoved
    diff.indentheuristic diff.statgraphwidth diff.relative
    rerere.enabled rerere.autoupdate commit.verbose commit.cleanup commit.status
    i18n.commitencoding i18n.logoutputencoding apply.whitespace clone.defaultremotename
    worktree.guessremote
    """
)
# ... (section, name) under any subsection: `[remote "origin"] url = …` ...
_UNDER_ANY = _keys(
    """
    remote.url remote.pushurl remote.fetch remote.push remote.mirror remote.tagopt
    remote.prune remote.prunetags remote.skipdefaultupdate remote.skipfetchall
    branch.remote branch.merge branch.rebase branch.pushremote branch.description
    submodule.url submodule.active submodule.branch submodule.shallow
    """
)
# ... and whole sections of display settings.
_WHOLE_SECTIONS = frozenset({"color", "advice"})

_BLANK = b" \t"
_HEADER = re.compile(rb'\[([A-Za-z0-9.-]+)(?:[ \t]+"((?:[^"\\\n]|\\.)*)")?\][ \t]*(?:[#;].*)?')
_KEY = re.compile(rb"([A-Za-z][A-Za-z0-9-]*)[ \t]*(?:=(.*)|[#;].*)?")
_BOM = b"\xef\xbb\xbf"


@dataclass(frozen=True, slots=True)
class Entry:
    line: int
    section: str  # lowercased
    subsection: str | None  # as written (case matters to git)
    name: str  # lowercased
    value: str | None  # the text after `=`, as written; None: a bare boolean

    @property
    def key(self) -> str:
        sub = f".{self.subsection}" if self.subsection is not None else ""
        return f"{self.section}{sub}.{self.name}"

    def shown(self) -> str:
        if self.value is None:
            return self.key
        value = self.value.strip()
        if len(value) > 160:  # both ends: a program's name is often at the end of its path
            value = f"{value[:78]}...{value[-78:]}"
        return f"{self.key} = {value}"


class Unreadable(ValueError):
    """A line this reader cannot be sure it reads as git does."""

    def __init__(self, line: int, why: str) -> None:
        super().__init__(f"line {line} {why}")
        self.line = line


def read_entries(data: bytes) -> list[Entry]:
    """Every key of a git config file, in order; Unreadable at the first line outside the
    subset (see the module's docstring)."""
    if data.startswith(_BOM):
        data = data[len(_BOM) :]
    section: str | None = None
    subsection: str | None = None
    out: list[Entry] = []
    for number, raw in enumerate(data.split(b"\n"), 1):
        line = raw[:-1] if raw.endswith(b"\r") else raw
        text = line.lstrip(_BLANK)
        if not text or text[:1] in (b"#", b";"):
            continue
        if any(c < 0x20 and c != 0x09 for c in text) or 0x7F in text:
            raise Unreadable(number, "holds control characters")
        if _odd_backslashes(line):
            raise Unreadable(number, "ends with a backslash (continued on the next line)")
        if text.startswith(b"["):
            header = _HEADER.fullmatch(text)
            if header is None:
                raise Unreadable(number, "is not a section header this reader takes")
            name = header.group(1).decode("ascii").lower()
            if header.group(2) is not None:
                section = name
                subsection = re.sub(rb"\\(.)", rb"\1", header.group(2)).decode("utf-8", "replace")
            elif "." in name:  # the older [section.subsection], lowercased by git too
                section, _, subsection = name.partition(".")
            else:
                section, subsection = name, None
            continue
        key = _KEY.fullmatch(text)
        if key is None or section is None:
            raise Unreadable(number, "is not a `name = value` line under a section")
        value = key.group(2)
        out.append(
            Entry(
                number,
                section,
                subsection,
                key.group(1).decode("ascii").lower(),
                None if value is None else value.decode("utf-8", "replace"),
            )
        )
    return out


def _odd_backslashes(line: bytes) -> bool:
    return (len(line) - len(line.rstrip(b"\\"))) % 2 == 1


def holds_data_only(entry: Entry) -> bool:
    """Whether the key is one that never names a program (see the lists above)."""
    if entry.section in _WHOLE_SECTIONS:
        return True
    if entry.subsection is None:
        return (entry.section, entry.name) in _PLAIN
    return (entry.section, entry.name) in _UNDER_ANY


def program_keys(data: bytes, also_data: Callable[[Entry], bool] | None = None) -> list[str]:
    """What in a config file may name a program: its keys outside the data-only lists (as
    `key = value`) and not passed by `also_data`, or why it cannot be read. Empty: the file
    names no program."""
    try:
        entries = read_entries(data)
    except Unreadable as e:
        return [f"{e} (git may read more there than xclaw can check)"]
    return [
        e.shown()
        for e in entries
        if not holds_data_only(e) and not (also_data is not None and also_data(e))
    ]
