"""What a live session needs of the protocol face that opens it (no imports: the faces
load it before ``initialize`` is answered)."""


class FaceLink:
    """What a session needs of the protocol face that opens it: handed to the session
    manager with new, resume, load and fork, and given to the session's constructor (a
    face sets nothing on a session). ``sink(session, event)`` shows what the session emits;
    ``config_options`` (``sessions/config_options.py``) are the face's option values;
    ``editor(session_id)`` makes the editor's file access for the tools (v1 ``fs/*``), or
    is None; ``failures_as_errors``: a failed turn is said as the prompt's error (v1), not
    as an agent message. What a face keeps per session is its own record
    (``acp/handlers.py`` ``FaceSession``)."""

    __slots__ = ("sink", "config_options", "editor", "failures_as_errors")

    def __init__(self, sink=None, config_options=None, editor=None, failures_as_errors=False):
        self.sink = sink
        self.config_options = config_options
        self.editor = editor
        self.failures_as_errors = failures_as_errors


NO_FACE = FaceLink()  # a session opened without a protocol face (unit tests)
