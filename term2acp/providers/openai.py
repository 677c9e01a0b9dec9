"""OpenAI Chat Completions provider; also serves any OpenAI-compatible server.

The ``openai`` SDK is imported on the first :meth:`OpenAIProvider.stream`, never at module
import or construction, so start-up stays fast. The SDK supplies retries with backoff on
429/5xx (``max_retries``, honouring ``Retry-After``/``retry-after-ms``). A few helpers
here (loopback check, SDK import guard, safe error text) are shared with
``anthropic.py``.
"""

import ipaddress
import logging
import os
import sys
import uuid
from urllib.parse import urlsplit

from term2acp.providers.base import (
    Provider,
    ProviderError,
    ProviderNotConfigured,
    Stop,
    TextDelta,
    ThoughtDelta,
    ToolCall,
    Usage,
)

log = logging.getLogger(__name__)

PLACEHOLDER_KEY = "not-needed"  # local servers ignore the key, the SDK insists on one
EFFORTS = ("none", "minimal", "low", "medium", "high", "xhigh")
FINISH_REASONS = {"stop": "end_turn", "tool_calls": "tool_use", "function_call": "tool_use",
                  "length": "max_tokens", "content_filter": "refusal"}
REASONING_KEYS = ("reasoning_content", "reasoning")
MESSAGE_LIMIT = 300  # characters of a server's error message kept in ours


# ---------------------------------------------------------------- shared helpers
def is_loopback(url):
    host = urlsplit(url or "").hostname or ""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def host_of(url, default):
    return urlsplit(url).netloc if url else default


def is_official(host):
    name = host.rsplit(":", 1)[0]
    return name == "api.openai.com" or name.endswith(".openai.azure.com")


def resolve_credentials(name, builtin, api_key, base_url, key_var, url_var):
    """``(base_url, api_key, key hint)`` for a provider instance.

    Only the built-in provider reads its environment variables: a custom-named one
    (Ollama, OpenRouter...) must never receive the user's OpenAI or Anthropic key by
    accident. A loopback server without a key gets a placeholder (the SDKs insist).
    """
    env = os.environ if name == builtin else {}
    base_url = base_url or env.get(url_var) or None
    key = api_key or env.get(key_var)
    if not key:
        if not is_loopback(base_url):
            raise ProviderNotConfigured(
                f"{name}: no API key: set {key_var} (or {url_var} for a local server)" if env
                else f"{name}: no API key configured for {base_url or 'its default endpoint'}")
        key = PLACEHOLDER_KEY
    return base_url, key, key_var if env else "its API key"


def transport_message(name, host, exc, midstream):
    reason = str(exc.__cause__ or exc) or type(exc).__name__
    where = "lost the connection to" if midstream else "cannot reach"
    return f"{name}: {where} {host}: {reason}"


def malformed_message(name, host, exc):
    return f"{name}: malformed response from {host}: {exc}"[:MESSAGE_LIMIT]


def prepare_sdk_import():
    """Let the SDKs' HTTP stack (httpcore2) load under gevent.

    httpcore2 imports ``trio`` when it is installed; under gevent's patched ``select``
    trio fails with AttributeError (no ``epoll``), which httpcore2 does not catch. Mark
    trio unavailable instead: it cannot run in this process anyway.
    """
    if "trio" in sys.modules:
        return
    try:
        import trio  # noqa: F401
    except ImportError:
        pass
    except Exception as exc:  # AttributeError under gevent, possibly others
        log.debug("trio cannot load here (%s); hiding it from httpcore2", type(exc).__name__)
        sys.modules["trio"] = None


def server_message(body, fallback):
    """The human part of an API error body, shortened."""
    inner = body.get("error", body) if isinstance(body, dict) else body
    message = inner.get("message") if isinstance(inner, dict) else inner
    text = message if isinstance(message, str) and message else fallback
    return text[:MESSAGE_LIMIT]


def scrub(text, secret):
    if not secret or secret == PLACEHOLDER_KEY or len(secret) < 8:
        return text
    return text.replace(secret, "***")


def close_quietly(stream):
    if stream is None:
        return
    try:
        stream.close()
    except Exception as exc:
        log.debug("closing the SDK stream failed: %s", type(exc).__name__)


# ---------------------------------------------------------------- request building
def chat_messages(system, messages):
    out = [{"role": "system", "content": system}] if system else []
    for message in messages:
        role = message["role"]
        if role == "user":
            out.append({"role": "user", "content": message["content"]})
        elif role == "assistant":
            out.append(_assistant_message(message))
        elif role == "tool":
            content = message.get("content") or ""
            if message.get("is_error"):
                content = "Error: " + content
            out.append({"role": "tool", "tool_call_id": message["tool_call_id"],
                        "content": content})
        else:
            raise ValueError(f"unsupported message role {role!r}")
    return out


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


def chat_params(request, official):
    params = {"model": request.model, "messages": chat_messages(request.system, request.messages),
              "stream": True, "stream_options": {"include_usage": True}}
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
    """Accumulates one streamed completion and turns chunks into provider events."""

    def __init__(self):
        self.calls = {}  # index -> [id, name, arguments]
        self.finish = None
        self.usage = None
        self.refused = False
        self.received = False

    def feed(self, chunk):
        self.received = True
        if getattr(chunk, "usage", None):
            self.usage = chunk.usage
        for choice in chunk.choices or ():
            yield from self._delta(choice.delta)
            if choice.finish_reason:
                self.finish = choice.finish_reason

    def _delta(self, delta):
        if delta is None:
            return
        for key in REASONING_KEYS:
            thought = getattr(delta, key, None)
            if isinstance(thought, str) and thought:
                yield ThoughtDelta(thought)
        if delta.content:
            yield TextDelta(delta.content)
        if getattr(delta, "refusal", None):
            self.refused = True
            yield TextDelta(delta.refusal)
        for call in delta.tool_calls or ():
            self._tool_delta(call)

    def _tool_delta(self, call):
        slot = self.calls.setdefault(call.index, ["", "", ""])
        if call.id and not slot[0]:
            slot[0] = call.id
        function = call.function
        if function is not None:
            if function.name and not slot[1]:
                slot[1] = function.name
            slot[2] += function.arguments or ""

    def finish_events(self, name):
        for index in sorted(self.calls):
            call_id, tool, arguments = self.calls[index]
            yield ToolCall(call_id or f"call_{uuid.uuid4().hex[:12]}", tool, arguments or "{}")
        if self.usage is not None:
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


def _usage(usage):
    completion = getattr(usage, "completion_tokens_details", None)
    prompt = getattr(usage, "prompt_tokens_details", None)
    return Usage(input_tokens=usage.prompt_tokens or 0,
                 output_tokens=usage.completion_tokens or 0,
                 thought_tokens=getattr(completion, "reasoning_tokens", None) or 0,
                 cached_tokens=getattr(prompt, "cached_tokens", None) or 0)


# ---------------------------------------------------------------- the provider
class OpenAIProvider(Provider):
    name = "openai"

    def __init__(self, name="openai", api_key=None, base_url=None, timeout=600.0, max_retries=2):
        self.name = name
        self.base_url, self._api_key, self._key_hint = resolve_credentials(
            name, "openai", api_key, base_url, "OPENAI_API_KEY", "OPENAI_BASE_URL")
        self._timeout = timeout
        self._max_retries = max_retries
        self._client = None
        self._host = host_of(self.base_url, "api.openai.com")

    def stream(self, request):
        client = self._sdk_client()
        params = chat_params(request, official=is_official(self._host))
        import openai

        state, response = ChatStreamState(), None
        try:
            try:
                response = client.chat.completions.create(**params)
                for chunk in response:
                    yield from state.feed(chunk)
            except (openai.OpenAIError, ValueError) as exc:
                raise self._error(exc, state.received) from None
            yield from state.finish_events(self.name)
        finally:
            close_quietly(response)

    def _sdk_client(self):
        if self._client is None:
            prepare_sdk_import()
            import openai

            self._client = openai.OpenAI(
                api_key=self._api_key, base_url=self.base_url, max_retries=self._max_retries,
                timeout=openai.Timeout(self._timeout, connect=min(self._timeout, 15.0)))
        return self._client

    def _error(self, exc, midstream):
        import openai

        log.debug("%s request failed: %s", self.name, type(exc).__name__)
        if isinstance(exc, ValueError):  # undecodable JSON in the stream
            text = malformed_message(self.name, self._host, exc)
        elif isinstance(exc, openai.AuthenticationError):
            text = f"{self.name}: authentication failed (check {self._key_hint})"
        elif isinstance(exc, openai.APIConnectionError):
            text = transport_message(self.name, self._host, exc, midstream)
        elif isinstance(exc, openai.APIStatusError):
            text = (f"{self.name}: HTTP {exc.status_code}: "
                    f"{server_message(exc.body, exc.message)}")
        elif isinstance(exc, openai.APIError):
            text = f"{self.name}: {server_message(exc.body, exc.message)}"
        else:
            text = f"{self.name}: {exc}"
        return ProviderError(scrub(text, self._api_key))
