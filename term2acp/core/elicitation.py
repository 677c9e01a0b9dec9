"""Questions put to the user through the editor: ACP's ``elicitation/create``.

The runtime describes a question as an :class:`Elicitation` (a form with a requested
schema, or a URL to open) and gets back an :class:`Elicited`: ``accept`` with the
content the user gave, ``decline``, or ``cancel``. Every doubtful path is a ``decline``
or a ``cancel``, never an ``accept``: no answer before the timeout, the editor gone, an
error, an answer that does not match the requested schema. A tool asks with
``ctx.elicit(elicitation)`` (``tools/base.py``) after checking ``ctx.elicits(mode)``; the
face's gate sends the request (``acp/elicitation.py``).
"""

from term2acp.core.record import Record

FORM, URL = "form", "url"
ACCEPT, DECLINE, CANCEL = "accept", "decline", "cancel"

# reasons of a decline or cancel the user did not choose
NOT_SUPPORTED = "The editor does not take this kind of question."
TIMED_OUT = "No answer to the question before the timeout."
DISCONNECTED = "The editor went away before answering."
FAILED = "The editor failed to ask the question."
MALFORMED = "The editor's answer was not a valid answer to the question."


class Elicitation(Record):
    """``mode`` FORM: ``schema`` is the requested schema (an object of primitive
    properties, ACP's ``ElicitationSchema``). ``mode`` URL: ``url`` and ``elicitation_id``
    (the id a later ``elicitation/complete`` names)."""

    __slots__ = ("mode", "message", "schema", "url", "elicitation_id")

    def __init__(self, mode, message, schema=None, url=None, elicitation_id=None):
        self.mode = mode
        self.message = message
        self.schema = schema
        self.url = url
        self.elicitation_id = elicitation_id


class Elicited(Record):
    """The user's answer: ``content`` (a dict of the schema's properties) only on accept;
    ``reason`` says why a decline or cancel was not the user's own."""

    __slots__ = ("action", "content", "reason")

    def __init__(self, action, content=None, reason=""):
        self.action = action
        self.content = content
        self.reason = reason

    @property
    def accepted(self):
        return self.action == ACCEPT


def string_question(message, options=(), title=None):
    """A form with one string property ``answer`` (an ``enum`` of ``options`` when given)."""
    prop = {"type": "string", "title": title or "Answer"}
    if options:
        prop["enum"] = list(options)
    return Elicitation(FORM, message, {"type": "object", "properties": {"answer": prop},
                                       "required": ["answer"]})
