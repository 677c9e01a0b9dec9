"""The launcher's command line: every refusal exits 1 with stdout empty."""

import subprocess
import sys

import pytest

from term2acp import __version__
from term2acp.testing.harness import default_command


def run(args, env, stdin=b""):
    proc = subprocess.run(default_command() + list(args), input=stdin, capture_output=True,
                          env=env, timeout=20)
    return proc.returncode, proc.stdout, proc.stderr.decode()


@pytest.mark.parametrize("args, message", [
    (["--auto-approve"], 'unknown option "--auto-approve"'),
    (["--allow-write"], 'unknown option "--allow-write"'),
    (["--prov", "openai"], 'unknown option "--prov"'),
    (["--provider=openai"], 'unknown option "--provider=openai"'),
    (["-x"], 'unknown option "-x"'),
    (["acp"], 'unexpected argument "acp"'),
    (["--install-model", "--provider", "openai"], "--install-model takes no other arguments"),
    (["--provider"], "--provider requires a value"),
    (["--provider", "--model", "x"], "--provider requires a value"),
    (["--model", ""], "--model requires a value"),
    (["--effort", "huge"], "--effort must be one of: default, none, minimal, low, medium, high, xhigh"),
    (["--provider", "nonesuch"], 'unknown provider "nonesuch"'),
    (["--model", "no-such-model-anywhere"], 'No models match "no-such-model-anywhere"'),
])
def test_cli_refusals_exit_1_with_empty_stdout(agent_env, args, message):
    code, out, err = run(args, agent_env, stdin=b'{"jsonrpc":"2.0","id":1,"method":"initialize"}\n')
    assert code == 1
    assert out == b""
    assert message in err


@pytest.mark.parametrize("toml, line", [
    ('mode = "readonly"\n',
     'mode: "readonly" is not allowed; use one of: read-only, plan, ask, auto'),
    ("[shell]\ntimout = 5\n",
     "shell.timout: unknown key; [shell] takes: timeout, max_timeout, network, "),
    ('max_turn_requests = "5"\n', 'max_turn_requests: must be a whole number, not a string ("5")'),
    ('[providers.mine]\ntype = "gemini"\nbase_url = "http://127.0.0.1:9/v1"\n',
     'providers.mine.type: "gemini" is not allowed; use one of: openai, anthropic'),
    ('[providers.ollama]\nmodels = ["llama3"]\n',  # not "no API key" later: the URL is missing
     "providers.ollama.base_url: is required: the server's URL"),
])
def test_cli_config_mistake_exits_1_naming_file_key_and_allowed_values(agent_env, tmp_path,
                                                                      toml, line):
    config = tmp_path / "config.toml"
    config.write_text(toml)
    code, out, err = run([], dict(agent_env, TERM2ACP_CONFIG=str(config)),
                         stdin=b'{"jsonrpc":"2.0","id":1,"method":"initialize"}\n')
    assert (code, out) == (1, b"")
    head, detail = err.splitlines()
    assert head == f"term2-acp: config file {config} has a mistake:"
    assert detail.startswith(f"  {line}")


def test_cli_unknown_provider_lists_the_known_ones(agent_env):
    _, _, err = run(["--provider", "nonesuch"], agent_env)
    assert "Available providers:" in err
    for name in ("openai", "anthropic", "scripted"):
        assert f"  - {name}  (" in err


def test_cli_ambiguous_model_is_refused(agent_env, tmp_path):
    config = tmp_path / "config.toml"
    config.write_text('[providers.mirror]\ntype = "openai"\nbase_url = "http://127.0.0.1:9/v1"\n'
                      'models = ["gpt-4o"]\n')
    code, out, err = run(["--model", "gpt-4o"], dict(agent_env, TERM2ACP_CONFIG=str(config)))
    assert code == 1 and out == b""
    assert "cannot resolve --model \"gpt-4o\" non-interactively" in err


def test_cli_provider_prefixed_model_resolves(agent_env, tmp_path):
    config = tmp_path / "config.toml"
    config.write_text('[providers.mirror]\ntype = "openai"\nbase_url = "http://127.0.0.1:9/v1"\n'
                      'models = ["gpt-4o"]\n')
    code, out, _ = run(["--model", "mirror/gpt-4o"], dict(agent_env, TERM2ACP_CONFIG=str(config)))
    assert code == 0 and out == b""  # stdin EOF right away: clean exit, nothing written


def test_cli_openai_base_url_passes_unknown_ids_through(agent_env):
    env = dict(agent_env, OPENAI_BASE_URL="http://127.0.0.1:9/v1", OPENAI_API_KEY="x")
    code, _, err = run(["--provider", "openai", "--model", "qwen2.5-coder:7b"], env)
    assert code == 0, err


@pytest.mark.parametrize("flag", ["-h", "--help"])
def test_cli_help_prints_usage_and_exits_0(agent_env, flag):
    code, out, _ = run([flag], agent_env)
    assert code == 0
    assert b"Usage:" in out and b"--provider <provider>" in out


def test_cli_version(agent_env):
    code, out, _ = run(["--version"], agent_env)
    assert code == 0 and out.decode().strip() == f"term2-acp {__version__}"


def test_cli_module_entry_point_behaves_like_the_launcher(agent_env):
    proc = subprocess.run([sys.executable, "-m", "term2acp", "--auto-approve"], capture_output=True,
                          env=agent_env, timeout=20)
    assert proc.returncode == 1 and proc.stdout == b""
    assert 'unknown option "--auto-approve"' in proc.stderr.decode()
