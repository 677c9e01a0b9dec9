"""Amazon Bedrock (``--provider bedrock``): the Converse stream API, signed with SigV4.

``--model`` is a Bedrock model id or inference profile as Bedrock names it
(``us.anthropic.claude-sonnet-4-5-20250929-v1:0``). Credentials come from botocore's
standard chain (the environment, ``AWS_PROFILE`` and the shared files, SSO, container and
instance roles), refreshed by botocore when they expire; the region from ``AWS_REGION``,
``AWS_DEFAULT_REGION``, the profile, or ``[providers.bedrock] region``; the endpoint from
``AWS_ENDPOINT_URL_BEDROCK_RUNTIME`` (or ``base_url``) when it is not the region's.
Every attempt of a request is signed anew (``HTTPClient.sign``), so a retry carries a
fresh date. botocore (the ``[bedrock]`` extra) is imported only by this module, which is
imported only when a session uses Bedrock. Body and events: ``bedrock_wire.py``.
"""

import logging
import os
from urllib.parse import quote

import botocore.session
import gevent
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.eventstream import EventStreamBuffer
from botocore.exceptions import BotoCoreError

from term2acp.providers import bedrock_wire as wire
from term2acp.providers.base import Provider, ProviderNotConfigured
from term2acp.providers.errors import ProviderError
from term2acp.providers.http import HTTPClient

log = logging.getLogger(__name__)

SIGNING_NAME = "bedrock"
KEY_HINT = "AWS_PROFILE or AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY"
READ_SIZE = 65536


class BedrockProvider(Provider):
    name = "bedrock"

    def __init__(self, name="bedrock", env=None, region=None, prompt_cache=True, base_url=None,
                 timeout=600.0, max_retries=2, headers=None, connect_timeout=15.0):
        env = os.environ if env is None else env
        self.name = name
        self.cache = prompt_cache is not False
        try:  # reading the AWS files takes tens of ms: not on the hub
            self._session, profile_region = gevent.get_hub().threadpool.apply(_open_session)
        except BotoCoreError as exc:  # a broken profile or config file
            raise ProviderNotConfigured(f"{name}: AWS configuration: {exc}") from None
        self.region = env.get("AWS_REGION") or env.get("AWS_DEFAULT_REGION") or region \
            or profile_region
        if not self.region:
            raise ProviderNotConfigured(f"{name}: no AWS region: set AWS_REGION (or the "
                                        "profile's region, or [providers.bedrock] region)")
        endpoint = env.get("AWS_ENDPOINT_URL_BEDROCK_RUNTIME") or base_url \
            or env.get("AWS_ENDPOINT_URL") \
            or f"https://bedrock-runtime.{self.region}.amazonaws.com"
        self._client = HTTPClient(endpoint, {"Accept": "application/vnd.amazon.eventstream",
                                             **(headers or {})}, name, KEY_HINT, None,
                                  connect_timeout=connect_timeout, read_timeout=timeout,
                                  max_retries=max_retries, sign=self._sign)
        # the control plane (the model listing): bedrock.<region>, or the runtime's endpoint
        # when one is named (a gateway or a test serves both)
        control = env.get("AWS_ENDPOINT_URL_BEDROCK") or (
            endpoint if endpoint != f"https://bedrock-runtime.{self.region}.amazonaws.com"
            else f"https://bedrock.{self.region}.amazonaws.com")
        self._control = HTTPClient(control, dict(headers or {}), name, KEY_HINT, None,
                                   connect_timeout=connect_timeout, sign=self._sign)

    def _credentials(self):
        try:  # the chain may read files or ask a metadata endpoint: off the hub
            frozen = gevent.get_hub().threadpool.apply(_frozen, (self._session,))
        except BotoCoreError as exc:
            raise ProviderNotConfigured(f"{self.name}: AWS credentials: {exc} (check "
                                        f"{KEY_HINT})") from None
        if frozen is None or not frozen.access_key:
            raise ProviderNotConfigured(
                f"{self.name}: no AWS credentials: set AWS_PROFILE (aws configure, aws sso "
                "login) or AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY")
        return frozen

    def _sign(self, method, url, body, headers):
        request = AWSRequest(method=method, url=url, data=body,
                             headers={k: v for k, v in headers.items()
                                      if k.lower() in ("content-type", "accept")})
        SigV4Auth(self._credentials(), SIGNING_NAME, self.region).add_auth(request)
        return {k: v for k, v in request.headers.items()
                if k.lower() in ("authorization", "x-amz-date", "x-amz-security-token")}

    def close(self):
        self._client.close()

    def list_models(self, timeout=10.0):
        """The inference profiles, then the on-demand text models that stream (the model
        config option)."""
        profiles = self._control.call("GET", "/inference-profiles?maxResults=1000", None, timeout)
        models = self._control.call("GET", "/foundation-models?byOutputModality=TEXT", None,
                                    timeout)
        out = [p["inferenceProfileId"] for p in (profiles or {}).get("inferenceProfileSummaries")
               or () if isinstance(p, dict) and isinstance(p.get("inferenceProfileId"), str)]
        out += [m["modelId"] for m in (models or {}).get("modelSummaries") or ()
                if isinstance(m, dict) and isinstance(m.get("modelId"), str)
                and m.get("responseStreamingSupported") is not False
                and "ON_DEMAND" in (m.get("inferenceTypesSupported") or ("ON_DEMAND",))]
        return out

    def stream(self, request):
        body = wire.converse_body(request, cache=self.cache)
        path = f"/model/{quote(request.model, safe='')}/converse-stream"
        client, state, response = self._client, wire.StreamState(self.name), None
        try:
            response = yield from client.stream(path, body)
            for kind, event in self._events(response):
                yield from state.feed(kind, event)
            yield from state.finish_events()
        finally:
            if response is not None:
                response.close()

    def _events(self, response):
        """``(event type, payload)`` of each message; an exception message raises."""
        buffer = EventStreamBuffer()
        while True:
            try:
                chunk = response.read1(READ_SIZE)
            except OSError as exc:
                raise self._client.lost(response.url, exc) from None
            if not chunk:
                return
            buffer.add_data(chunk)
            try:
                messages = list(buffer)
            except Exception as exc:  # noqa: BLE001 - botocore's checksum and framing errors
                raise ProviderError(f"{self.name}: malformed event stream from "
                                    f"{self._client.target.netloc}: {exc}") from None
            for message in messages:
                headers = message.headers
                event = wire.payload(message)
                if headers.get(":message-type") == "exception":
                    kind = headers.get(":exception-type") or "exception"
                    raise self._client.status_error(
                        200, {"error": {"type": _code(kind), "message": event.get("message")
                                        or kind}}, kind)
                yield headers.get(":event-type"), event


def _open_session():
    session = botocore.session.Session()
    return session, session.get_config_variable("region")


def _frozen(session):
    found = session.get_credentials()
    return found.get_frozen_credentials() if found is not None else None


def _code(kind):
    """Bedrock's exception names as the codes our error kinds know."""
    return {"throttlingException": "rate_limit_error",
            "serviceUnavailableException": "overloaded_error"}.get(kind, kind)
