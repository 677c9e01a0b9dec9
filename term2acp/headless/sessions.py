"""term2acp sessions: the stored sessions, without an editor.

Usage:
  term2acp sessions list [--cwd <dir>] [--json]
  term2acp sessions show <id>
  term2acp sessions export <id> [--format <format>] [-o <path>] [--workspace <dir>]
  term2acp sessions import <file> [--cwd <dir>]
  term2acp sessions delete <id>
  term2acp sessions -h | --help

Options:
  --cwd <dir>          list: only the sessions of this folder. import: the folder the
                       imported session works in (default: the one it was recorded in).
  --json               One JSON object a line.
  --format <format>    markdown, json or pytest [default: markdown].
  -o <path>            Write to this file (markdown, json) or folder (pytest; required)
                       instead of standard output.
  --workspace <dir>    pytest: copy this whole folder as the starting workspace instead
                       of the files the session touched as they were before.
  -h --help            Show this help.

show prints the session as Markdown. export --format json is a versioned document that
import reads back into a session that resumes with its conversation, replay and options
(under the same id when it is free, else a new one; the id is printed). export --format
pytest writes DIR/test_<name>.py, DIR/<name>/script.json (the model's recorded replies) and
DIR/<name>/workspace/: a test that replays the session on a fresh copy with the test kit.
Exit status: 0 done, 1 an unknown id or a failure (said on stderr), 2 bad usage.
"""

import json
import os
import sys
import uuid

USAGE = 2
FORMATS = ("markdown", "json", "pytest")


class Failure(Exception):
    pass


def main(argv, load):
    from docopt import DocoptExit, docopt

    try:
        opts = docopt(__doc__, argv=["sessions", *argv], default_help=False)
    except DocoptExit as exc:
        sys.stderr.write(f"term2acp sessions: {str(exc).splitlines()[0]}\n")
        return USAGE
    if opts["--help"]:
        sys.stdout.write(__doc__.lstrip())
        return 0
    if opts["--format"] not in FORMATS:
        sys.stderr.write(f"term2acp sessions: --format must be one of: {', '.join(FORMATS)}\n")
        return USAGE
    if opts["--format"] == "pytest" and opts["export"] and not opts["-o"]:
        sys.stderr.write("term2acp sessions: export --format pytest needs -o DIR\n")
        return USAGE
    try:
        settings, catalog = load({}, resolve=False)
    except Exception as exc:  # noqa: BLE001 - cli.StartError: the message says what to fix
        sys.stderr.write(f"term2acp sessions: {exc}\n")
        return 1
    from term2acp.acp.v1.replay import forms
    from term2acp.sessions.store.api import store_for

    store = store_for(settings, forms)  # an import's journal stored as the agent stores it
    try:
        store.open()
        return run(opts, store, settings, catalog)
    except Failure as exc:
        sys.stderr.write(f"term2acp sessions: {exc}\n")
        return 1
    finally:
        store.close()


def run(opts, store, settings, catalog):
    from term2acp.sessions import transfer

    if opts["list"]:
        return list_sessions(store, opts)
    if opts["import"]:
        return import_session(store, opts)
    session_id = opts["<id>"]
    if opts["delete"]:
        return delete(store, settings, catalog, session_id)
    document = transfer.dump(store, session_id)
    if document is None:
        raise Failure(f'no session "{session_id}" in {store.path} '
                      "(term2acp sessions list shows them)")
    from term2acp.headless import render

    if opts["show"] or opts["--format"] == "markdown":
        return write(opts["-o"], render.markdown(document) + "\n")
    if opts["--format"] == "json":
        document["summary"] = render.summary(document)
        return write(opts["-o"], json.dumps(document, ensure_ascii=False, indent=1) + "\n")
    from term2acp.headless import pytest_export

    try:
        path = pytest_export.write(document, opts["-o"], opts["--workspace"])
    except pytest_export.ExportError as exc:
        raise Failure(str(exc)) from None
    sys.stdout.write(f"{path}\n")
    return 0


def write(path, text):
    if not path or path == "-":
        sys.stdout.write(text)
        return 0
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
    except OSError as exc:
        raise Failure(f"cannot write {path}: {exc.strerror}") from None
    return 0


def list_sessions(store, opts):
    cwd = os.path.realpath(opts["--cwd"]) if opts["--cwd"] else None
    cursor = None
    while True:
        rows, cursor = store.list_sessions(cwd, cursor, 200)
        for row in rows:
            if opts["--json"]:
                sys.stdout.write(json.dumps({"sessionId": row["id"], "cwd": row["cwd"],
                                             "title": row["title"],
                                             "updatedAt": row["updated_at"]}) + "\n")
            else:
                sys.stdout.write(f"{row['id']}  {row['updated_at']}  {row['cwd']}  "
                                 f"{row['title'] or ''}\n")
        if cursor is None:
            return 0


def import_session(store, opts):
    from term2acp.sessions import transfer

    try:
        with open(opts["<file>"], encoding="utf-8") as fh:
            document = json.load(fh)
        transfer.check(document)
    except OSError as exc:
        raise Failure(f"cannot read {opts['<file>']}: {exc.strerror}") from None
    except ValueError as exc:  # not JSON, or TransferError
        raise Failure(f"{opts['<file>']}: {exc}") from None
    if opts["--cwd"]:
        root = os.path.realpath(opts["--cwd"])
        if not os.path.isdir(root):
            raise Failure(f"--cwd {opts['--cwd']}: not a directory")
        document["session"]["cwd"] = root
    wanted = document["session"]["id"]
    taken = store.get_session(wanted) is not None
    session_id = str(uuid.uuid4()) if taken else wanted
    transfer.load(store, document, session_id)
    sys.stdout.write(f"{session_id}\n")
    if taken:
        sys.stderr.write(f"term2acp sessions: {wanted} exists already: imported as a new "
                         f"session, {session_id}\n")
    return 0


def delete(store, settings, catalog, session_id):
    from term2acp.sessions.errors import SessionLocked, SessionNotFound
    from term2acp.sessions.manager import SessionManager

    manager = SessionManager(settings, catalog, dict, store=store)
    try:
        manager.delete(session_id)
    except SessionNotFound:
        raise Failure(f'no session "{session_id}" in {store.path} '
                      "(term2acp sessions list shows them)") from None
    except SessionLocked as exc:
        raise Failure(f"session {session_id} is open in another term2acp process "
                      f"(pid {exc.args[0]}): close it there first") from None
    sys.stdout.write(f"deleted {session_id}\n")
    return 0
