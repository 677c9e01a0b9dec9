"""The cloud providers through the launcher (Gemini API, Azure OpenAI) and the
OpenAI-compatible servers' caching, against loopback fakes of each wire format.

The Gemini and Azure fakes are reached at the provider's real host name (the default
endpoint, no base URL set) through ``HTTPS_PROXY`` with a test CA, as a user behind a
corporate proxy reaches them: nothing but the proxy's name mapping is test-only.
"""

import json
import os

import pytest

from tests.support import fake_aws as aws
from tests.support import fake_google as g
from tests.support import fake_llm as f
from tests.support import fake_responses as fr
from tests.support.proxy import ConnectProxy
from tests.support.tls import make_ca, server_context

PROTOCOLS = pytest.mark.parametrize("protocol", [1, 2])
GEMINI_HOST = "generativelanguage.googleapis.com"
AZURE_HOST = "contoso-ai.openai.azure.com"
BEDROCK_HOST = "bedrock-runtime.us-east-1.amazonaws.com"
VERTEX_HOST = "us-east5-aiplatform.googleapis.com"
TOKEN_HOST = "oauth2.googleapis.com"
HOSTS = (GEMINI_HOST, AZURE_HOST, BEDROCK_HOST, VERTEX_HOST, TOKEN_HOST)
KEY = "AIzaFakeKey0123456789abcdef"


@pytest.fixture(scope="module")
def authority(tmp_path_factory):
    return make_ca(tmp_path_factory.mktemp("ca"), names=list(HOSTS))


@pytest.fixture
def cloud(authority):
    """``(server, env)``: a TLS fake answering for the real host names behind a proxy."""
    server = f.FakeLLMServer(tls=server_context(authority)).start()
    proxy = ConnectProxy(hosts={host: ("127.0.0.1", server.port) for host in HOSTS}).start()
    env = {"HTTPS_PROXY": proxy.url, "NO_PROXY": "", "SSL_CERT_FILE": str(authority.ca),
           "TERM2ACP_LOCAL_MODEL": "off"}
    yield server, env
    proxy.stop()
    server.stop()


def answer_text(updates):
    return "".join(u["content"]["text"] for u in updates
                   if u["sessionUpdate"] == "agent_message_chunk")


def last_cost(updates):
    costs = [u["cost"]["amount"] for u in updates if u["sessionUpdate"] == "usage_update"
             and u.get("cost")]
    return costs[-1] if costs else None


def usd(fresh, cached, output, price):
    base, read, _write, out = price
    return (fresh * base + cached * read + output * out) / 1e6


def read_turn(workspace):
    with open(os.path.join(workspace, "hello.txt"), "w") as fh:
        fh.write("hello from disk\n")


# ---------------------------------------------------------------- Gemini API
@PROTOCOLS
def test_gemini_turn_with_a_tool_call_signatures_usage_and_cost(acp_agent, acp_workspace, cloud,
                                                                protocol):
    server, env = cloud
    read_turn(acp_workspace)
    server.enqueue(
        g.stream(g.chunk(g.thought("Looking at the file.")),
                 g.chunk(g.call("read_file", {"path": "hello.txt"}, signature="sig-A"),
                         finish="STOP", usage=g.usage(1200, 20, thoughts=30, cached=0))),
        g.stream(g.chunk(g.text("It says ")),
                 g.chunk(g.text("hello.", signature="sig-B"), finish="STOP",
                         usage=g.usage(1300, 8, cached=1024))))
    agent = acp_agent(args=["--provider", "gemini", "--model", "gemini-2.5-flash"],
                      env=dict(env, GEMINI_API_KEY=KEY), protocol=protocol, process=True)
    sid = agent.new_session(acp_workspace)
    _, updates, end = agent.prompt(sid, "what does hello.txt say?", timeout=30)
    assert answer_text(updates) == "It says hello."
    thoughts = "".join(u["content"]["text"] for u in updates
                       if u["sessionUpdate"] == "agent_thought_chunk")
    assert "Looking at the file." in thoughts
    first, second = server.wait_requests(2)
    assert first.path == "/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse"
    assert first.headers["x-goog-api-key"] == KEY and "key=" not in first.path
    one, two = first.json, second.json
    # the prefix is the same bytes in both requests (implicit caching)
    assert json.dumps([one["systemInstruction"], one["tools"]]) == \
        json.dumps([two["systemInstruction"], two["tools"]])
    names = {d["name"] for d in one["tools"][0]["functionDeclarations"]}
    assert {"read_file", "edit_file", "shell"} <= names
    model_turn = two["contents"][1]
    assert model_turn["role"] == "model"
    assert model_turn["parts"] == [{"functionCall": {"name": "read_file",
                                                     "args": {"path": "hello.txt"}},
                                    "thoughtSignature": "sig-A"}]
    result = two["contents"][2]["parts"][0]["functionResponse"]
    assert result["name"] == "read_file" and "hello from disk" in result["response"]["result"]
    if protocol == 2:
        price = (0.30, 0.03, 0.30, 2.50)  # gemini-2.5-flash, USD per million
        expected = usd(1200, 0, 50, price) + usd(1300 - 1024, 1024, 8, price)
        assert last_cost(updates) == pytest.approx(expected, abs=1e-6)
    agent.close()
    wire = b"".join(agent.lines).decode()
    assert KEY not in wire and KEY not in agent.stderr


def test_gemini_explicit_cache_is_named_by_later_requests_and_deleted_at_close(
        acp_agent, acp_workspace, cloud, configure):
    server, env = cloud
    configure('[providers.gemini]\ncontext_cache = "explicit"\n')
    read_turn(acp_workspace)
    server.enqueue(
        g.stream(g.chunk(g.call("read_file", {"path": "hello.txt"}), finish="STOP",
                         usage=g.usage(5000, 10))),
        g.cache_entry(),
        g.stream(g.chunk(g.text("Done."), finish="STOP", usage=g.usage(5100, 3, cached=5000))),
        f.Status(200, {}))
    agent = acp_agent(args=["--provider", "gemini", "--model", "gemini-2.5-flash"],
                      env=dict(env, GEMINI_API_KEY=KEY), process=True)
    sid = agent.new_session(acp_workspace)
    agent.prompt(sid, "read hello.txt", timeout=30)
    first, made, second = server.wait_requests(3)
    assert made.method == "POST" and made.path == "/v1beta/cachedContents"
    entry = made.json
    assert entry["model"] == "models/gemini-2.5-flash" and entry["ttl"].endswith("s")
    assert entry["systemInstruction"] == first.json["systemInstruction"]
    assert entry["tools"] == first.json["tools"]
    assert entry["contents"] == second_contents_head(first.json, entry)
    body = second.json
    assert body["cachedContent"] == "cachedContents/fake-cache-1"
    assert "systemInstruction" not in body and "tools" not in body
    assert body["contents"][0]["parts"][0]["functionResponse"]["name"] == "read_file"
    assert agent.request("session/close", {"sessionId": sid})["result"] == {}
    deleted = server.wait_requests(4)[3]
    assert deleted.method == "DELETE" and deleted.path == "/v1beta/cachedContents/fake-cache-1"
    agent.close()


def second_contents_head(first, entry):
    """What the entry must hold: the first request's user turn and the model's call."""
    assert entry["contents"][0] == first["contents"][0]
    assert entry["contents"][1]["role"] == "model"
    return entry["contents"]


@PROTOCOLS
def test_gemini_bad_key_fails_the_turn_naming_the_variable(acp_agent, acp_workspace, cloud,
                                                           protocol):
    server, env = cloud
    server.enqueue(g.bad_key())
    agent = acp_agent(args=["--provider", "gemini", "--model", "gemini-2.5-flash"],
                      env=dict(env, GEMINI_API_KEY=KEY), protocol=protocol, process=True)
    sid = agent.new_session(acp_workspace)
    response, _updates, end = agent.prompt(sid, "hi", timeout=30)
    text = json.dumps(end)
    assert "gemini" in text and "GEMINI_API_KEY" in text and KEY not in text
    agent.close()


def test_gemini_models_are_listed_in_the_picker(acp_agent, acp_workspace, cloud):
    server, env = cloud
    server.models = ["gemini-2.5-flash", "gemini-9-experimental"]
    agent = acp_agent(args=["--provider", "gemini", "--model", "gemini-2.5-flash"],
                      env=dict(env, GEMINI_API_KEY=KEY), process=True)
    agent.new_session(acp_workspace)
    update = agent.wait_for(lambda m: "gemini-9-experimental" in json.dumps(m), timeout=20)
    assert "text-embedding-004" not in json.dumps(update)
    agent.close()


# ---------------------------------------------------------------- Amazon Bedrock
SONNET = "us.anthropic.claude-sonnet-4-5-20250929-v1:0"
AWS_SECRET = "fake/secret+key0123456789ABCDEFGHIJKLMNOP"


def aws_env(env, tmp_path, secret=AWS_SECRET):
    return dict(env, AWS_ACCESS_KEY_ID="AKIAFAKE0123456789", AWS_SECRET_ACCESS_KEY=secret,
                AWS_REGION="us-east-1", AWS_EC2_METADATA_DISABLED="true",
                AWS_CONFIG_FILE=str(tmp_path / "no-config"),
                AWS_SHARED_CREDENTIALS_FILE=str(tmp_path / "no-credentials"))


@PROTOCOLS
def test_bedrock_converse_turn_signed_with_reasoning_cache_points_and_cost(
        acp_agent, acp_workspace, cloud, tmp_path, protocol):
    server, env = cloud
    bedrock = server.responder = aws.Bedrock(AWS_SECRET, "us-east-1")
    read_turn(acp_workspace)
    bedrock.script.extend([
        aws.stream(*aws.tool_turn("tooluse_1", "read_file", {"path": "hello.txt"},
                                  aws.usage(12, 40, write=3000), reasoning="Let me read it.",
                                  signature="sig-bedrock-1")),
        aws.stream(*aws.text_turn("It says hello.", aws.usage(60, 6, read=3000)))])
    agent = acp_agent(args=["--provider", "bedrock", "--model", SONNET, "--effort", "low"],
                      env=aws_env(env, tmp_path), protocol=protocol, process=True)
    sid = agent.new_session(acp_workspace)
    _, updates, _end = agent.prompt(sid, "what does hello.txt say?", timeout=30)
    assert bedrock.refused == []
    assert answer_text(updates) == "It says hello."
    first, second = server.wait_requests(2)
    assert first.path == "/model/us.anthropic.claude-sonnet-4-5-20250929-v1%3A0/converse-stream"
    body = second.json
    assert body["toolConfig"]["tools"][-1] == {"cachePoint": {"type": "default"}}
    assert body["system"][-1] == {"cachePoint": {"type": "default"}}
    assert json.dumps(body).count('"cachePoint"') <= 4
    assert body["additionalModelRequestFields"]["thinking"]["type"] == "enabled"
    said = body["messages"][1]["content"]
    assert said[0] == {"reasoningContent": {"reasoningText": {
        "text": "Let me read it.", "signature": "sig-bedrock-1"}}}
    assert said[1]["toolUse"] == {"toolUseId": "tooluse_1", "name": "read_file",
                                  "input": {"path": "hello.txt"}}
    result = body["messages"][2]["content"][0]["toolResult"]
    assert result["toolUseId"] == "tooluse_1" and "hello from disk" in result["content"][0]["text"]
    if protocol == 2:
        price = (3.0, 0.30, 3.75, 15.0)  # claude-sonnet-4-5
        expected = (12 * 3.0 + 3000 * 3.75 + 40 * 15.0 + 60 * 3.0 + 3000 * 0.30
                    + 6 * 15.0) / 1e6
        assert price and last_cost(updates) == pytest.approx(expected, abs=1e-6)
    agent.close()
    assert AWS_SECRET not in b"".join(agent.lines).decode() + agent.stderr


@PROTOCOLS
def test_bedrock_refused_credentials_name_the_variables(acp_agent, acp_workspace, cloud,
                                                        tmp_path, protocol):
    server, env = cloud
    bedrock = server.responder = aws.Bedrock(AWS_SECRET, "us-east-1")
    agent = acp_agent(args=["--provider", "bedrock", "--model", SONNET],
                      env=aws_env(env, tmp_path, secret="wrong" * 8), protocol=protocol,
                      process=True)
    sid = agent.new_session(acp_workspace)
    _, _updates, end = agent.prompt(sid, "hi", timeout=30)
    assert bedrock.refused == ["signature mismatch"]
    text = json.dumps(end)
    assert "bedrock" in text and "AWS_PROFILE" in text and "AWS_ACCESS_KEY_ID" in text
    agent.close()


def test_bedrock_without_a_region_says_so(acp_agent, acp_workspace, cloud, tmp_path):
    _server, env = cloud
    plain = aws_env(env, tmp_path)
    plain.pop("AWS_REGION")
    agent = acp_agent(args=["--provider", "bedrock", "--model", SONNET], env=plain, process=True)
    sid = agent.new_session(acp_workspace)
    error = agent.request("session/prompt", {"sessionId": sid, "prompt": [
        {"type": "text", "text": "hi"}]}, timeout=30)["error"]
    assert "AWS_REGION" in error["message"]
    agent.close()


def test_bedrock_lists_profiles_and_models_signed(acp_agent, acp_workspace, cloud, tmp_path):
    server, env = cloud
    listed = []

    def listing(key, rows):
        def answer(request):
            listed.append(aws.verify(request, AWS_SECRET, "us-east-1"))
            return f.Status(200, {key: rows})
        return answer

    server.routes["/inference-profiles"] = listing("inferenceProfileSummaries", [
        {"inferenceProfileId": "us.anthropic.claude-opus-4-5-20251101-v1:0"}])
    server.routes["/foundation-models"] = listing("modelSummaries", [
        {"modelId": "amazon.nova-pro-v1:0", "inferenceTypesSupported": ["ON_DEMAND"],
         "responseStreamingSupported": True},
        {"modelId": "anthropic.claude-3-opus-20240229-v1:0",
         "inferenceTypesSupported": ["PROVISIONED"]}])
    agent = acp_agent(args=["--provider", "bedrock", "--model", SONNET],
                      env=dict(aws_env(env, tmp_path),
                               AWS_ENDPOINT_URL_BEDROCK=f"https://{BEDROCK_HOST}"), process=True)
    agent.new_session(acp_workspace)
    update = agent.wait_for(lambda m: "amazon.nova-pro-v1:0" in json.dumps(m), timeout=20)
    assert "us.anthropic.claude-opus-4-5-20251101-v1:0" in json.dumps(update)
    assert "claude-3-opus" not in json.dumps(update)  # provisioned only
    assert listed == [None, None]  # both listings signed
    agent.close()


# ---------------------------------------------------------------- Vertex AI
VERTEX_BASE = "/v1/projects/my-proj/locations/us-east5/publishers"


def vertex_env(env, tmp_path):
    """Application-default credentials of a user (gcloud's kind): google-auth takes their
    tokens from oauth2.googleapis.com, which the proxy sends to the fake."""
    adc = tmp_path / "adc.json"
    adc.write_text(json.dumps({"type": "authorized_user", "client_id": "fake-client",
                               "client_secret": "fake-secret",
                               "refresh_token": "1//fake-refresh"}))
    return dict(env, GOOGLE_APPLICATION_CREDENTIALS=str(adc), GOOGLE_CLOUD_PROJECT="my-proj",
                GOOGLE_CLOUD_LOCATION="us-east5", GCE_METADATA_HOST="127.0.0.1:9",
                NO_GCE_CHECK="true")


def token_endpoint(server, lifetimes):
    issued = []

    def token(request):
        issued.append(request.body.decode())
        number = len(issued)
        return f.Status(200, {"access_token": f"ya29.token-{number}", "token_type": "Bearer",
                              "expires_in": lifetimes[min(number, len(lifetimes)) - 1]})

    server.routes["/token"] = token
    return issued


@PROTOCOLS
def test_vertex_gemini_turn_with_an_adc_token(acp_agent, acp_workspace, cloud, tmp_path,
                                              protocol):
    server, env = cloud
    issued = token_endpoint(server, [3600])
    read_turn(acp_workspace)
    server.enqueue(
        g.stream(g.chunk(g.call("read_file", {"path": "hello.txt"}, signature="sig-V"),
                         finish="STOP", usage=g.usage(900, 12))),
        g.stream(g.chunk(g.text("It says hello."), finish="STOP", usage=g.usage(950, 5))))
    agent = acp_agent(args=["--provider", "vertex", "--model", "gemini-2.5-flash"],
                      env=vertex_env(env, tmp_path), protocol=protocol, process=True)
    sid = agent.new_session(acp_workspace)
    _, updates, _end = agent.prompt(sid, "what does hello.txt say?", timeout=30)
    assert answer_text(updates) == "It says hello."
    first, second = server.wait_requests(2)
    assert first.path == f"{VERTEX_BASE}/google/models/gemini-2.5-flash:" \
                         "streamGenerateContent?alt=sse"
    # one token for the session's requests (the model listing has a provider of its own)
    assert first.headers["authorization"] == second.headers["authorization"]
    assert first.headers["authorization"] in {f"Bearer ya29.token-{n + 1}"
                                              for n in range(len(issued))}
    assert all("refresh_token=1%2F%2Ffake-refresh" in body for body in issued)
    assert second.json["contents"][1]["parts"][0]["thoughtSignature"] == "sig-V"
    if protocol == 2:
        price = (0.30, 0.03, 0.30, 2.50)
        assert last_cost(updates) == pytest.approx(usd(900, 0, 12, price)
                                                   + usd(950, 0, 5, price), abs=1e-6)
    agent.close()
    seen = b"".join(agent.lines).decode() + agent.stderr
    assert not any(f"ya29.token-{n + 1}" in seen for n in range(len(issued)))


def test_vertex_anthropic_turn_refreshes_an_expiring_token(acp_agent, acp_workspace, cloud,
                                                           tmp_path):
    server, env = cloud
    token_endpoint(server, [30])  # every token it hands out is about to expire
    read_turn(acp_workspace)
    server.enqueue(
        f.anthropic_sse(f.an_start(input_tokens=500, cache_write=2000),
                        f.an_thinking(0, "Reading."),
                        f.an_tool(1, "toolu_1", "read_file", '{"path": "hello.txt"}'),
                        f.an_end("tool_use")),
        f.anthropic_sse(f.an_start(input_tokens=80, cache_read=2000),
                        f.an_text(0, "It says hello."), f.an_end("end_turn")))
    agent = acp_agent(args=["--provider", "vertex", "--model", "claude-sonnet-4-5@20250929",
                            "--effort", "low"],
                      env=vertex_env(env, tmp_path), process=True)
    sid = agent.new_session(acp_workspace)
    _, updates, _end = agent.prompt(sid, "what does hello.txt say?", timeout=30)
    assert answer_text(updates) == "It says hello."
    first, second = server.wait_requests(2)
    assert first.path == f"{VERTEX_BASE}/anthropic/models/claude-sonnet-4-5@20250929:" \
                         "streamRawPredict"
    body = second.json
    assert body["anthropic_version"] == "vertex-2023-10-16" and "model" not in body
    assert body["system"][0]["cache_control"] == {"type": "ephemeral"}
    assert body["tools"][-1]["cache_control"] == {"type": "ephemeral"}
    assert body["thinking"]["type"] == "enabled"
    # the token the first request used was about to expire: the next one has another
    assert second.headers["authorization"] != first.headers["authorization"]
    agent.close()


def test_vertex_refused_credentials_name_the_fix(acp_agent, acp_workspace, cloud, tmp_path):
    server, env = cloud
    server.routes["/token"] = lambda request: f.Status(400, {
        "error": "invalid_grant", "error_description": "Token has been expired or revoked."})
    agent = acp_agent(args=["--provider", "vertex", "--model", "gemini-2.5-flash"],
                      env=vertex_env(env, tmp_path), process=True)
    sid = agent.new_session(acp_workspace)
    _, _updates, end = agent.prompt(sid, "hi", timeout=30)
    text = json.dumps(end)
    assert "vertex" in text and "GOOGLE_APPLICATION_CREDENTIALS" in text
    assert "gcloud auth application-default login" in text
    agent.close()


def test_vertex_lists_gemini_and_claude_models(acp_agent, acp_workspace, cloud, tmp_path):
    server, env = cloud
    token_endpoint(server, [3600])
    server.models = ["gemini-2.5-flash", "gemini-3-pro-preview", "claude-opus-4-5"]
    agent = acp_agent(args=["--provider", "vertex", "--model", "gemini-2.5-flash"],
                      env=vertex_env(env, tmp_path), process=True)
    agent.new_session(acp_workspace)
    update = agent.wait_for(lambda m: "claude-opus-4-5" in json.dumps(m)
                            and "gemini-3-pro-preview" in json.dumps(m), timeout=20)
    assert update
    listing = [r for r in server.listings if "/publishers/" in r.path]
    assert listing and all(r.headers["authorization"].startswith("Bearer ya29.token-")
                           for r in listing)
    agent.close()


def test_vertex_without_a_project_says_so(acp_agent, acp_workspace, cloud, tmp_path):
    _server, env = cloud
    plain = vertex_env(env, tmp_path)
    plain.pop("GOOGLE_CLOUD_PROJECT")
    agent = acp_agent(args=["--provider", "vertex", "--model", "gemini-2.5-flash"], env=plain,
                      process=True)
    sid = agent.new_session(acp_workspace)
    error = agent.request("session/prompt", {"sessionId": sid, "prompt": [
        {"type": "text", "text": "hi"}]}, timeout=30)["error"]
    assert "GOOGLE_CLOUD_PROJECT" in error["message"]
    agent.close()


# ---------------------------------------------------------------- Azure OpenAI
def azure_env(env, **extra):
    return dict(env, AZURE_OPENAI_ENDPOINT=f"https://{AZURE_HOST}",
                AZURE_OPENAI_API_KEY="azure-key-0123456789", **extra)


@PROTOCOLS
def test_azure_responses_turn_with_deployment_cache_key_and_model_price(
        acp_agent, acp_workspace, cloud, configure, protocol):
    server, env = cloud
    server.responses = True
    configure('[providers.azure]\ndeployments = { prod-chat = "gpt-5-mini" }\n')
    read_turn(acp_workspace)
    server.enqueue(
        fr.Stream(model="gpt-5-mini-2025-08-07").reasoning("Reading.", encrypted="enc-1")
        .call("call_1", "read_file", '{"path": "hello.txt"}')
        .end(1000, 40, reasoning=20).sse(),
        fr.Stream(model="gpt-5-mini-2025-08-07").text("It says hello.")
        .end(1100, 6, cached=1000).sse())
    agent = acp_agent(args=["--provider", "azure", "--model", "prod-chat"],
                      env=azure_env(env), protocol=protocol, process=True)
    sid = agent.new_session(acp_workspace)
    _, updates, _end = agent.prompt(sid, "what does hello.txt say?", timeout=30)
    assert answer_text(updates) == "It says hello."
    first, second = server.wait_requests(2)
    assert first.path == "/openai/v1/responses"
    assert first.headers["api-key"] == "azure-key-0123456789"
    assert "authorization" not in first.headers
    body = second.json
    assert body["model"] == "prod-chat" and body["store"] is False
    assert body["prompt_cache_key"] == sid == first.json["prompt_cache_key"]
    carried = [i for i in body["input"] if i.get("type") == "reasoning"]
    assert carried and carried[0]["encrypted_content"] == "enc-1"
    if protocol == 2:
        price = (0.25, 0.025, 0.25, 2.0)  # gpt-5-mini: the model the deployment serves
        expected = usd(1000, 0, 40, price) + usd(100, 1000, 6, price)
        assert last_cost(updates) == pytest.approx(expected, abs=1e-6)
    agent.close()


def test_azure_dated_api_version_and_chat_deployment(acp_agent, acp_workspace, cloud, configure):
    server, env = cloud
    configure('[providers.azure]\napi = "chat"\n')
    server.enqueue(f.openai_sse(f.oa_text("hi there"), f.oa_finish("stop"), f.oa_usage(10, 2)))
    agent = acp_agent(args=["--provider", "azure", "--model", "legacy-4o"],
                      env=azure_env(env, AZURE_OPENAI_API_VERSION="2024-10-21"), process=True)
    sid = agent.new_session(acp_workspace)
    _, updates, _end = agent.prompt(sid, "hi", timeout=30)
    assert answer_text(updates) == "hi there"
    request = server.wait_requests(1)[0]
    assert request.path == "/openai/deployments/legacy-4o/chat/completions?api-version=2024-10-21"
    assert request.json["prompt_cache_key"] == sid
    agent.close()


@PROTOCOLS
def test_azure_bad_key_names_the_variable(acp_agent, acp_workspace, cloud, protocol):
    server, env = cloud
    server.responses = True
    server.enqueue(f.Status(401, {"error": {"code": "401", "message": "Access denied due to "
                                            "invalid subscription key."}}))
    agent = acp_agent(args=["--provider", "azure", "--model", "prod-chat"],
                      env=azure_env(env), protocol=protocol, process=True)
    sid = agent.new_session(acp_workspace)
    _, _updates, end = agent.prompt(sid, "hi", timeout=30)
    text = json.dumps(end)
    assert "azure" in text and "AZURE_OPENAI_API_KEY" in text
    agent.close()


def test_azure_without_endpoint_or_deployment_says_what_to_set(acp_agent, acp_workspace, cloud):
    _server, env = cloud
    agent = acp_agent(args=["--provider", "azure", "--model", "prod-chat"],
                      env=dict(env, AZURE_OPENAI_API_KEY="k" * 20), process=True)
    sid = agent.new_session(acp_workspace)
    error = agent.request("session/prompt", {"sessionId": sid, "prompt": [
        {"type": "text", "text": "hi"}]}, timeout=30)["error"]
    assert "AZURE_OPENAI_ENDPOINT" in error["message"]
    agent.close()


# ---------------------------------------------------------------- compatible servers
def compatible(acp_agent, server, **kwargs):
    return acp_agent(args=["--provider", "openai", "--model", "some/model"],
                     env={"OPENAI_BASE_URL": server.openai_url, "OPENAI_API_KEY": "sk-compat"},
                     **kwargs)


def test_a_compatible_server_with_the_responses_api_gets_it_and_the_cache_key(
        acp_agent, acp_workspace, server):
    server.enqueue(fr.Stream().text("one").end().sse(), fr.Stream().text("two").end().sse())
    agent = compatible(acp_agent, server)
    sid = agent.new_session(acp_workspace)
    agent.prompt(sid, "hi", timeout=30)
    agent.prompt(sid, "again", timeout=30)
    requests = server.wait_requests(2)
    assert [r.path for r in requests] == ["/v1/responses", "/v1/responses"]
    assert all(r.json["prompt_cache_key"] == sid for r in requests)
    assert server.no_route == []
    agent.close()


def test_a_chat_only_server_is_asked_once_and_keeps_working(acp_agent, acp_workspace, server):
    server.enqueue(f.openai_sse(f.oa_text("one"), f.oa_finish("stop")),
                   f.openai_sse(f.oa_text("two"), f.oa_finish("stop")))
    agent = compatible(acp_agent, server)
    sid = agent.new_session(acp_workspace)
    _, first, _ = agent.prompt(sid, "hi", timeout=30)
    _, second, _ = agent.prompt(sid, "again", timeout=30)
    assert (answer_text(first), answer_text(second)) == ("one", "two")
    assert [r.path for r in server.no_route] == ["/v1/responses"]  # asked once
    requests = server.wait_requests(2)
    assert [r.path for r in requests] == ["/v1/chat/completions"] * 2
    assert all(r.json["prompt_cache_key"] == sid for r in requests)
    agent.close()


def test_a_server_refusing_the_cache_key_gets_requests_without_it(acp_agent, acp_workspace,
                                                                   server):
    server.responses = False

    def refuse_the_key(request):
        if "prompt_cache_key" in request.json:
            return f.Status(400, {"error": {"message": "Unrecognized request argument "
                                            "supplied: prompt_cache_key"}})
        return f.openai_sse(f.oa_text("fine"), f.oa_finish("stop"))

    server.responder = refuse_the_key
    agent = compatible(acp_agent, server)
    sid = agent.new_session(acp_workspace)
    _, first, _ = agent.prompt(sid, "hi", timeout=30)
    _, second, _ = agent.prompt(sid, "again", timeout=30)
    assert answer_text(first) == answer_text(second) == "fine"
    keyed = [r for r in server.requests if "prompt_cache_key" in r.json]
    assert len(keyed) == 1  # refused once, remembered
    agent.close()
