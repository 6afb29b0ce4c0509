"""[tools] Per-command allowlists of options for the commands that may run without asking.

A deny list of "options that write" loses to the next spelling: GNU tools accept any
unambiguous prefix of a long option (`sort --outp=F` is `--output=F`), options hide in short
clusters (`sort -uoF`), and some options run programs (`sort --compress-program=sh`,
`find -exec`). So each command lists the options it may have; anything else — an unknown
option, an abbreviation, a cluster with an unlisted letter — makes the command unsafe.

A command in `approval.safe_commands` without a rule here may be given only the options that
its entry lists after the command words (`"pytest -q -x"` allows `pytest -q tests/`), none
otherwise.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from xclaw.tools.shell_reading import NotSafe


@dataclass(frozen=True)
class CommandRule:
    """The options a command may be given. `flags`: short options without a value;
    `valued`: short options taking one (`-n 5`, `-n5`); `long`/`long_valued` likewise
    (`--lines=5`, `--lines 5`). `numeric`: `-5` means a count (head, tail, grep context).
    `long_optional`: long options whose value is optional, so only `--color` or `--color=X`
    (getopt never takes the next word as their value: treating it so would let an option hide
    there). `max_operands`: how many non-option words at most (None: any). `operand_ok`: a check on
    each operand. `any_args`: the command reads no options that matter (echo, true).
    `own_clusters`: the command parses short-option clusters by hand, not with getopt: every
    valued letter of a cluster takes the next word (tree: `-Lo 1 F` is `-L 1 -o F`), so a
    valued letter must end its cluster and take the next word, nothing else."""

    flags: str = ""
    valued: str = ""
    long: frozenset[str] = frozenset()
    long_valued: frozenset[str] = frozenset()
    long_optional: frozenset[str] = frozenset()
    numeric: bool = False
    max_operands: int | None = None
    operand_ok: Callable[[str], bool] | None = None
    any_args: bool = False
    own_clusters: bool = False
    custom: Callable[[list[str]], None] | None = field(default=None)


def _longs(text: str) -> frozenset[str]:
    return frozenset(text.split())


def _find(args: list[str]) -> None:
    """find PATH… EXPRESSION: only tests and printing actions, never -exec/-delete/-fprint…"""
    i = 0
    while i < len(args) and args[i] in ("-H", "-L", "-P"):
        i += 1
    while i < len(args) and not args[i].startswith("-") and args[i] not in ("(", "!", ")"):
        i += 1  # the starting points
    no_value = {
        "-print",
        "-print0",
        "-ls",
        "-empty",
        "-true",
        "-false",
        "-prune",
        "-quit",
        "-depth",
        "-xdev",
        "-mount",
        "-follow",
        "-readable",
        "-writable",
        "-executable",
        "-nouser",
        "-nogroup",
        "-o",
        "-or",
        "-a",
        "-and",
        "-not",
        "!",
        "(",
        ")",
        ",",
        "-noleaf",
    }
    one_value = {
        "-name",
        "-iname",
        "-path",
        "-ipath",
        "-wholename",
        "-iwholename",
        "-regex",
        "-iregex",
        "-type",
        "-xtype",
        "-maxdepth",
        "-mindepth",
        "-size",
        "-mtime",
        "-mmin",
        "-atime",
        "-amin",
        "-ctime",
        "-cmin",
        "-newer",
        "-anewer",
        "-cnewer",
        "-perm",
        "-user",
        "-group",
        "-uid",
        "-gid",
        "-links",
        "-inum",
        "-samefile",
        "-regextype",
        "-printf",
        "-lname",
        "-ilname",
        "-used",
    }
    while i < len(args):
        a = args[i]
        if a in no_value:
            i += 1
        elif a in one_value:
            if i + 1 >= len(args):
                raise NotSafe(f"runs 'find' with {a} and no value")
            i += 2
        else:
            raise NotSafe(f"runs 'find' with {a!r}, which is not on its allowlist")


def _is_number(text: str) -> bool:
    return text.replace(".", "", 1).isascii() and text.replace(".", "", 1).isdigit()


_HEAD_TAIL = CommandRule(
    flags="qvzfF",
    valued="nc",
    numeric=True,
    long=_longs("--quiet --silent --verbose --zero-terminated"),
    long_valued=_longs("--lines --bytes"),
)
RULES: dict[str, CommandRule] = {
    "ls": CommandRule(
        flags="aAlhrtSRdFG1isnpQcuUvXxogkNLHmB",
        valued="wIT",
        long=_longs(
            "--all --almost-all --human-readable --reverse --recursive --directory --classify "
            "--inode --size --numeric-uid-gid --group-directories-first --full-time "
            "--no-group --literal --dereference --si --author --ignore-backups"
        ),
        long_valued=_longs("--sort --time-style --width --ignore --time"),
        long_optional=_longs("--color --colour"),
    ),
    "cat": CommandRule(
        flags="nAbeEsTtuv",
        long=_longs(
            "--number --show-all --number-nonblank --squeeze-blank --show-ends --show-tabs "
            "--show-nonprinting"
        ),
    ),
    "head": _HEAD_TAIL,
    "tail": _HEAD_TAIL,
    "wc": CommandRule(
        flags="lwcmL", long=_longs("--lines --words --bytes --chars --max-line-length")
    ),
    "pwd": CommandRule(flags="LP", max_operands=0),
    "echo": CommandRule(any_args=True),
    "true": CommandRule(any_args=True),
    "whoami": CommandRule(max_operands=0),
    "grep": CommandRule(
        flags="iEFGPvwxcLlnhHoqsrRzZaIUbyT",
        valued="eABCmf",
        numeric=True,
        long=_longs(
            "--ignore-case --extended-regexp --fixed-strings --perl-regexp --basic-regexp "
            "--invert-match --word-regexp --line-regexp --count --files-with-matches "
            "--files-without-match --line-number --with-filename --no-filename "
            "--only-matching --quiet --silent --no-messages --recursive "
            "--dereference-recursive --null --null-data --text --byte-offset --initial-tab "
            "--no-ignore-case"
        ),
        long_valued=_longs(
            "--regexp --file --after-context --before-context --context --max-count "
            "--include --exclude --exclude-dir --binary-files --label"
        ),
        long_optional=_longs("--color --colour"),
    ),
    "find": CommandRule(custom=_find),
    "sort": CommandRule(
        flags="bdfgiMhnRrVcCsuz",
        valued="ktS",
        long=_longs(
            "--reverse --numeric-sort --human-numeric-sort --unique --ignore-case --stable "
            "--version-sort --check --general-numeric-sort --month-sort "
            "--ignore-leading-blanks --dictionary-order --zero-terminated --random-sort "
            "--ignore-nonprinting"
        ),
        long_valued=_longs("--key --field-separator --buffer-size"),
    ),
    "uniq": CommandRule(
        flags="cdDiuz",
        valued="fsw",
        long=_longs("--count --repeated --ignore-case --unique --zero-terminated"),
        long_valued=_longs("--skip-fields --skip-chars --check-chars"),
        max_operands=1,  # a second operand is an output file
    ),
    "date": CommandRule(
        flags="uR",
        valued="d",
        long=_longs("--utc --universal --rfc-email"),
        long_valued=_longs("--date"),
        max_operands=1,
        operand_ok=lambda a: a.startswith("+"),  # `date MMDDhhmm` would set the clock
    ),
    "stat": CommandRule(
        flags="Lft",
        valued="c",
        long=_longs("--dereference --file-system --terse"),
        long_valued=_longs("--format --printf"),
    ),
    "file": CommandRule(
        flags="bLiknNzZhp",
        long=_longs(
            "--brief --mime --mime-type --mime-encoding --dereference --no-dereference "
            "--keep-going --no-pad --uncompress"
        ),
    ),
    "diff": CommandRule(
        flags="uqrNaiwbBEytsdpT",
        valued="UCx",
        long=_longs(
            "--brief --recursive --new-file --text --ignore-case --ignore-all-space "
            "--ignore-space-change --ignore-blank-lines --side-by-side "
            "--report-identical-files --minimal --show-c-function --expand-tabs"
        ),
        long_valued=_longs("--exclude --width"),
        long_optional=_longs("--unified --context --color"),
    ),
    "du": CommandRule(
        flags="ahscSxLbkmD",
        valued="d",
        long=_longs(
            "--all --human-readable --summarize --total --bytes --apparent-size "
            "--one-file-system --dereference --si --separate-dirs"
        ),
        long_valued=_longs("--max-depth --exclude"),
    ),
    "df": CommandRule(
        flags="hHTiPklax",
        long=_longs("--human-readable --si --print-type --inodes --portability --local --all"),
        long_valued=_longs("--type --exclude-type"),
    ),
    "tree": CommandRule(
        flags="adfilsughDFprtCAnNqQv",
        valued="LPI",
        long=_longs("--noreport --dirsfirst --du --prune"),
        long_valued=_longs("--filelimit"),
        own_clusters=True,  # tree's own parser: `-Lo 1 M` writes its listing to M
    ),
    "sleep": CommandRule(max_operands=1, operand_ok=_is_number),
    # git's read-only subcommands, for when a user lists them; never --output or --ext-diff.
    "git status": CommandRule(
        flags="sbuv",
        long=_longs("--short --branch --long --verbose --ignored --no-renames"),
        long_optional=_longs("--untracked-files --porcelain"),
    ),
    "git log": CommandRule(
        flags="p",
        valued="n",
        numeric=True,
        long=_longs(
            "--oneline --stat --shortstat --graph --decorate --all --reverse --name-only "
            "--name-status --no-merges --first-parent --patch --no-color --abbrev-commit"
        ),
        long_valued=_longs("--max-count --since --until --author --grep --format"),
        long_optional=_longs("--pretty"),
    ),
    "git diff": CommandRule(
        flags="pRw",
        valued="U",
        long=_longs(
            "--stat --shortstat --cached --staged --name-only --name-status --no-color "
            "--ignore-all-space --ignore-space-change --no-ext-diff --no-textconv --patch"
        ),
        long_valued=_longs("--diff-filter"),
        long_optional=_longs("--unified"),
    ),
}


def rule_for(entry: tuple[str, ...]) -> CommandRule:
    """The rule of a safe-command entry: the built-in one for its command words, else one
    allowing exactly the options the entry lists (`pytest -q -x`)."""
    words = tuple(w for w in entry if not w.startswith("-"))
    options = [w for w in entry if w.startswith("-")]
    built_in = RULES.get(" ".join(words))
    if built_in is not None and not options:
        return built_in
    flags = "".join(o[1:] for o in options if not o.startswith("--") and len(o) == 2)
    return CommandRule(
        flags=flags, long=frozenset(o.split("=")[0] for o in options if o.startswith("--"))
    )


def check_arguments(command: str, rule: CommandRule, args: Iterable[str]) -> None:
    """NotSafe unless every argument is an allowed option (with its value) or an operand."""
    args = list(args)
    if rule.any_args:
        return
    if rule.custom is not None:
        rule.custom(args)
        return
    operands: list[str] = []
    i = 0
    end_of_options = False
    while i < len(args):
        a = args[i]
        i += 1
        if end_of_options or a == "-" or not a.startswith("-"):
            operands.append(a)
        elif a == "--":
            end_of_options = True
        elif a.startswith("--"):
            name, eq, _ = a.partition("=")
            if name in rule.long_valued:
                if not eq:
                    if i >= len(args):
                        raise NotSafe(f"runs {command!r} with {name} and no value")
                    i += 1
            elif name in rule.long_optional or (name in rule.long and not eq):
                pass
            else:
                raise NotSafe(f"runs {command!r} with {a!r}, which is not on its allowlist")
        elif rule.numeric and a[1:].isascii() and a[1:].isdigit():
            pass
        else:
            cluster = a[1:]
            for j, letter in enumerate(cluster):
                if letter in rule.valued:
                    if rule.own_clusters and j != len(cluster) - 1:
                        raise NotSafe(
                            f"runs {command!r} with -{letter} inside {a!r} (it reads its "
                            "options by hand: write the value as the next word)"
                        )
                    if j == len(cluster) - 1:  # the value is the next word
                        if i >= len(args):
                            raise NotSafe(f"runs {command!r} with -{letter} and no value")
                        i += 1
                    break  # the rest of the cluster is the value
                if letter not in rule.flags:
                    raise NotSafe(
                        f"runs {command!r} with -{letter} (in {a!r}), which is not on its allowlist"
                    )
    if rule.max_operands is not None and len(operands) > rule.max_operands:
        raise NotSafe(
            f"runs {command!r} with {len(operands)} operands (at most "
            f"{rule.max_operands}: another would be written to)"
        )
    if rule.operand_ok is not None:
        for op in operands:
            if not rule.operand_ok(op):
                raise NotSafe(f"runs {command!r} with the operand {op!r}")
