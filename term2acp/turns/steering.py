"""Steering: a prompt sent while a turn runs joins that turn.

A steering prompt (``_session/steering``, or ``session/prompt`` with
``_meta.steering: true``) queued on a busy session (``session.steering``) becomes a user
message of the running turn right before its next model request: never while a
permission request or a question is open (the turn greenlet is waiting then), and a turn
whose model was done goes on for one more request when one is queued. The editor sees it
as the user's message (replayed too), with its own message id.
"""

from term2acp.core import events as ev


def queue(session, message_id, blocks, text):
    session.steering.append((message_id, blocks, text))


def pending(session):
    return bool(session.steering)


def take(session):
    """Put the queued steering prompts into the conversation; True when there were some."""
    queued, session.steering = session.steering, []
    for message_id, blocks, text in queued:
        session.emit(ev.UserMessage(message_id, blocks))
        message = {"role": "user", "content": text, "message_id": message_id}
        if getattr(text, "images", None):
            message["images"] = list(text.images)
        session.append_history(message)
    return bool(queued)
