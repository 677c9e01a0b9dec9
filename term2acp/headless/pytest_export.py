"""A recorded session as a pytest test (``term2acp sessions export ID --format pytest -o DIR``).

Writes ``DIR/test_<name>.py``, ``DIR/<name>/script.json`` (the model's recorded replies in
the scripted provider's format, played in order), ``DIR/<name>/workspace/`` (every file the
session read, searched or changed, as it was before the session first touched it; or a
copy of a whole folder) and ``DIR/<name>/recording.json`` (what the test asserts: per
prompt its tool calls, permission questions with the answers given, the final answer; and
the files as the session left them). The session's folder becomes ``<work>`` in all of
them, so the test runs on a fresh copy anywhere. The test itself is a call of the test kit
(``term2acp.testing.recorded.replay``).
"""

import base64
import json
import os
import re
import shutil

from term2acp.headless import render

PLACEHOLDER = "<work>"
TEST = '''"""{title}: a term2acp session recorded {when}, replayed as a test.

Made by `term2acp sessions export {sid} --format pytest`. The real agent runs on a fresh
copy of {name}/workspace with the model's recorded replies ({name}/script.json) and the
recorded permission answers; the tool calls, questions, answers and resulting files must
be the recorded ones ({name}/recording.json). No network, no key.
"""

import os

from term2acp.testing.recorded import replay

HERE = os.path.dirname(os.path.abspath(__file__))


def test_{name}(tmp_path):
    replay(os.path.join(HERE, "{name}"), tmp_path)
'''


# A folder of its own gets a pytest.ini: under gevent's patching (python -m gevent.monkey
# --module pytest) pytest's anyio plug-in fails at start-up, so it is left out.
CONFIGS = ("pytest.ini", ".pytest.ini", "pyproject.toml", "tox.ini", "setup.cfg")
INI = "[pytest]\naddopts = -p no:anyio -p no:cacheprovider\n"


class ExportError(Exception):
    pass


def name_for(document):
    session = document["session"]
    slug = re.sub(r"[^a-z0-9]+", "_", (session.get("title") or "").lower()).strip("_")[:40]
    slug = slug.strip("_")
    suffix = re.sub(r"[^a-z0-9]", "", session["id"].lower())[:8]
    return f"{slug}_{suffix}" if slug and not slug[0].isdigit() else f"session_{suffix}"


def write(document, directory, workspace=None):
    """Write the test into ``directory``; returns the test file's path."""
    name = name_for(document)
    case = os.path.join(directory, name)
    if os.path.exists(case):
        raise ExportError(f"{case} exists already: export into another folder")
    replies = [i for i in document.get("recording", []) if i["kind"] == "reply"]
    if not replies and any(r["kind"] == "user_message" for r in document.get("journal", [])):
        raise ExportError(f"session {document['session']['id']} has no recorded model "
                          "replies (it was recorded by an older term2acp): nothing to replay")
    root = document["session"]["cwd"]
    expected = recording(document, root)
    try:
        os.makedirs(os.path.join(case, "workspace"), exist_ok=True)
        if workspace:
            shutil.rmtree(os.path.join(case, "workspace"))
            shutil.copytree(workspace, os.path.join(case, "workspace"), symlinks=True)
        else:
            start_files(document, os.path.join(case, "workspace"))
        _json(os.path.join(case, "script.json"), script(document, root))
        _json(os.path.join(case, "recording.json"), expected)
        if not any(os.path.exists(os.path.join(directory, f)) for f in CONFIGS):
            with open(os.path.join(directory, "pytest.ini"), "w", encoding="utf-8") as fh:
                fh.write(INI)
        path = os.path.join(directory, f"test_{name}.py")
        session = document["session"]
        with open(path, "w", encoding="utf-8") as fh:
            fh.write(TEST.format(title=re.sub(r"[^\w .,:;!?()'-]", " ",
                                              session.get("title") or "session"),
                                 when=session.get("created_at"), sid=session["id"],
                                 name=name))
    except OSError as exc:
        raise ExportError(f"cannot write {case}: {exc.strerror}") from None
    return path


def _json(path, value):
    with open(path, "w", encoding="utf-8") as fh:
        json.dump(value, fh, ensure_ascii=False, indent=1)
        fh.write("\n")


def relocate(value, root):
    """``value`` with the session's folder replaced by the placeholder."""
    if isinstance(value, str):
        return re.sub(re.escape(root.rstrip("/")) + r"(?![\w.-])", PLACEHOLDER, value)
    if isinstance(value, list):
        return [relocate(v, root) for v in value]
    if isinstance(value, dict):
        return {k: relocate(v, root) for k, v in value.items()}
    return value


def script(document, root):
    replies = [item["payload"] for item in document.get("recording", [])
               if item["kind"] == "reply"]
    turns = [list(reply.get("steps") or []) for reply in replies]
    out = {"sequential": True, "turns": relocate(turns, root)}
    agents = [reply.get("agent") for reply in replies]
    if any(agents):  # sub-agents' replies: each goes to the child of its agent call
        out["agents"] = agents
    if document["session"].get("title"):
        out["title"] = document["session"]["title"]
    return out


def recording(document, root):
    """What the replay must reproduce."""
    prompts = []
    for turn in render.turns(document):
        calls = render.in_call_order([
            (p.get("call_id"), p.get("parent"), {"name": p.get("name") or p.get("title"),
                                                 "input": p.get("raw_input"),
                                                 "status": p.get("status")})
            for kind, p in turn["events"] if kind == "tool"])
        questions = [{"title": q.get("title") or "Allow this tool call?",
                      "options": [o.get("kind") for o in q.get("options", [])],
                      "answer": (q.get("decision") or {}).get("kind")}
                     for q in turn["permissions"]]
        prompts.append({"prompt": turn["prompt"], "tool_calls": calls,
                        "permissions": questions, "answer": turn["answer"],
                        "stop": turn["stop"]})
    session = document["session"]
    return relocate({"version": 1, "session": session["id"], "mode": session.get("mode"),
                     "prompts": prompts, "files": result_files(document, root)}, root)


def start_files(document, target):
    """The files as the session first touched them, written under ``target``: those its
    tool calls named, then those only a command changed (its checkpoints)."""
    root = document["session"]["cwd"]
    items = [i for i in document.get("recording", []) if i["kind"] == "file"]
    items += [{"payload": {"path": os.path.relpath(c["path"], root), "state": c["state"],
                           "mode": c.get("mode")}, "content": c.get("content")}
              for c in document.get("checkpoints", [])]
    done = set()
    for item in items:
        payload = item["payload"]
        rel = payload["path"]
        if rel in done or rel.startswith("..") or os.path.isabs(rel):
            continue
        done.add(rel)
        path = os.path.join(target, rel)
        state = payload["state"]
        if state == "dir":
            os.makedirs(path, exist_ok=True)
            continue
        if state not in ("file", "link"):
            continue
        os.makedirs(os.path.dirname(path), exist_ok=True)
        data = base64.b64decode(item.get("content") or "")
        if state == "link":
            os.symlink(os.fsdecode(data), path)
            continue
        with open(path, "wb") as fh:
            fh.write(data)
        os.chmod(path, payload.get("mode") or 0o644)


def result_files(document, root):
    """Each file the session touched -> its text as the session left it (None: absent), as
    far as the recording tells: the starting files with every completed call's diffs."""
    files = {}
    for item in document.get("recording", []):
        payload = item["payload"]
        if item["kind"] == "file" and payload["path"] not in files and \
                not payload["path"].startswith(".."):
            if payload["state"] == "file":
                data = base64.b64decode(item.get("content") or "")
                try:
                    files[payload["path"]] = data.decode("utf-8")
                except UnicodeDecodeError:
                    continue  # binary: not compared
            elif payload["state"] == "absent":
                files[payload["path"]] = None
    for turn in render.turns(document):
        for kind, call in turn["events"]:
            if kind != "tool" or call.get("status") != "completed":
                continue
            for change in call.get("content") or []:
                if change.get("type") != "diff":
                    continue
                rel = os.path.relpath(change["path"], root)
                if rel.startswith(".."):
                    continue
                if change.get("old_path"):
                    files[os.path.relpath(change["old_path"], root)] = None
                files[rel] = change.get("new")
    return files
