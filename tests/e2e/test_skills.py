"""Agent Skills (turns/skills.py): names, descriptions and paths reach the model in a context
note (never the bodies, never the system prompt); the skill tool gives a body, a workspace
skill's only once trusted; /skills lists them; a skill added mid-session is listed next."""

import json

import pytest

from term2acp.testing.harness import selected
from tests.support import fake_llm as f
from tests.support.scripts import write_file as write


def respond(request):
    messages = request.json["messages"]
    last = messages[-1]
    if last["role"] == "tool":
        return f.openai_sse(f.oa_text("done"), f.oa_finish("stop"))
    for name in ("pdf-forms", "release-notes"):
        if f"use {name}" in str(last.get("content")):
            return f.openai_sse(f.oa_tool(0, "call_1", "skill", json.dumps({"name": name})),
                                f.oa_finish("tool_calls"))
    return f.openai_sse(f.oa_text("ok"), f.oa_finish("stop"))


@pytest.fixture
def server(server):  # tests/e2e/conftest.py's, answering as respond() says
    server.responder = respond
    return server


def everything(request):
    return json.dumps(request.json["messages"])


def system_of(request):
    return next(m["content"] for m in request.json["messages"] if m["role"] == "system")


@pytest.mark.acp_process  # through the launcher
@pytest.mark.parametrize("protocol", [1, 2])
def test_skills_listed_then_loaded_on_demand(acp_agent, server, tmp_path, acp_workspace,
                                             protocol):
    ws = acp_workspace
    project = f"{ws}/.claude/skills/pdf-forms/SKILL.md"
    write(project, "---\nname: pdf-forms\ndescription: Fill PDF forms with the bundled "
          "script\n---\nPDF BODY: run scripts/fill.py with the form.\n")
    write(f"{ws}/.claude/skills/pdf-forms/scripts/fill.py", "print('filled')\n")
    user = f"{tmp_path}/cfg/skills/release-notes/SKILL.md"
    write(user, "---\nname: release-notes\ndescription: Write release notes from git log\n"
          "---\nNOTES BODY: group by feature.\n")
    agent = acp_agent(args=("--provider", "openai", "--model", "m"), protocol=protocol,
                      env={"OPENAI_BASE_URL": server.openai_url, "OPENAI_API_KEY": "sk-test-123456",
                           "TERM2ACP_CONFIG": f"{tmp_path}/cfg/config.toml"})
    sid = agent.new_session(ws)
    agent.prompt(sid, "hello", timeout=30)
    first = server.requests[-1]
    listed = everything(first)
    assert "pdf-forms" in listed and "Fill PDF forms with the bundled script" in listed
    assert "release-notes" in listed and project in listed and user in listed
    assert "BODY" not in listed
    assert "pdf-forms" not in system_of(first)  # the prompt cache's prefix stays
    assert "skill" in [t["function"]["name"] for t in first.json["tools"]]

    # a user skill needs no approval: its body reaches the model
    asked = []
    agent.prompt(sid, "use release-notes", timeout=30,
                 on_request=lambda m: asked.append(m) or selected("reject"))
    result = [m for m in server.requests[-1].json["messages"] if m["role"] == "tool"][-1]
    assert asked == [] and "NOTES BODY: group by feature." in result["content"]

    # a workspace skill is asked about first (its file and hash); allowed, its body
    agent.prompt(sid, "use pdf-forms", timeout=30,
                 on_request=lambda m: asked.append(m["params"]) or selected("trust-once"))
    assert len(asked) == 1 and project in json.dumps(asked[0])
    result = [m for m in server.requests[-1].json["messages"] if m["role"] == "tool"][-1]
    assert "PDF BODY" in result["content"] and "fill.py" in result["content"]

    # /skills lists them; a skill added mid-session is in the next request
    _, updates, _ = agent.prompt(sid, "/skills", timeout=30)
    shown = "".join(u["content"]["text"] for u in updates
                    if u["sessionUpdate"] == "agent_message_chunk")
    assert "pdf-forms: Fill PDF forms" in shown and "release-notes" in shown
    write(f"{ws}/.agents/skills/lint/SKILL.md", "---\nname: lint\ndescription: Lint it\n---\nX\n")
    before = server.requests[-1].json["messages"]
    agent.prompt(sid, "hi", timeout=30)
    now = server.requests[-1].json["messages"]
    assert now[:len(before)] == before  # only messages were added
    assert "lint: Lint it" in json.dumps(now[len(before):])
    assert agent.close() == 0
