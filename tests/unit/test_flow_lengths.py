"""Flow lengths (issue 11): how many Python calls inside ``term2acp`` two flows make.

1. prompt: from the ``session/prompt`` line to the write of the idle ``state_update``, for
   a one-round text answer, in a fresh session;
2. tool call: from the provider yielding a ``read_file`` call outside the workspace root
   (it needs approval; the client allows once) to the write of its ``completed`` update.

The real agent runs in this process (``tests/support/flowtrace.py``: the composition root
over pipes, the scripted provider, the real tools and store); a warm-up session plays the
same flow first (imports, caches, the sandbox probe), then two fresh sessions are measured
and must count the same. Run with ``-s`` to see the calls per module and the top functions.

How counted: ``call`` events (``sys.setprofile``) of code under ``term2acp/``, in every
greenlet and native thread, between the two wire events above; a generator's resume is
not a new call (printed apart); "distinct" is the number of functions called at least
once. Output that is printed but not bounded: calls per module, the top 15 functions, calls
per greenlet, Python calls outside ``term2acp`` and the lines written in the window.

Before (commit 04f6273, measured 2026-11-30, CPython 3.11.7, greenlet 3.5.6, gevent 26.9.0)::

    prompt     238 calls, 119 distinct functions, 10 generator resumes, 7 lines written
    tool call  295 calls, 134 distinct functions, 16 generator resumes, 8 lines written

(Each line written costs about a dozen calls on the way out: emit, journal record, the
face's sink, translation, control updates, notify, encode, the writer's queue, its chunk
tag. The store's ``_execute``/``_write`` are the largest single entries.)

After the consolidation (same day: one prompt state machine, one record per tool call,
events tagged by the face's sink instead of the writer asking server -> agent -> manager,
one table lookup per event, the store's batches off the hub)::

    prompt     218 calls, 133 distinct functions, 10 generator resumes, 7 lines written
    tool call  266 calls, 131 distinct functions, 16 generator resumes, 8 lines written

Later (a session/update is one sender from the face's sink to the writer's
queue, ``Endpoint.notifier`` through ``send``; the commit before asking the model does not
wait; the store's barrier waits natively first, pinned here; the runtime's events are slotted
classes whose ``__init__`` is now counted: a dataclass's generated one lived in
``<string>`` and was not)::

    prompt     238 calls, 144 distinct functions, 12 generator resumes, 7 lines written
    tool call  240 calls, 133 distinct functions, 13 generator resumes, 8 lines written

Each line written costs 7-8 calls (emit, event, journal record, sink, the update builder,
the sender, encode, the writer's queue). The aim of issue 11 (half of the before numbers: 119
and 148) is not reached: most of what is left is one call per step of the prompt's work
(admission, content, provider, context, instructions, title, store).
The bounds are the latest numbers plus about 4-6 %, so a regression fails.
"""

import pytest

from tests.support.flowtrace import FlowAgent, check_coverage

WAIT = 30

PROMPT_BOUND = 248  # calls; before 238, after 218, latest 238
TOOL_CALL_BOUND = 255  # calls; before 295, after 266, latest 240

ANSWER = [[{"text": "Hello there."}]]


def tool_turns(path):
    return [[{"tool_call": {"name": "read_file", "arguments": {"path": path}}}],
            [{"text": "Read it."}]]


@pytest.fixture
def started(tmp_path):
    agents = []

    def start(turns):
        agent = FlowAgent(tmp_path, turns).start()
        agents.append(agent)
        agent.initialize()
        return agent

    yield start
    for agent in agents:
        agent.close()


def test_profiling_reaches_every_greenlet():
    assert check_coverage(), "sys.setprofile does not reach every greenlet: counts would be low"


def _measure_twice(agent, measure, text):
    """Each session is closed after its prompt: every measured prompt runs with one live
    session (the store's commit hook visits every live session)."""
    warm = agent.new_session()  # the same flow once, not counted
    idle = agent.prompt(warm, text).get(timeout=WAIT)
    assert idle["params"]["update"].get("stopReason") == "end_turn"
    agent.close_session(warm)
    runs = []
    for _ in range(2):
        session_id = agent.new_session()
        idle = measure(session_id, text)
        assert idle["params"]["update"].get("stopReason") == "end_turn"
        runs.append(agent.counter.snapshot())
        report = agent.counter.report
        agent.close_session(session_id)
    first, second = runs
    changed = {key: (first["calls"].get(key), second["calls"].get(key))
               for key in set(first["calls"]) | set(second["calls"])
               if first["calls"].get(key) != second["calls"].get(key)}
    assert not changed, f"the count differs from one run to the next: {changed}"
    return first, report


def test_prompt_to_idle(started):
    agent = started(ANSWER)
    counts, report = _measure_twice(agent, agent.measure_prompt, "say hello")
    print("\n" + report("prompt: session/prompt line -> idle state_update written"))
    assert counts["total"] <= PROMPT_BOUND, counts["total"]


def test_tool_call_to_completed(started, tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "notes.txt").write_text("outside notes\n")
    agent = started(tool_turns(str(outside / "notes.txt")))
    counts, report = _measure_twice(agent, agent.measure_tool_call, "read the notes")
    asked = [m for m in agent.messages if m.get("method") == "session/request_permission"]
    assert len(asked) == 3  # warm-up and both measured sessions were asked, and allowed
    print("\n" + report("tool call: provider yields read_file (needs approval) -> "
                        "completed update written"))
    assert counts["total"] <= TOOL_CALL_BOUND, counts["total"]
