"""Issue 23, medium 7: images stay in the history, but each request carries a bounded
amount of them (the newest), older ones as a placeholder line."""

import json

from term2acp.turns import image_budget
from tests.support import fake_llm as f

MIB = 1024 * 1024


def test_ten_4_mib_images_never_make_a_request_over_the_bound(acp_agent, workspace):
    for number in range(10):
        with open(f"{workspace}/shot{number}.png", "wb") as fh:
            fh.write(b"\x89PNG\r\n\x1a\n" + bytes([number]) * (4 * MIB - 8))
    srv = f.FakeLLMServer().start()
    try:
        for number in range(10):
            srv.enqueue(f.openai_sse(f.oa_tool(0, f"call_{number}", "read_file",
                                               json.dumps({"path": f"shot{number}.png"})),
                                     f.oa_finish("tool_calls")))
        srv.enqueue(f.openai_sse(f.oa_text("Seen them all."), f.oa_finish("stop")))
        agent = acp_agent(args=("--provider", "openai", "--model", "gpt-4o"),
                          env={"OPENAI_BASE_URL": srv.openai_url, "OPENAI_API_KEY": "sk-t-123456"})
        sid = agent.new_session(workspace)
        _, _, idle = agent.prompt(sid, "look at the screenshots", timeout=120)
        assert idle["params"]["update"]["stopReason"] == "end_turn"
        requests = srv.wait_requests(11)
        sizes = [len(r.body) for r in requests]
        # images: 4 MiB each, 5.3 MiB as base64; the rest of a request is a few KiB
        assert max(sizes) < image_budget.REQUEST_BYTES + MIB, sizes
        last = json.dumps(requests[-1].json["messages"])
        assert "older image(s) left out of this request" in last
        assert last.count("data:image/png;base64,") == image_budget.REQUEST_BYTES // (
            len(requests[1].json["messages"][-1]["content"][1]["image_url"]["url"]))
        newest = requests[-1].json["messages"][-1]["content"][-1]["image_url"]["url"]
        assert newest.startswith("data:image/png;base64,iVBORw0KGgo") and "CQkJ" in newest[:200]
        assert agent.close() == 0
    finally:
        srv.stop()
