"""``--allow`` patterns: exec's answers to the questions an editor would get.

A pattern is ``TOOL`` (every call of that tool) or ``TOOL:GLOB``; the glob (``fnmatch``,
``*`` crosses ``/``) matches the path relative to the root for file tools (every path the
call names), the command line for ``shell``, the host for ``web_fetch``. Nothing matches:
the question is refused (fail closed).
"""

import fnmatch
import os
from urllib.parse import urlsplit


class PatternError(ValueError):
    pass


def parse(patterns):
    rules = []
    for text in patterns:
        tool, sep, glob = text.partition(":")
        if not tool.strip() or (sep and not glob):
            raise PatternError(f'--allow "{text}": expected TOOL or TOOL:GLOB')
        rules.append((text, tool.strip(), glob if sep else None))
    return rules


def tool_of(params):
    """The tool's name: the question's description begins with it (acp/v2/permissions.py)."""
    description = params.get("description") or ""
    return description.split(" ", 1)[0].strip()


def subjects(tool, params, root):
    """What a glob is matched against for this question."""
    call = (params.get("subject") or {}).get("toolCall") or {}
    raw = call.get("rawInput") if isinstance(call.get("rawInput"), dict) else {}
    if tool == "shell":
        return [str(raw.get("command", ""))]
    if tool == "web_fetch":
        return [urlsplit(str(raw.get("url", ""))).hostname or ""]
    paths = [loc.get("path") for loc in call.get("locations") or [] if loc.get("path")]
    if not paths:
        paths = [raw[key] for key in ("path", "file_path", "source", "destination")
                 if isinstance(raw.get(key), str)]
    return [os.path.relpath(p, root) if os.path.isabs(p) else p for p in paths]


def decide(rules, params, root):
    """``(option, rule)``: the option chosen (an offered allow_once option, else the
    reject option, else None) and the text of the rule that decided (None: none matched)."""
    tool = tool_of(params)
    options = params.get("options") or []
    rule = None
    for text, name, glob in rules:
        if name != tool:
            continue
        if glob is None:
            rule = text
            break
        found = subjects(tool, params, root)
        if found and all(fnmatch.fnmatchcase(item, glob) for item in found):
            rule = text
            break
    wanted = ("allow_once",) if rule else ("reject_once", "reject_always")
    option = next((o for o in options if o.get("kind") in wanted), None)
    if option is None and rule:  # no allow-once on offer: refuse rather than grant more
        option, rule = next((o for o in options if o.get("kind", "").startswith("reject")),
                            None), None
    return option, rule
