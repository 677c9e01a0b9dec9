"""Markdown with YAML front matter (agent files, Claude Code's among them): the leading
``---`` block as a dict and the body after it. PyYAML's ``safe_load`` reads the block (no
tags, no objects); it is imported when the first file with front matter is read."""


class FrontMatterError(ValueError):
    """The front matter is not a YAML mapping; the message says where."""


def split(text):
    """``(fields, body)`` of ``text``: ``fields`` is ``{}`` when it has no front matter."""
    if text.startswith("\ufeff"):
        text = text[1:]
    lines = text.splitlines(keepends=True)
    if not lines or lines[0].strip() != "---":
        return {}, text
    for index in range(1, len(lines)):
        if lines[index].strip() in ("---", "..."):
            head, body = "".join(lines[1:index]), "".join(lines[index + 1:])
            break
    else:
        raise FrontMatterError("the front matter has no closing '---' line")
    import yaml  # noqa: PLC0415 - only files with front matter need it

    try:
        fields = yaml.safe_load(head) if head.strip() else {}
    except yaml.YAMLError as exc:
        raise FrontMatterError(f"the front matter is not valid YAML ({exc})".replace("\n", " ")) \
            from None
    if not isinstance(fields, dict):
        raise FrontMatterError("the front matter is not a mapping of keys to values")
    return fields, body.lstrip("\n")
