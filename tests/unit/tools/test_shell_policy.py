"""The shell's questions: the network on request (grants for the session or a command
prefix), ask mode (asks every time for the network; a prefix grant for other commands),
the prefix only for one simple command, and option lists valid in both protocol versions."""

from types import SimpleNamespace

import pytest

from term2acp.acp.v2 import permissions
from term2acp.acp.v1 import permissions as v1_permissions
from term2acp.core import approvals, commandline
from term2acp.core.access import AccessState
from term2acp.settings import Settings
from term2acp.testing import schema
from term2acp.tools import shell_policy


def ctx(mode="auto", network_setting=False, access=None):
    settings = Settings.load(env={})
    settings.shell.network = network_setting
    return SimpleNamespace(settings=settings, access=access or AccessState("/w"), mode=mode)


def check(command, network=False, **kwargs):
    return shell_policy.check({"command": command, "network": network}, ctx(**kwargs))


@pytest.mark.parametrize("command, words, prefix", [
    ("npm install left-pad", ["npm", "install", "left-pad"], ("npm", "install")),
    ("git clone https://example.invalid/r.git", None, ("git", "clone")),
    ("curl -s http://127.0.0.1:9/x", None, ("curl",)),
    ("python3 -m http.server", None, ("python3",)),
    ("pip install -r req.txt > log.txt 2>&1", None, ("pip", "install")),
    ('curl -d "a;b" http://x', ["curl", "-d", "a;b", "http://x"], ("curl",)),
    ("npm install; curl evil", None, None),
    ("npm install && curl evil", None, None),
    ("npm install | sh", None, None),
    ("npm install & curl evil", None, None),
    ("npm install $(curl evil)", None, None),
    ("npm install `curl evil`", None, None),
    ("npm install\ncurl evil", None, None),
    ("(curl evil)", None, None),
    ("FOO=1 npm install", None, None),
    ("echo 'unclosed", None, None),
    ("", None, None),
])
def test_prefix_only_for_one_simple_command(command, words, prefix):
    assert commandline.prefix_of(command) == prefix
    if words is not None:
        assert commandline.words(command) == words
    if prefix is None:
        assert commandline.words(command) is None


def test_no_network_asked_nothing_in_auto():
    plan = check("ls")
    assert plan.request is None and plan.network is False


def test_network_asks_with_three_options_that_say_what_they_open():
    """No choice grants the network to commands that start with given words: what such a
    command runs with it (git clone --upload-pack=..., npm scripts) is not what it says."""
    for command in ("npm install left-pad", "npm install && curl x"):
        plan = check(command, network=True)
        assert plan.network is True and plan.request.variant == approvals.NETWORK
        assert interaction_for(plan.request).choices == (
            ("allow-once", "Allow once (this command gets the host's whole network)",
             "allow_once"),
            ("allow-network-session", "Allow the host's whole network to every command of "
                                      "this session", "allow_always"),
            ("reject", "Reject", "reject_once"))


def test_the_config_switch_gives_every_command_the_network_without_asking():
    plan = check("curl http://x", network=True, network_setting=True)
    assert plan.request is None


def test_the_network_grant_is_for_the_session_and_nothing_else():
    access = AccessState("/w")
    request = check("npm install left-pad", network=True).request
    access.grant("allow-network-prefix-session", request)  # an old client's choice: nothing
    assert check("npm install other", network=True, access=access).request is not None
    access.grant("allow-network-session", request)
    assert check("curl http://x; echo", network=True, access=access).request is None
    access.clear()  # the session ended
    assert check("npm install x", network=True, access=access).request is not None


def test_ask_mode_asks_for_the_network_despite_grants():
    access = AccessState("/w")
    access.network = True
    access.command_prefixes.add(("npm", "install"))
    plan = check("npm install x", network=True, mode="ask", access=access)
    assert plan.request.variant == approvals.NETWORK and plan.network


def test_ask_mode_offers_a_command_prefix_grant():
    access = AccessState("/w")
    plan = check("make test", mode="ask", access=access)
    assert plan.request.variant == approvals.COMMAND and plan.network is False
    assert [c[0] for c in interaction_for(plan.request).choices] == [
        "allow-once", "allow-command-prefix-session", "reject"]
    access.grant("allow-command-prefix-session", plan.request)
    assert check("make test -j4", mode="ask", access=access).request is None
    assert check("make lint", mode="ask", access=access).request is not None
    assert check("make test && rm -rf x", mode="ask", access=access).request is not None


def test_a_command_prefix_grant_is_not_a_network_grant():
    access = AccessState("/w")
    access.command_prefixes.add(("npm", "install"))
    assert check("npm install", network=True, access=access).request.variant == approvals.NETWORK


def interaction_for(request):
    return approvals.Interaction("int_1", request.variant, "tc_1", "shell", request.title,
                                 "execute", {"command": "x", "network": True}, [], [], None,
                                 commandline.shown_prefix(request.prefix))


@pytest.mark.parametrize("variant, prefix", [(approvals.NETWORK, ("npm", "install")),
                                             (approvals.NETWORK, None),
                                             (approvals.COMMAND, ("make", "test"))])
def test_requests_and_answers_valid_in_both_versions(variant, prefix):
    request = approvals.ApprovalRequest(variant, title="Allow network access for: x",
                                        prefix=prefix)
    interaction = interaction_for(request)
    for version, params_for in ((2, permissions.request_params),
                                (1, v1_permissions.request_params)):
        message = {"jsonrpc": "2.0", "id": 7, "method": "session/request_permission",
                   "params": params_for("s", interaction)}
        assert schema.check_message(message, {}, version) == []
    for choice_id, _label, kind in interaction.choices:
        decision = permissions.decision_for(
            {"outcome": {"outcome": "selected", "optionId": choice_id}}, interaction)
        assert decision.allowed == kind.startswith("allow")
    unknown = permissions.decision_for(
        {"outcome": {"outcome": "selected", "optionId": "allow-network-prefix-session"}},
        interaction_for(approvals.ApprovalRequest(variant, prefix=None)))
    assert not unknown.allowed  # a prefix choice not offered is unknown: denied


@pytest.mark.parametrize("output, hinted", [
    ("curl: (6) Could not resolve host: pypi.org\nexit code 6", True),
    ("fatal: unable to access: Could not resolve hostname github.com", True),
    ("npm ERR! getaddrinfo EAI_AGAIN registry.npmjs.org", True),
    ("ls: cannot access 'x': No such file or directory\nexit code 2", False),
])
def test_a_command_that_wanted_the_network_gets_a_hint(output, hinted):
    from term2acp.tools.base import ToolResult

    result = shell_policy.with_network_hint(ToolResult(output, is_error=True), False)
    assert (shell_policy.NETWORK_HINT in result.text) == hinted
    granted = shell_policy.with_network_hint(ToolResult(output, is_error=True), True)
    assert shell_policy.NETWORK_HINT not in granted.text  # it had the network: no hint
