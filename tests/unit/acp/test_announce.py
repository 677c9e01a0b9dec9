"""A prompt's first update never overtakes its session's commands update (acp/handlers.py).

Both wait for the preload (term2acp/preload.py, through the session layer's
``turns_ready``); when it is ready their greenlets may resume in either order, and
transcripts (and editors) expect the commands update first."""

import gevent
import gevent.pool
from gevent.event import Event

from term2acp.acp.handlers import BaseHandlers
from term2acp.settings import Settings
from tests.support.turnsession import TurnSessionStub


class Session(TurnSessionStub):
    def __init__(self):
        super().__init__("/nonexistent/workspace")  # no command files
        self.provider_id = "scripted"


class ConfigOptions:
    def list_models(self, provider, group):
        pass


class Manager:
    catalog = None

    def __init__(self, ready):
        self._ready = ready

    def turns_ready(self):
        return self._ready.wait(10)


class Capabilities:
    compaction = False
    elicitation = None


class Face(BaseHandlers):
    def __init__(self, turns_ready, sent):
        super().__init__(Manager(turns_ready), self, Settings(), Capabilities())
        self.config_options = ConfigOptions()
        self._sent = sent

    def update(self, session_id, update, tag=None):
        self._sent.append(update["sessionUpdate"])


def test_a_prompt_waits_for_the_commands_update_of_its_session():
    sent, turns_ready = [], Event()
    face = Face(turns_ready, sent)
    session = Session()
    face.started(session)  # session/new: the commands update waits for the turn layer

    def prompt():  # a prompt that found the turn layer ready first (its admit waited)
        face.manager.turns_ready()
        face.announced(session)
        sent.append("state_update")

    gevent.sleep(0)  # the commands update is waiting now
    glet = gevent.spawn(prompt)
    gevent.sleep(0)
    turns_ready.set()
    glet.join(10)
    session.group.join(10)
    assert sent == ["available_commands_update", "state_update"]


def test_a_commands_change_before_the_first_list_waits_for_it():
    """An MCP server's commands changed (ev.CommandsChanged) before the start's first
    commands update went out: nothing goes before it (the session/new answer comes first),
    and the first list is sent once."""
    sent, turns_ready = [], Event()
    face = Face(turns_ready, sent)
    session = Session()
    face.started(session)
    gevent.sleep(0)
    face._commands_changed(session)  # the sink's handling of CommandsChanged
    assert sent == []
    turns_ready.set()
    session.group.join(10)
    assert sent == ["available_commands_update"]
    face._commands_changed(session)  # the same commands: nothing new to tell
    assert sent == ["available_commands_update"]
