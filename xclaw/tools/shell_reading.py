"""[tools] Reading a shell command well enough to know it only runs listed commands with literal
words.

Two readers must agree, or the command is not safe (which only means a human is asked):

1. bashlex, a port of bash's own parser, gives the structure: lists (`;` `&&` `||`), pipelines
   and simple commands. Anything else — subshells, groups, functions, loops, conditionals,
   `!`, background jobs `&`, variable assignments, here-documents — is NotSafe. Of the
   redirections only `>/dev/null` (any descriptor), descriptor copies (`2>&1`) and input
   from a named file (`< notes.txt`) pass.
2. A small literal scanner reads each word's source text again: outside single quotes a `$`
   or a backtick is an expansion (parameter, arithmetic, `$'…'`, command substitution: bash
   has many spellings, e.g. `${x@P}` runs the prompt expansion of a value that can hold
   `$(…)`), and outside any quotes `* ? [ ] { } ~` are pathname, brace or tilde expansion
   (a file named `--compress-program=sh` turns `sort *` into running sh). Each word it reads
   must equal bashlex's word, so that a divergence between bashlex and bash is caught rather
   than trusted.

The result is the simple commands as literal argument lists: exactly what bash would pass.
"""

from __future__ import annotations

from typing import Any


class NotSafe(Exception):
    """A shell command that cannot run without asking; the message says why."""


# Control characters other than newline and tab have no business in a command read by eye.
_CONTROL = {chr(c) for c in range(0x20) if chr(c) not in "\n\t"} | {"\x7f"}
_EXPANDING_UNQUOTED = set("*?[]{}~")


# bashlex is pure Python (20,000 words take seconds, on the event loop): longer commands are
# asked rather than read.
MAX_READ_CHARS = 16_384


def simple_commands(command: str) -> list[list[str]]:
    """The simple commands of `command` as literal word lists; NotSafe for anything else."""
    if len(command) > MAX_READ_CHARS:
        raise NotSafe(f"is too long to read ({len(command)} characters; {MAX_READ_CHARS} at most)")
    if any(c in _CONTROL for c in command):
        raise NotSafe("contains control characters")
    if not command.strip():
        return []
    # Here, not at the top: bashlex builds its parser tables as it is imported (a noticeable
    # part of every xclaw process's start), and most processes never read a command.
    import bashlex
    import bashlex.errors

    try:
        trees = bashlex.parse(command)
    except (
        bashlex.errors.ParsingError,
        NotImplementedError,
        IndexError,
        TypeError,
        AttributeError,
        ValueError,
        AssertionError,
        RecursionError,
    ) as e:
        raise NotSafe(f"cannot be parsed safely ({_short(e)})") from None
    out: list[list[str]] = []
    for tree in trees:
        _walk(tree, command, out)
    return [c for c in out if c]


def _short(e: BaseException) -> str:
    text = str(e).splitlines()[0] if str(e) else type(e).__name__
    return text[:80]


def _walk(node: Any, src: str, out: list[list[str]]) -> None:
    kind = node.kind
    if kind == "list":
        for part in node.parts:
            if part.kind == "operator":
                if part.op == "&":
                    raise NotSafe("starts a background job (&)")
                if part.op not in (";", "&&", "||", "\n"):
                    raise NotSafe(f"uses the operator {part.op!r}")
            else:
                _walk(part, src, out)
    elif kind == "pipeline":
        for part in node.parts:
            if part.kind == "pipe":
                continue
            if part.kind == "reservedword":
                raise NotSafe(f"uses {part.word!r}")
            _walk(part, src, out)
    elif kind == "command":
        out.append(_command(node, src))
    elif kind == "compound":
        raise NotSafe("uses a subshell, group or compound command")
    elif kind == "function":
        raise NotSafe("defines a function")
    else:
        raise NotSafe(f"uses shell syntax xclaw does not read ({kind})")


def _command(node: Any, src: str) -> list[str]:
    words: list[str] = []
    for part in node.parts:
        if part.kind == "assignment":
            raise NotSafe("sets environment variables")
        if part.kind == "redirect":
            _redirect(part, src)
        elif part.kind == "word":
            words.append(_word(part, src))
        else:
            raise NotSafe(f"uses shell syntax xclaw does not read ({part.kind})")
    return words


def _redirect(node: Any, src: str) -> None:
    kind = node.type
    if getattr(node, "heredoc", None) is not None or kind in ("<<", "<<-", "<<<"):
        raise NotSafe("uses a here-document")
    target = node.output
    if kind == ">&" and isinstance(target, int):
        return  # 2>&1: a descriptor copy
    if kind in (">", ">>", "&>", ">|", ">&") and getattr(target, "kind", "") == "word":
        if _word(target, src) == "/dev/null":
            return
        raise NotSafe("redirects output to a file")
    if kind == "<" and getattr(target, "kind", "") == "word":
        name = _word(target, src)
        if name.startswith(("/dev/tcp/", "/dev/udp/")):
            raise NotSafe("opens a network connection")
        return  # reading a file, as `cat FILE` would
    raise NotSafe(f"uses the redirection {kind!r}")


def _word(node: Any, src: str) -> str:
    if getattr(node, "parts", None):
        kinds = {p.kind for p in node.parts}
        if "commandsubstitution" in kinds:
            raise NotSafe("uses command substitution")
        if "processsubstitution" in kinds:
            raise NotSafe("uses process substitution")
        if "tilde" in kinds:
            raise NotSafe("uses tilde expansion")
        raise NotSafe("uses parameter expansion ($)")
    raw = src[node.pos[0] : node.pos[1]]
    literal = read_literal(raw)
    if literal != node.word:
        raise NotSafe(f"has a word that cannot be read unambiguously ({raw[:40]!r})")
    return literal


def read_literal(raw: str) -> str:
    """The value of one shell word that may only hold literal text: '…', "…" without `$` or
    backticks, and backslash escapes. NotSafe for any expansion."""
    out: list[str] = []
    i, n = 0, len(raw)
    while i < n:
        c = raw[i]
        if c == "'":
            close = raw.find("'", i + 1)
            if close == -1:
                raise NotSafe("has an unterminated quote")
            out.append(raw[i + 1 : close])
            i = close + 1
        elif c == '"':
            i += 1
            while True:
                if i >= n:
                    raise NotSafe("has an unterminated quote")
                d = raw[i]
                if d == '"':
                    i += 1
                    break
                if d in "$`":
                    raise NotSafe(
                        "uses command substitution"
                        if d == "`" or raw.startswith("$(", i)
                        else "uses parameter expansion ($)"
                    )
                if d == "\\" and i + 1 < n and raw[i + 1] in '$`"\\\n':
                    out.append(raw[i + 1])
                    i += 2
                    continue
                out.append(d)
                i += 1
        elif c == "\\":
            if i + 1 < n:
                out.append(raw[i + 1])
            i += 2
        elif c == "`" or (c == "$" and raw.startswith("$(", i)):
            raise NotSafe("uses command substitution")
        elif c == "$":
            raise NotSafe("uses parameter expansion ($)")
        elif c in _EXPANDING_UNQUOTED:
            raise NotSafe(f"uses pathname, brace or tilde expansion ({c!r} unquoted)")
        else:
            out.append(c)
            i += 1
    return "".join(out)
