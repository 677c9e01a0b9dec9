"""The words of a shell command line, as far as a "commands that start with ..." grant
may trust them.

A grant names the first words of a command (``npm install``) and covers later commands
that start with the same words. It may only cover what the user saw, so it applies to one
simple command alone, read the way bash reads it. The lexer below models a small part of
bash and refuses (no words: no prefix choice, never covered by a prefix grant, only by
"allow once" or a session-wide grant) every line that uses anything else bash treats
specially:

* outside quotes, a word may hold only letters, digits and ``-_./:=@%+,^``: ``;``, ``&``,
  ``|``, parentheses, ``$`` (variables, ``$(...)``, ``$'...'``), backticks, ``\\``
  (escapes, line continuations), ``#`` (a comment at a word's start, and shlex's reading
  of one inside a word), ``{}`` (brace expansion, groups), ``~``, globs ``*?[]``, ``!``
  (negation, history), other characters and anything not ASCII all refuse the line;
* inside single quotes anything but a control character; inside double quotes the same
  except ``$``, backticks, ``\\`` and ``!``, which bash still expands there;
* a line of several lines, a first word that assigns a variable, or a line that starts
  with a redirection has no words.

Redirections (``>``, ``>>``, ``<``, ``2>&1``, ``&>``, ``>|`` ...) are understood and left
out of the words: inside the sandbox they can only write where the command could write
anyway. Here-documents and here-strings (``<<``, ``<<<``) and process substitution refuse.
"""

import re
import shlex
import unicodedata

_REDIRECTIONS = frozenset({">", ">>", "<", ">&", "<&", "&>", ">|", "&>>", "<>"})
_PLAIN = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./:=@%+,^")
_OPERATOR = frozenset("<>&|;()")
_DOUBLE_QUOTED_SPECIAL = frozenset("$`\\!")
_BLANK = frozenset(" \t")
_SUBCOMMAND = re.compile(r"[a-z][a-z0-9_-]*")
_ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\+?=")


class _Refused(Exception):
    """The line uses something this lexer does not model."""


def words(command):
    """The words of ``command`` when it is one simple command bash reads as this lexer
    does, else None."""
    if not isinstance(command, str):
        return None
    try:
        tokens = _tokens(command.strip(" \t"))
    except _Refused:
        return None
    out, expect_target = [], False
    for kind, text in tokens:
        if kind == "op":
            if expect_target or not out:  # two operators in a row, or a leading one
                return None
            expect_target = True
        elif expect_target:
            expect_target = False  # the redirection's target: not a word of the command
        else:
            out.append(text)
    if expect_target or not out or _ASSIGNMENT.match(out[0]):
        return None
    return out


def _tokens(line):
    """(kind, text) pairs: "word" with quotes removed, or "op" for a redirection."""
    tokens, i, n = [], 0, len(line)
    word, in_word, plain_digits = [], False, True
    while i < n:
        char = line[i]
        if char in _BLANK:
            if in_word:
                tokens.append(("word", "".join(word)))
            word, in_word, plain_digits = [], False, True
            i += 1
        elif char == "'":
            end = line.find("'", i + 1)
            if end < 0:
                raise _Refused
            _check_quoted(line[i + 1:end], ())
            word.append(line[i + 1:end])
            in_word, plain_digits, i = True, False, end + 1
        elif char == '"':
            end = line.find('"', i + 1)
            if end < 0:
                raise _Refused
            _check_quoted(line[i + 1:end], _DOUBLE_QUOTED_SPECIAL)
            word.append(line[i + 1:end])
            in_word, plain_digits, i = True, False, end + 1
        elif char in _OPERATOR:
            j = i
            while j < n and line[j] in _OPERATOR:
                j += 1
            op = line[i:j]
            if op not in _REDIRECTIONS:
                raise _Refused
            # ``2>``: bash reads unquoted digits right before ``<`` or ``>`` as the
            # descriptor to redirect, not as a word
            if in_word and not (plain_digits and op[0] in "<>"):
                tokens.append(("word", "".join(word)))
            if op.endswith("&") and j < n and (line[j].isdigit() or line[j] == "-"):
                k = j  # ``>&2``, ``2>&1``, ``>&-``: the target is the descriptor
                while k < n and line[k] not in _BLANK and line[k] not in _OPERATOR:
                    k += 1
                if line[j:k] != "-" and not line[j:k].isdigit():
                    raise _Refused
                tokens.extend((("op", op), ("word", line[j:k])))
                j = k
            else:
                tokens.append(("op", op))
            word, in_word, plain_digits, i = [], False, True, j
        elif char in _PLAIN:
            word.append(char)
            plain_digits = plain_digits and char.isdigit()
            in_word, i = True, i + 1
        else:  # ``#``, ``$``, ``\``, ``{``, ``~``, ``*``, ``!``, newlines, ...
            raise _Refused
    if in_word:
        tokens.append(("word", "".join(word)))
    return tokens


def _check_quoted(text, special):
    for char in text:  # control and format characters (bidi) hide what the user reads
        if char in special or unicodedata.category(char)[0] == "C":
            raise _Refused


def prefix_of(command):
    """The first words a grant for ``command`` names: the program, and its subcommand when
    the second word looks like one (``npm install``, ``git clone``, ``cargo build``;
    ``curl`` alone for ``curl -s http://...``). None: no prefix can be offered."""
    parts = words(command)
    if parts is None:
        return None
    if len(parts) > 1 and _SUBCOMMAND.fullmatch(parts[1]):
        return (parts[0], parts[1])
    return (parts[0],)


def shown_prefix(prefix):
    """A prefix as the user reads it in a choice's label (quoted as a shell would)."""
    return " ".join(shlex.quote(word) for word in prefix) if prefix else None
