"""OpenAI provider: the Responses API (``responses.py``) on the official endpoint, Chat
Completions on any OpenAI-compatible server (``api = "responses" | "chat"`` in the
provider's config section overrides either).

It speaks the streaming APIs through :mod:`term2acp.providers.http` (no SDK: see that
module for retries, proxies, TLS and timeouts) and decodes the Chat Completions chunks
here, including ``tool_calls`` deltas and the usage chunk requested with
``stream_options``. ``prompt_cache_key`` (the session's id, so the server routes a
session's requests to the machine that holds its cached prefix) goes to the official
endpoint, and to another server when its config says ``prompt_cache_key = true``. A few
helpers (credentials, the stream loop's error mapping) are shared with ``anthropic.py``.
"""

import json
import logging
import os
import uuid
from urllib.parse import urlsplit

from term2acp.core import secrets
from term2acp.net import sse
from term2acp.net.address import is_loopback as _loopback_host
from term2acp.net.connection import FAILURES
from term2acp.providers import compat, responses
from term2acp.providers.base import (
    Provider,
    ProviderNotConfigured,
    Stop,
    TextDelta,
    ThoughtDelta,
    ToolCall,
    Usage,
)
from term2acp.providers.errors import (
    PLACEHOLDER_KEY,
    MalformedResponse,
    ProviderError,
    scrub,
)
from term2acp.providers.catalog import family
from term2acp.providers.http import HTTPClient

log = logging.getLogger(__name__)

DEFAULT_BASE_URL = "https://api.openai.com/v1"
EFFORTS = ("none", "minimal", "low", "medium", "high", "xhigh")
FINISH_REASONS = {"stop": "end_turn", "tool_calls": "tool_use", "function_call": "tool_use",
                  "length": "max_tokens", "content_filter": "refusal"}
REASONING_KEYS = ("reasoning_content", "reasoning")


# ---------------------------------------------------------------- shared helpers
def is_loopback(url):
    return _loopback_host(urlsplit(url or "").hostname or "")


def host_of(url, default):
    return urlsplit(url).netloc if url else default


def is_official(host):
    name = host.rsplit(":", 1)[0]
    return name == "api.openai.com" or name.endswith(".openai.azure.com")


def resolve_credentials(name, builtin, api_key, base_url, key_var, url_var):
    """``(base_url, api_key, key hint)`` for a provider instance.

    Only the built-in provider reads its environment variables: a custom-named one
    (Ollama, OpenRouter...) must never receive the user's OpenAI or Anthropic key by
    accident. A loopback server without a key gets a placeholder key.
    """
    env = os.environ if name == builtin else {}
    base_url = base_url or env.get(url_var) or None
    key = api_key or env.get(key_var)
    if key:
        try:  # a key pasted with its CR/LF: stripped; one broken inside: a clear refusal
            key = secrets.clean(key, key_var if env else f"{name}'s API key")
        except secrets.SecretInvalid as exc:
            raise ProviderNotConfigured(f"{name}: {exc}") from None
    if not key:
        if not is_loopback(base_url):
            raise ProviderNotConfigured(
                f"{name}: no API key: set {key_var} (or {url_var} for a local server)" if env
                else f"{name}: no API key configured for {base_url or 'its default endpoint'}")
        key = PLACEHOLDER_KEY
    return base_url, key, key_var if env else "its API key"


def sse_json(client, response, name):
    """Decoded JSON payloads of a streamed response; transport and framing failures become
    provider errors. ``[DONE]`` is skipped (the body is still read to its end, so the
    connection can be reused)."""
    try:
        for _event, data in sse.events(response):
            if data == "[DONE]":
                continue
            try:
                payload = json.loads(data)
            except ValueError as exc:
                raise MalformedResponse(scrub(
                    f"{name}: malformed response from {client.target.netloc}: {exc}"[:300],
                    client.secret)) from None
            yield payload
    except FAILURES as exc:
        raise client.lost(response.url, exc) from None
    except ValueError as exc:  # SSE framing limits
        raise MalformedResponse(f"{name}: malformed response from {client.target.netloc}: "
                                f"{exc}") from None


# ---------------------------------------------------------------- request building
def chat_messages(system, messages):
    out = [{"role": "system", "content": system}] if system else []
    pending = []  # images read by tools: a user message after the run of tool results
    for message in messages:
        role = message["role"]
        if pending and role != "tool":
            out.append(_tool_images(pending))
            pending = []
        if role == "user":
            out.append({"role": "user", "content": _user_content(message)})
        elif role == "assistant":
            out.append(_assistant_message(message))
        elif role == "tool":
            content = message.get("content") or ""
            if message.get("is_error"):
                content = "Error: " + content
            out.append({"role": "tool", "tool_call_id": message["tool_call_id"],
                        "content": content})
            pending += message.get("images") or ()
        else:
            raise ValueError(f"unsupported message role {role!r}")
    if pending:
        out.append(_tool_images(pending))
    return out


def _tool_images(images):
    """Tool messages carry text only: images a tool returned follow as a user message."""
    return {"role": "user", "content": [{"type": "text", "text": "Images returned by the tool "
                                         "calls above:"}] + _user_content(
        {"content": "", "images": images})[1:]}


def _user_content(message):
    """A user message's text, with its images (turns/content.py) as data-URL parts."""
    images = message.get("images")
    if not images:
        return message["content"]
    return [{"type": "text", "text": message["content"]}] + [
        {"type": "image_url", "image_url": {"url": f"data:{image['mime_type']};base64,"
                                                   f"{image['data']}"}} for image in images]


def _assistant_message(message):
    calls = message.get("tool_calls") or []
    if not calls:
        return {"role": "assistant", "content": message.get("content") or ""}
    return {"role": "assistant", "content": message.get("content") or None,
            "tool_calls": [{"id": c["id"], "type": "function",
                            "function": {"name": c["name"], "arguments": c["arguments"] or "{}"}}
                           for c in calls]}


def chat_tools(tools):
    return [{"type": "function", "function": {
        "name": t["name"], "description": t.get("description", ""),
        "parameters": t.get("parameters") or {"type": "object", "properties": {}}}}
        for t in tools]


def chat_params(request, official, cache_key=None):
    params = {"model": request.model, "messages": chat_messages(request.system, request.messages),
              "stream": True, "stream_options": {"include_usage": True}}
    if cache_key:
        params["prompt_cache_key"] = cache_key
    if request.tools:
        params["tools"] = chat_tools(request.tools)
    if request.effort in EFFORTS:
        params["reasoning_effort"] = request.effort
    elif request.effort not in (None, "default"):
        log.warning("unknown effort %r ignored", request.effort)
    if request.max_output_tokens:
        # OpenAI's reasoning models accept only the new name; compatible servers know the old.
        key = "max_completion_tokens" if official else "max_tokens"
        params[key] = request.max_output_tokens
    return params


# ---------------------------------------------------------------- stream decoding
class ChatStreamState:
    """Accumulates one streamed completion and turns chunks (dicts) into provider events."""

    def __init__(self):
        self.calls = {}  # index -> [id, name, arguments]
        self.finish = None
        self.usage = None
        self.refused = False
        self.received = False
        self.model = None  # the model the server says answered

    def feed(self, chunk):
        self.received = True
        if chunk.get("model"):
            self.model = chunk["model"]
        if chunk.get("usage"):
            self.usage = chunk["usage"]
        for choice in chunk.get("choices") or ():
            yield from self._delta(choice.get("delta"))
            if choice.get("finish_reason"):
                self.finish = choice["finish_reason"]

    def _delta(self, delta):
        if not delta:
            return
        for key in REASONING_KEYS:
            thought = delta.get(key)
            if isinstance(thought, str) and thought:
                yield ThoughtDelta(thought)
        content = delta.get("content")
        if isinstance(content, str) and content:
            yield TextDelta(content)
        refusal = delta.get("refusal")
        if isinstance(refusal, str) and refusal:
            self.refused = True
            yield TextDelta(refusal)
        for call in delta.get("tool_calls") or ():
            self._tool_delta(call)

    def _tool_delta(self, call):
        slot = self.calls.setdefault(call.get("index", 0), ["", "", ""])
        if call.get("id") and not slot[0]:
            slot[0] = call["id"]
        function = call.get("function")
        if function:
            if function.get("name") and not slot[1]:
                slot[1] = function["name"]
            slot[2] += function.get("arguments") or ""

    def finish_events(self, name):
        for index in sorted(self.calls):
            call_id, tool, arguments = self.calls[index]
            yield ToolCall(call_id or f"call_{uuid.uuid4().hex[:12]}", tool, arguments or "{}")
        if isinstance(self.usage, dict):
            yield _usage(self.usage)
        yield Stop(self._stop_reason(name))

    def _stop_reason(self, name):
        if self.finish is None:
            if not self.received:
                raise ProviderError(f"{name}: the server sent an empty response")
            log.warning("%s: stream ended without a finish reason", name)
        reason = FINISH_REASONS.get(self.finish)
        if reason is None:
            reason = "tool_use" if self.calls else "end_turn"
        if reason == "end_turn" and self.refused:
            reason = "refusal"
        return reason


def _details(usage, key):
    details = usage.get(key)
    return details if isinstance(details, dict) else {}


def _usage(usage):
    completion = _details(usage, "completion_tokens_details")
    prompt = _details(usage, "prompt_tokens_details")
    return Usage(input_tokens=usage.get("prompt_tokens") or 0,
                 output_tokens=usage.get("completion_tokens") or 0,
                 thought_tokens=completion.get("reasoning_tokens") or 0,
                 cached_tokens=prompt.get("cached_tokens") or 0)


# ---------------------------------------------------------------- the provider
class OpenAIProvider(Provider):
    name = "openai"
    APIS = ("responses", "chat")

    def __init__(self, name="openai", api_key=None, base_url=None, timeout=600.0, max_retries=2,
                 headers=None, connect_timeout=15.0, api=None, prompt_cache_key=None):
        self.name = name
        self.base_url, self._api_key, self._key_hint = resolve_credentials(
            name, "openai", api_key, base_url, "OPENAI_API_KEY", "OPENAI_BASE_URL")
        self._host = host_of(self.base_url, "api.openai.com")
        official = is_official(self._host)
        if api not in (None, *self.APIS):
            raise ProviderNotConfigured(f'{name}: api must be "responses" or "chat", not {api!r}')
        if prompt_cache_key is not None and not isinstance(prompt_cache_key, bool):
            raise ProviderNotConfigured(f"{name}: prompt_cache_key must be true or false")
        # another server is asked once what it takes (compat.py)
        self.server = compat.Server(self.base_url or DEFAULT_BASE_URL,
                                    api or ("responses" if official else None),
                                    True if official and prompt_cache_key is None
                                    else prompt_cache_key)
        extra = {"Authorization": f"Bearer {self._api_key}"}
        if name == "openai":  # the SDK's organization/project variables, still honoured
            for var, header in (("OPENAI_ORG_ID", "OpenAI-Organization"),
                                ("OPENAI_PROJECT_ID", "OpenAI-Project")):
                if os.environ.get(var):
                    extra[header] = os.environ[var]
        extra.update(headers or {})
        self._client = HTTPClient(self.base_url or DEFAULT_BASE_URL, extra, name,
                                  self._key_hint, self._api_key, connect_timeout=connect_timeout,
                                  read_timeout=timeout, max_retries=max_retries)

    @property
    def api(self):
        """The API the next request uses: ``responses`` or ``chat``."""
        return self.server.choice()[0]

    @property
    def sends_cache_key(self):
        return self.server.choice()[1]

    @property
    def web_search(self):
        """The Responses API has a web search tool; Chat Completions has none."""
        return self.api == "responses"

    def close(self):
        self._client.close()

    def list_models(self, timeout=10.0):
        """Model ids the server lists at ``/models`` (the model config option,
        sessions/config_options.py); from the official endpoint only the chat models."""
        body = self._client.get_json("/models", timeout)
        data = body.get("data") if isinstance(body, dict) else None
        ids = [m["id"] for m in data or () if isinstance(m, dict) and isinstance(m.get("id"), str)]
        return [i for i in ids if chat_model(i)] if is_official(self._host) else ids

    def stream(self, request):
        while True:
            api, keyed = self.server.choice()
            key = request.cache_key if keyed else None
            if api == "responses":
                params, state = self._responses(request, key)
            else:
                params = chat_params(request, official=is_official(self._host), cache_key=key)
                state = ChatStreamState()
            try:
                yield from self._stream(request, self.path(api, request), params, state)
            except ProviderError as exc:  # refused before any answer: the other way, once
                if getattr(exc, "status", 200) != 200 and self.server.refused(exc, api, keyed):
                    log.info("%s: %s refused (%s); going on without it", self.name,
                             "the Responses API" if api == "responses" and
                             self.server.learned.get("api") == "chat" else "prompt_cache_key", exc)
                    continue
                raise
            self.server.accepted(api, keyed)
            return

    def path(self, api, request):
        """The route of ``api`` for ``request`` (Azure's differ)."""
        return "/responses" if api == "responses" else "/chat/completions"

    @staticmethod
    def _responses(request, key):
        params = responses.response_params(request, key)
        known = family(request.model)
        if request.effort in (None, "default") and known and known[2]:
            responses.with_reasoning(params)
        return params, responses.ResponseStreamState()

    def _stream(self, request, path, params, state):
        client, response = self._client, None
        try:
            response = yield from client.stream(path, params)
            for chunk in sse_json(client, response, self.name):
                if not isinstance(chunk, dict):
                    raise MalformedResponse(f"{self.name}: malformed response from "
                                            f"{client.target.netloc}: not a JSON object")
                if chunk.get("error") and chunk.get("type") != "response.failed" \
                        or chunk.get("type") == "error":
                    raise client.status_error(200, chunk, "the server reported an error")
                yield from state.feed(chunk)
                if getattr(state, "status", None) == "failed":
                    raise client.status_error(200, {"error": state.failure},
                                              "the response failed")
            yield from state.finish_events(self.name)
        finally:
            if response is not None:
                response.close()


NOT_CHAT = ("audio", "realtime", "tts", "transcribe", "image", "embedding", "moderation",
            "search", "dall-e", "whisper", "davinci", "babbage", "instruct")


def chat_model(model_id):
    """An official model id that can hold a conversation (the model config option leaves out audio,
    image, embedding... models the endpoint also lists)."""
    name = model_id.lower()
    return name.startswith(("gpt-", "o1", "o3", "o4", "chatgpt", "codex")) \
        and not any(word in name for word in NOT_CHAT)
