"""Prompt content -> model text, and the system prompt."""

from datetime import date

from term2acp.core.text import scrub_text  # noqa: F401 - re-exported for the agent


class PromptError(ValueError):
    """Prompt content the agent cannot accept; the message is user-facing."""


def prompt_to_text(blocks):
    """Join ACP content blocks into the user message the model sees."""
    if not blocks:
        raise PromptError("prompt must contain text")
    parts = []
    for block in blocks:
        kind = block.get("type")
        if kind == "text":
            parts.append(block["text"])
        elif kind == "resource_link":
            label = block.get("title") or block.get("name")
            parts.append(f"[Resource: {label} <{block['uri']}>]")
        elif kind == "resource" and isinstance(block["resource"].get("text"), str):
            resource = block["resource"]
            parts.append(f"<resource uri=\"{resource.get('uri', '')}\">\n{resource['text']}\n</resource>")
        elif isinstance(kind, str) and kind.startswith("_"):
            continue  # implementation extensions of other agents: ignored
        else:
            label = "resource (blob)" if kind == "resource" else kind
            raise PromptError(f"Unsupported prompt content block: {label}")
    text = "\n".join(parts)
    if not text.strip():
        raise PromptError("prompt must contain text")
    return scrub_text(text)


def title_from(text, limit=80):
    """The user's words as one line (whitespace and line breaks collapsed), at most
    ``limit`` characters."""
    line = " ".join((text or "").split())
    return line if len(line) <= limit else line[:limit - 1].rstrip() + "…"


def system_prompt(root, tool_names, sandbox_note):
    import platform

    tools = ", ".join(sorted(tool_names)) or "none"
    return (
        "You are term2, a careful coding agent working inside a code editor.\n"
        f"Workspace root: {root}\n"
        f"Environment: {platform.system()} {platform.release()}; date {date.today().isoformat()}.\n"
        f"Tools: {tools}.\n"
        "Rules:\n"
        "- Relative paths resolve against the workspace root. Reads and edits inside it need no "
        "approval; anything outside asks the user, who may refuse.\n"
        "- Read a file before editing it; edit with exact search/replace; never invent file "
        "contents.\n"
        f"- Shell commands run in a sandbox: {sandbox_note}\n"
        "- If a tool call is denied or fails, adapt instead of retrying the same call.\n"
        "- Be concise. Say what you changed and why."
    )
