"""The words of a shell command line, as far as a "commands that start with ..." grant
may trust them.

A grant names the first words of a command (``npm install``) and covers later commands
that start with the same words. It may only cover what the user saw, so it applies to one
simple command alone: a line that chains or nests commands (``;``, ``&&``, ``||``, ``|``,
``&``, parentheses, ``$(...)``, backticks, several lines) or starts with a variable
assignment has no words here, gets no prefix choice, and is never covered by a prefix
grant (only by "allow once" or a session-wide grant). Redirections are kept: inside the
sandbox they can only write where the command could write anyway.
"""

import re
import shlex

_REDIRECTIONS = frozenset({">", ">>", "<", ">&", "<&", "&>", ">|", "&>>"})
_NESTING = re.compile(r"`|\$\(|<\(|>\(|[\n\r]")
_SUBCOMMAND = re.compile(r"[a-z][a-z0-9_-]*")
_ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=")


def words(command):
    """The words of ``command`` when it is one simple command, else None."""
    if not isinstance(command, str) or _NESTING.search(command):
        return None
    lexer = shlex.shlex(command.strip(), posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    try:
        tokens = list(lexer)
    except ValueError:  # an unclosed quote
        return None
    out = []
    for token in tokens:
        if token and set(token) <= set("();<>|&"):
            if token not in _REDIRECTIONS:
                return None
        out.append(token)
    if not out or _ASSIGNMENT.match(out[0]) or out[0] in _REDIRECTIONS:
        return None
    return out


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
