"""Patterns without backtracking: grep expressions, globs and .gitignore rules, all on RE2.

Patterns come from the model (grep, glob, include/exclude) and from the repository
(``.gitignore``), so none of them may be able to pin the CPU: Python's ``re`` backtracks
(``(a+)+b`` on a long line never returns, and nothing can interrupt it). RE2 matches in
time linear in the subject, so every match here is bounded by the subject's size and the
compiled program's size (itself bounded by ``max_mem``). RE2 has no backreferences and
no lookaround; a grep pattern that uses them fails with a message that says so.

Subjects are UTF-8 bytes. Text that cannot be encoded (a file name with a non-UTF-8
byte arrives surrogate-escaped) is matched with U+FFFD in place of each bad byte.

RE2 itself (its extension module, libre2 and the C++ runtime) is imported when a pattern is
first compiled, not with the tools: an agent that has not searched yet does not hold it
(it keeps the idle agent small).
"""

import functools

import gevent


@functools.cache
def _re2():
    """The ``re2`` module, imported where first needed (the first pattern compiled), in a
    slice of its own: the tools import this module, and an agent that has not searched yet
    does not hold RE2."""
    import re2  # noqa: PLC0415 (its extension module, libre2 and the C++ runtime: 2.6 MiB)

    gevent.idle()
    return re2


MAX_MEM = 8 << 20  # bytes of compiled program per pattern (RE2's default)
MAX_PROGRAM = 4000  # RE2 instructions in a grep program (``\pL+`` is about 1200)
MAX_GLOB = 1024  # characters in a glob pattern
MAX_RULE = 256  # characters in one .gitignore rule (longer lines are dropped)
MAX_RULES = 4096  # .gitignore rules read from one file
MAX_RULE_TEXT = 32 * 1024  # characters of rules read from one file
SET_TEXT = 4096  # characters of rules compiled into one RE2 set (one short hub slice)


class PatternError(ValueError):
    """A pattern RE2 cannot compile; the message says why, for the model."""


def options(**values):
    opts = _re2().Options()
    opts.log_errors = False  # RE2 would print every bad pattern on stderr
    opts.max_mem = MAX_MEM
    for name, value in values.items():
        setattr(opts, name, value)
    return opts


def subject(text):
    """UTF-8 bytes of ``text``; surrogate-escaped bytes become U+FFFD."""
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        raw = text.encode("utf-8", "surrogateescape")
        return raw.decode("utf-8", "replace").encode("utf-8")


# ---------------------------------------------------------------- grep
_UNSUPPORTED = (
    *((f"invalid escape sequence: \\{d}", f"a backreference (\\{d})") for d in "123456789"),
    ("invalid escape sequence: \\Z", "\\Z (use \\z for the end of the text)"),
    ("invalid escape sequence: \\", "an escape sequence RE2 does not know"),
    ("invalid perl operator: (?=", "lookahead (?=...)"),
    ("invalid perl operator: (?!", "negative lookahead (?!...)"),
    ("invalid perl operator: (?<", "lookbehind (?<=...) or (?<!...)"),
    ("invalid perl operator: (?>", "an atomic group (?>...)"),
    ("bad repetition operator: *+", "a possessive quantifier"),
    ("bad repetition operator: ++", "a possessive quantifier"),
    ("bad repetition operator: ?+", "a possessive quantifier"),
    ("pattern too large", "a pattern this large (more than 8 MiB compiled)"),
    ("invalid repetition size", "a repetition count above 1000"),
)


def compile_grep(pattern, fixed=False, ignore_case=False, multiline=False):
    """An RE2 program for grep: multi-line anchors, never matching across a newline unless
    ``multiline`` (then ``\\n``, ``\\s`` and classes may; ``.`` only with ``(?s)``)."""
    opts = options(never_nl=not multiline, never_capture=True, literal=fixed,
                   case_sensitive=not ignore_case)
    source = subject(pattern) if fixed else b"(?m)" + subject(pattern)
    re2 = _re2()
    try:
        regex = re2.compile(source, opts)
    except re2.error as exc:
        reason = _reason(exc)
        for needle, what in _UNSUPPORTED:
            if needle in reason:
                raise PatternError(
                    f"grep patterns use RE2 syntax, which never backtracks: {what} is not "
                    f"supported ({reason}). Rewrite the pattern without it, or set "
                    "fixed_strings to true to search for the text literally.") from None
        raise PatternError(f"invalid regular expression {pattern!r}: {reason}. Fix it, or set "
                           "fixed_strings to true to search for the text literally.") from None
    if regex.programsize > MAX_PROGRAM:
        raise PatternError(
            f"the pattern is too complex to search in bounded time (it compiles to "
            f"{regex.programsize} RE2 instructions; the limit is {MAX_PROGRAM}). Use smaller "
            "repetition counts such as {1000} or fewer Unicode classes, or search for a "
            "simpler pattern and narrow the results.")
    return regex


def _reason(exc):
    text = exc.args[0] if exc.args else ""
    text = text.decode("utf-8", "replace") if isinstance(text, bytes) else str(text)
    return text.replace(": (?m)", ": ", 1)


# ---------------------------------------------------------------- globs
def _literal(c):
    if c.isascii() and (c.isalnum() or c == "_"):
        return c
    if not c.isascii():
        return c
    if c.isprintable():
        return "\\" + c
    return f"\\x{{{ord(c):x}}}"


def _char_class(body):
    """An RE2 class from a glob class body; ``!`` or ``^`` negates; never matches ``/``."""
    negate = body[:1] in ("!", "^")
    body = body[1:] if negate else body
    out, i = [], 0
    while i < len(body):
        if i + 2 < len(body) and body[i + 1] == "-":
            out.append(f"{_literal(body[i])}-{_literal(body[i + 2])}")
            i += 3
            continue
        out.append(_literal(body[i]))
        i += 1
    return ("[^/" if negate else "[") + "".join(out) + "]"


def glob_regex(pattern, braces=True):
    """Translate a glob to an RE2 body: ``*`` and ``?`` stay in one path segment, a whole
    ``**`` segment spans directories, ``[...]`` is a class, ``{a,b}`` alternates."""
    out, i, n = [], 0, len(pattern)
    while i < n:
        c = pattern[i]
        if c == "*" and pattern.startswith("**", i) and (i == 0 or pattern[i - 1] == "/") \
                and (i + 2 == n or pattern[i + 2] == "/"):
            out.append("(?:.*/)?" if i + 2 < n else ".*")
            i += 3
            continue
        if c == "*":
            while pattern.startswith("*", i + 1):  # a run of stars is one star
                i += 1
            out.append("[^/]*")
        elif c == "?":
            out.append("[^/]")
        elif c == "[" and "]" in pattern[i + 2:]:
            end = pattern.index("]", i + 2)
            out.append(_char_class(pattern[i + 1:end]))
            i = end
        elif c == "{" and braces and (end := _brace_end(pattern, i)) > 0:
            parts = _split_top(pattern[i + 1:end])
            out.append("(?:" + "|".join(glob_regex(p, braces) for p in parts) + ")")
            i = end
        elif c == "\\" and i + 1 < n:
            i += 1
            out.append(_literal(pattern[i]))
        else:
            out.append(_literal(c))
        i += 1
    return "".join(out)


def _brace_end(pattern, start):
    depth = 0
    for i in range(start, len(pattern)):
        depth += {"{": 1, "}": -1}.get(pattern[i], 0)
        if depth == 0:
            return i if "," in pattern[start:i] else -1
    return -1


def _split_top(body):
    parts, depth, last = [], 0, 0
    for i, c in enumerate(body):
        depth += {"{": 1, "}": -1}.get(c, 0)
        if c == "," and depth == 0:
            parts.append(body[last:i])
            last = i + 1
    return parts + [body[last:]]


def compile_glob(pattern):
    """A whole-path RE2 program for a glob, or PatternError."""
    if len(pattern) > MAX_GLOB:
        raise PatternError(f"the glob is {len(pattern)} characters long; at most {MAX_GLOB} "
                           "are accepted.")
    if pattern.count("{") > 64:
        raise PatternError("the glob has more than 64 '{' alternations; simplify it.")
    opts = options(dot_nl=True)  # first: it loads RE2 in a slice of its own
    re2 = _re2()
    try:
        return re2.compile(subject(glob_regex(pattern)), opts)
    except re2.error as exc:
        raise PatternError(f"invalid glob {pattern!r}: {_reason(exc)}.") from None


def path_matcher(pattern):
    """A predicate on a relative path: patterns without a slash match the base name."""
    pattern = pattern.strip("/")
    program = compile_glob(pattern)._regexp  # noqa: SLF001
    anchored = _re2()._Anchor.ANCHOR_BOTH  # noqa: SLF001 (the wrapper's public fullmatch is slower)

    def matches(rel):
        data = subject(rel if "/" in pattern else rel.rpartition("/")[2])
        return program.Match(anchored, data, 0, len(data))[0] != (-1, -1)
    return matches


def name_glob(pattern):
    """The part of ``pattern`` that decides by the base name alone (``*.rs`` of both
    ``*.rs`` and ``**/*.rs``), or None when the directories matter too."""
    name = pattern.strip("/")
    while name.startswith("**/"):
        name = name[3:]
    return name if name and "/" not in name and name != "**" else None


_SPECIAL = frozenset("*?[]{}\\")


def name_test(glob):
    """A plain string test that says what RE2 says of a base name for the shapes most
    name globs have (``Makefile``, ``*.rs``, ``test_*``, ``*cache*``, ``*.{ts,tsx}``), or
    None for any other (``?``, classes, escapes, nested braces, odd characters)."""
    while "**" in glob:  # a run of stars is one star
        glob = glob.replace("**", "*")
    head, brace, rest = glob.partition("{")
    if brace:
        body, close, tail = rest.partition("}")
        if not close or "{" in body or "," not in body:
            return None
        choices = [head + choice + tail for choice in body.split(",")]
    else:
        choices = [glob]
    shapes = set()
    for choice in choices:
        stars = (choice[:1] == "*", choice[-1:] == "*" and len(choice) > 1)
        literal = choice[stars[0]:len(choice) - stars[1]]
        if not literal or any(c in _SPECIAL for c in literal) or "\ufffd" in literal \
                or not _encodes(literal):
            return None
        shapes.add((stars, literal))
    kinds = {stars for stars, _ in shapes}
    if len(kinds) != 1:
        return None
    literals = tuple(literal for _, literal in shapes)
    kind = kinds.pop()
    if kind == (True, False):
        return lambda name: name.endswith(literals)
    if kind == (False, True):
        return lambda name: name.startswith(literals)
    if kind == (False, False):
        return frozenset(literals).__contains__
    return lambda name: any(literal in name for literal in literals)


def _encodes(text):
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate: RE2 sees U+FFFD there
        return False
    return True


# ---------------------------------------------------------------- .gitignore
class IgnoreRules:
    """The rules of one ``.gitignore`` file, matched in one RE2 pass per set of rules.

    Repository content is hostile input: lines RE2 cannot compile and lines above
    MAX_RULE characters are dropped, at most MAX_RULES rules and MAX_RULE_TEXT characters
    of them count, and the rules compile in sets of about SET_TEXT characters with a
    yield to the hub between two sets, so compiling and matching stay short and bounded.
    """

    def __init__(self, lines):
        self.meta = []  # (negate, dir_only) per rule, in file order
        self.sets = []  # (first rule index, compiled RE2 set)
        batch, batch_text, total, count = [], 0, 0, 0
        for line in lines:
            rule = _rule(line)
            if rule is None:
                continue
            size = len(rule[0])
            count, total = count + 1, total + size
            if count > MAX_RULES or total > MAX_RULE_TEXT:
                break
            if batch and batch_text + size > SET_TEXT:
                self._add_set(batch)
                batch, batch_text = [], 0
            batch.append(rule)
            batch_text += size
        if batch:
            self._add_set(batch)

    def _add_set(self, rules):
        opts = options(dot_nl=True)  # first: it loads RE2 in a slice of its own
        re2 = _re2()
        compiled = re2.Set.FullMatchSet(opts)
        kept = []
        for body, negate, dir_only in rules:
            try:
                compiled.Add(subject(body))
            except re2.error:
                continue
            kept.append((negate, dir_only))
        if not kept:
            return
        try:
            compiled.Compile()
        except re2.error:
            return
        self.sets.append((len(self.meta), compiled))
        self.meta.extend(kept)
        gevent.idle()  # one set is one bounded slice of work; I/O runs in between

    def __bool__(self):
        return bool(self.sets)

    def decide(self, rel, is_dir):
        """True (ignored), False (re-included by ``!``) or None (no rule matches)."""
        data, best = subject(rel), -1
        for first, compiled in self.sets:
            for index in compiled.Match(data) or ():
                if not self.meta[first + index][1] or is_dir:
                    best = max(best, first + index)
        return None if best < 0 else not self.meta[best][0]


def _rule(line):
    """``(regex body, negate, dir_only)`` for one .gitignore line, or None."""
    line = line.rstrip("\n\r")
    if not line.strip() or line.startswith("#"):
        return None
    line = line.rstrip(" ") if not line.endswith("\\ ") else line
    negate = line.startswith("!")
    line = line[1:] if negate else line.removeprefix("\\")
    dir_only = line.endswith("/")
    line = line.rstrip("/")
    if not line or len(line) > MAX_RULE:
        return None
    prefix = "" if "/" in line else "(?:.*/)?"
    return prefix + glob_regex(line.lstrip("/"), braces=False), negate, dir_only
