"""term2acp sessions (list, show, export, import, delete) through the launcher, on sessions
recorded through ACP v2 and v1 in ask mode with permissions answered; their pytest export
replayed in a folder of its own with the original workspace gone and no model server."""

import json
import os
import shutil
import subprocess
import sys

import pytest

from term2acp.testing.harness import REPO_LAUNCHER

ROOT = os.path.dirname(os.path.dirname(REPO_LAUNCHER))
SECRET = "sk-never-in-an-export-0123456789"
EDIT = {"path": "hello.txt", "edits": [{"old_text": "wrld", "new_text": "world"}]}
TURNS = [
    [{"thought": "Read it first."}, {"tool_call": {"name": "read_file",
                                                   "arguments": {"path": "hello.txt"}}}],
    [{"tool_call": {"name": "edit_file", "arguments": EDIT}}],
    [{"text": "Fixed the greeting."}, {"usage": {"input": 300, "output": 20, "cached": 100,
                                                 "cost": 0.0125}}],
    [{"tool_call": {"name": "create_file", "arguments": {"path": "new.txt",
                                                         "content": "new\n"}}}],
    [{"text": "You said no, so no new file."}, {"usage": {"input": 400, "output": 12,
                                                          "cost": 0.0075}}],
    [{"text": "Still here, after the import."}],
]


def kind_answer(kinds):
    """Answer the questions in order with the option of each kind."""
    kinds = list(kinds)

    def answer(message):
        if message.get("method") != "session/request_permission":
            return None
        wanted = kinds.pop(0)
        option = next(o for o in message["params"]["options"] if o["kind"] == wanted)
        return {"outcome": {"outcome": "selected", "optionId": option["optionId"]}}
    return answer


def record(acp_agent, workspace, protocol):
    """A session in ask mode: a read, an edit allowed once, a creation refused."""
    os.makedirs(workspace, exist_ok=True)
    with open(os.path.join(workspace, "hello.txt"), "w") as fh:
        fh.write("Hello wrld\n")
    agent = acp_agent(turns=TURNS, protocol=protocol, env={"OPENAI_API_KEY": SECRET})
    sid = agent.new_session(workspace)
    agent.request("session/set_config_option", {"sessionId": sid, "configId": "mode",
                                                "value": "ask"})
    agent.prompt(sid, "fix the greeting in hello.txt", on_request=kind_answer(["allow_once"]))
    agent.prompt(sid, "also make new.txt", on_request=kind_answer(["reject_once"]))
    assert agent.close() == 0
    return sid


def cli(acp_env, *args, cwd=None):
    proc = subprocess.run([sys.executable, REPO_LAUNCHER, "sessions", *args], env=acp_env,
                          capture_output=True, text=True, timeout=60, cwd=cwd)
    return proc.returncode, proc.stdout, proc.stderr


@pytest.mark.parametrize("protocol", [2, 1])
def test_sessions_list_show_export_delete_import_resume(acp_agent, acp_env, tmp_path, protocol):
    workspace = os.path.realpath(tmp_path / "project")
    sid = record(acp_agent, workspace, protocol)
    code, out, err = cli(acp_env, "list")
    assert code == 0 and sid in out and "fix the greeting" in out, err

    code, shown, err = cli(acp_env, "show", sid)
    assert code == 0, err
    for text in ("fix the greeting in hello.txt", "Fixed the greeting.", "edit_file",
                 "-Hello wrld", "+Hello world", "Permission asked", "Reject (reject_once)",
                 "Answer: Allow", "Answer: Reject", "$0.012500", "$0.020000", "scripted"):
        assert text in shown, text
    code, _, err = cli(acp_env, "export", sid, "--format", "markdown", "-o",
                       str(tmp_path / "s.md"))
    assert code == 0 and (tmp_path / "s.md").read_text() == shown

    code, out, err = cli(acp_env, "export", sid, "--format", "json")
    assert code == 0, err
    doc = json.loads(out)
    assert (doc["format"], doc["version"], doc["session"]["model"]) == (
        "term2acp-session", 1, "scripted")
    replies = [i["payload"] for i in doc["recording"] if i["kind"] == "reply"]
    assert [r["cost"] for r in replies] == [None, None, 0.0125, None, 0.0075]
    assert replies[2]["usage"] == {"input": 300, "output": 20, "cached": 100, "thought": 0}
    total = doc["summary"]
    assert [t["costUsd"] for t in total["turns"]] == [0.0125, 0.0075]
    assert [t["modelRequests"] for t in total["turns"]] == [3, 2]
    assert total["turns"][0]["answer"] == "Fixed the greeting."
    assert total["turns"][0]["models"] == ["scripted"]
    assert [t["stopReason"] for t in total["turns"]] == ["end_turn", "end_turn"]
    assert (total["costUsd"], total["usage"]) == (0.02, {"input": 700, "output": 32,
                                                         "cached": 100})
    asked = [i["payload"] for i in doc["recording"] if i["kind"] == "permission"]
    assert [(q["tool"], q["decision"]["kind"]) for q in asked] == [
        ("edit_file", "allow_once"), ("create_file", "reject_once")]
    assert all(q["options"] for q in asked)
    calls = [r["payload"] for r in doc["journal"] if r["kind"] == "tool_call"]
    assert calls[1]["raw_input"] == EDIT and calls[1]["status"] == "completed"
    assert any(c.get("type") == "diff" for c in calls[1]["content"])
    assert SECRET not in out + shown
    (tmp_path / "s.json").write_text(out)

    code, out, err = cli(acp_env, "delete", sid)
    assert code == 0, err
    assert sid not in cli(acp_env, "list")[1]
    code, out, err = cli(acp_env, "show", sid)
    assert code == 1 and f'no session "{sid}"' in err

    code, out, err = cli(acp_env, "import", str(tmp_path / "s.json"))
    assert (code, out.strip()) == (0, sid), err  # the id was free again
    code, out, err = cli(acp_env, "import", str(tmp_path / "s.json"))
    assert code == 0 and out.strip() != sid and "exists already" in err

    agent = acp_agent(turns=TURNS, protocol=2)
    resumed = agent.request("session/resume", {"sessionId": sid, "cwd": workspace,
                                               "replayFrom": {"type": "start"}})["result"]
    mode = next(o for o in resumed["configOptions"] if o["configId"] == "mode")
    assert mode["currentValue"] == "ask"  # the options came back with the import
    replayed = [m["params"]["update"] for m in agent.messages
                if m.get("method") == "session/update"]
    kinds = [u["sessionUpdate"] for u in replayed]
    assert kinds.count("user_message") == 2 and "tool_call_update" in kinds
    _, updates, end = agent.prompt(sid, "still there?")
    assert end["params"]["update"]["stopReason"] == "end_turn"
    assert "Still here, after the import." in json.dumps(updates)


def test_sessions_unknown_id_and_bad_usage(acp_env, tmp_path):
    for args in (["show", "nope"], ["export", "nope"], ["delete", "nope"]):
        code, out, err = cli(acp_env, *args)
        assert code == 1 and 'no session "nope"' in err and out == ""
    assert cli(acp_env, "export", "x", "--format", "yaml")[0] == 2
    assert cli(acp_env, "export", "x", "--format", "pytest")[0] == 2  # needs -o
    assert cli(acp_env, "frobnicate")[0] == 2
    for text, said in (('{"format": "something-else"}', "not a term2acp session export"),
                       ("[1, 2", "bad.json"),
                       ('{"format": "term2acp-session", "version": 9, "session": {}}',
                        "version 9"),
                       ('{"format": "term2acp-session", "version": 1, "session": {"id": "x",'
                        ' "cwd": "/"}, "journal": [{"kind": "tool_call"}]}', "journal record 1")):
        (tmp_path / "bad.json").write_text(text)
        code, _, err = cli(acp_env, "import", str(tmp_path / "bad.json"))
        assert code == 1 and said in err, err
    assert cli(acp_env, "list")[1] == ""  # nothing half-imported


def test_sessions_pytest_export_replays_without_the_workspace_or_a_model(acp_agent, acp_env,
                                                                          tmp_path):
    out = tmp_path / "exported"
    cases = {}
    for protocol in (2, 1):
        workspace = os.path.realpath(tmp_path / f"project{protocol}")
        sid = record(acp_agent, workspace, protocol)
        variants = ("ok", "file", "reply") if protocol == 2 else ("v1",)
        for variant in variants:
            code, printed, err = cli(acp_env, "export", sid, "--format", "pytest", "-o",
                                     str(out / variant))
            assert code == 0, err
            cases[variant] = case_of(printed.strip())
        shutil.rmtree(workspace)  # the original workspace is gone
    assert sorted(os.listdir(os.path.join(cases["ok"], "workspace"))) == ["hello.txt"]
    with open(os.path.join(cases["file"], "workspace", "hello.txt"), "w") as fh:
        fh.write("Hello wrld, wrld\n")  # the edit's old text is no longer unique
    script = os.path.join(cases["reply"], "script.json")
    with open(script) as fh:
        text = fh.read()
    with open(script, "w") as fh:
        fh.write(text.replace("Fixed the greeting.", "Fixed it, I think."))

    env = {k: v for k, v in acp_env.items() if not k.startswith(("TERM2ACP_", "OPENAI_"))}
    env["PYTHONPATH"] = ROOT
    plain = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                            "-p", "no:anyio", "--import-mode=importlib", "-n", "0", str(out)],
                           env=env, cwd=out, capture_output=True, text=True, timeout=300)
    report = plain.stdout + plain.stderr
    assert "2 failed, 2 passed" in report, report[-3000:]
    assert "file hello.txt" in report and "+Hello wrld, wrld" in report
    assert "tool call 2 (edit_file): status 'completed' -> 'failed'" in report
    assert "answer" in report and "-Fixed the greeting." in report
    assert "+Fixed it, I think." in report

    patched = subprocess.run([sys.executable, "-m", "gevent.monkey", "--module", "pytest", "-q",
                              "-n", "0", str(out / "ok")], env=env, cwd=out / "ok",
                             capture_output=True, text=True, timeout=300)
    assert "1 passed" in patched.stdout, (patched.stdout + patched.stderr)[-3000:]


def test_pytest_export_takes_what_a_search_found_or_a_whole_folder(acp_env, tmp_path):
    from term2acp.testing.recorded import export

    work = tmp_path / "searched"
    (work / "src").mkdir(parents=True)
    for rel, text in {"src/a.py": "needle\n", "src/b.py": "pass\n", "c.txt": "a needle\n",
                      "untouched.txt": "never looked at\n"}.items():
        (work / rel).write_text(text)
    script = tmp_path / "search.json"
    script.write_text(json.dumps({"turns": [
        [{"tool_call": {"name": "grep", "arguments": {"pattern": "needle"}}},
         {"tool_call": {"name": "glob", "arguments": {"pattern": "**/*.py"}}}],
        [{"text": "Found two needles."}]]}))
    env = dict(acp_env, TERM2ACP_SCRIPT=str(script))
    proc = subprocess.run([sys.executable, REPO_LAUNCHER, "exec", "--provider", "scripted",
                           "--json", "find the needles"], cwd=work, env=env,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    sid = json.loads(proc.stdout.splitlines()[-1])["sessionId"]
    code, printed, err = cli(acp_env, "export", sid, "--format", "pytest", "-o",
                             str(tmp_path / "found"))
    assert code == 0, err
    case = case_of(printed.strip())
    files = sorted(os.path.relpath(os.path.join(d, n), os.path.join(case, "workspace"))
                   for d, _, names in os.walk(os.path.join(case, "workspace")) for n in names)
    assert files == ["c.txt", "src/a.py", "src/b.py"]
    path = export(sid, str(tmp_path / "whole"), workspace=str(work),
                  data_dir=acp_env["TERM2ACP_HOME"])
    assert os.path.exists(os.path.join(case_of(path), "workspace", "untouched.txt"))


def case_of(test_file):
    """DIR/test_<name>.py -> DIR/<name>"""
    return os.path.join(os.path.dirname(test_file), os.path.basename(test_file)[5:-3])


def test_pytest_export_takes_what_a_command_changed_from_the_checkpoints(acp_env, tmp_path):
    shutil.which("bwrap") or pytest.skip("the shell tool needs bubblewrap")
    work = tmp_path / "repo"
    work.mkdir()
    (work / "cmd.txt").write_text("as it was\n")
    subprocess.run(["git", "init", "-q"], cwd=work, check=True)
    script = tmp_path / "shell.json"
    script.write_text(json.dumps({"turns": [
        [{"tool_call": {"name": "shell", "arguments": {"command": "echo changed > cmd.txt"}}}],
        [{"text": "Changed by a command."}]]}))
    proc = subprocess.run([sys.executable, REPO_LAUNCHER, "exec", "--provider", "scripted",
                           "--json", "run it"], cwd=work,
                          env=dict(acp_env, TERM2ACP_SCRIPT=str(script)),
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert (work / "cmd.txt").read_text() == "changed\n"
    sid = json.loads(proc.stdout.splitlines()[-1])["sessionId"]
    code, printed, err = cli(acp_env, "export", sid, "--format", "pytest", "-o",
                             str(tmp_path / "out"))
    assert code == 0, err
    with open(os.path.join(case_of(printed.strip()), "workspace", "cmd.txt")) as fh:
        assert fh.read() == "as it was\n"
