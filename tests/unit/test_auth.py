"""auth.py: which keys count, the stored keys file, and the methods (issue 15)."""

import os
import stat

import pytest

from term2acp import auth
from term2acp.providers.catalog import Catalog, CatalogError
from term2acp.settings import Settings


def settings_with(tmp_path, env=None, config=""):
    path = tmp_path / "config.toml"
    path.write_text(config)
    return Settings.load(env=dict({"TERM2ACP_CONFIG": str(path), "TERM2ACP_HOME": str(tmp_path),
                                   "TERM2ACP_LOCAL_MODEL": "off"}, **(env or {})))


def test_the_local_default_needs_no_sign_in(tmp_path, monkeypatch):
    settings = settings_with(tmp_path)
    catalog = Catalog(settings)
    assert not auth.usable(catalog, settings)  # nothing at all: sign in
    monkeypatch.setattr(Catalog, "local_available", lambda self: True)
    assert auth.usable(catalog, settings)  # only the local model: no sign-in


def test_a_loopback_server_needs_no_key_and_a_remote_one_does(tmp_path):
    local = settings_with(tmp_path, {"OPENAI_BASE_URL": "http://127.0.0.1:11434/v1"})
    assert auth.usable(Catalog(local), local)
    remote = settings_with(tmp_path, {"OPENAI_BASE_URL": "https://openrouter.ai/api/v1"})
    assert not auth.usable(Catalog(remote), remote)
    keyed = settings_with(tmp_path, {"OPENAI_BASE_URL": "https://openrouter.ai/api/v1",
                                     "OPENAI_API_KEY": "sk-x"})
    assert auth.usable(Catalog(keyed), keyed)


def test_stored_keys_are_private_and_the_environment_wins(tmp_path):
    settings = settings_with(tmp_path)
    path = auth.credentials_path(settings)
    auth.write_keys(path, {"OPENAI_API_KEY": "sk-stored", "ANTHROPIC_API_KEY": "sk-ant"})
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    again = settings_with(tmp_path, {"ANTHROPIC_API_KEY": "sk-env"})
    assert again.env["OPENAI_API_KEY"] == "sk-stored"
    assert again.env["ANTHROPIC_API_KEY"] == "sk-env"
    auth.forget_keys(again)
    assert "OPENAI_API_KEY" not in again.env and again.env["ANTHROPIC_API_KEY"] == "sk-env"
    assert auth.load_keys(path) == {}


def test_methods_name_each_key_variable_and_the_terminal_only_when_offered(tmp_path):
    config = ('[providers.router]\ntype = "openai"\nbase_url = "https://router.example/v1"\n'
              'api_key_env = "ROUTER_KEY"\n'
              '[providers.ollama]\ntype = "openai"\nbase_url = "http://127.0.0.1:11434/v1"\n'
              'api_key_env = "OLLAMA_KEY"\n')
    catalog = Catalog(settings_with(tmp_path, config=config))
    rows = auth.methods(catalog, terminal=False)
    assert [r[1] for r in rows] == ["openai", "anthropic", "router"]  # loopback: no key needed
    assert "ROUTER_KEY" in rows[2][3]
    assert auth.methods(catalog, terminal=True)[-1][:2] == ("terminal", auth.TERMINAL_METHOD)


@pytest.mark.parametrize("model, expected", [
    ("qwen/qwen3-coder", ("openai", "qwen/qwen3-coder")),  # not a provider: passes through
    ("gpt-4o", ("openai", "gpt-4o")),
])
def test_ids_with_a_slash_pass_through_on_a_compatible_server(tmp_path, model, expected):
    settings = settings_with(tmp_path, {"OPENAI_BASE_URL": "https://openrouter.ai/api/v1"})
    assert Catalog(settings).resolve(None, model) == expected


def test_a_prefix_naming_a_configured_provider_is_ambiguous_on_a_compatible_server(tmp_path):
    settings = settings_with(tmp_path, {"OPENAI_BASE_URL": "https://openrouter.ai/api/v1",
                                        "ANTHROPIC_API_KEY": "sk-ant"})
    with pytest.raises(CatalogError) as error:
        Catalog(settings).resolve(None, "anthropic/claude-sonnet-4-5")
    assert "--provider anthropic --model claude-sonnet-4-5" in str(error.value)
    assert "--provider openai --model anthropic/claude-sonnet-4-5" in str(error.value)
    # with the provider named, the id passes through unchanged
    assert Catalog(settings).resolve("openai", "anthropic/claude-sonnet-4-5") == (
        "openai", "anthropic/claude-sonnet-4-5")


def test_a_prefix_of_an_unconfigured_provider_is_part_of_the_id(tmp_path):
    settings = settings_with(tmp_path, {"OPENAI_BASE_URL": "https://openrouter.ai/api/v1"})
    assert Catalog(settings).resolve(None, "anthropic/claude-3") == ("openai", "anthropic/claude-3")


def test_the_cloud_providers_methods_appear_where_the_user_has_them_in_view(tmp_path):
    plain = [r[1] for r in auth.methods(Catalog(settings_with(tmp_path)), terminal=False)]
    assert plain == ["openai", "anthropic"]
    keyed = Catalog(settings_with(tmp_path, {"GEMINI_API_KEY": "AIza-x",
                                             "AWS_PROFILE": "work"}))
    rows = {r[1]: r for r in auth.methods(keyed, terminal=False)}
    assert list(rows) == ["openai", "anthropic", "gemini", "bedrock"]
    assert "GEMINI_API_KEY" in rows["gemini"][3] and "AWS_PROFILE" in rows["bedrock"][3]
    chosen = Catalog(settings_with(tmp_path, {"TERM2ACP_PROVIDER": "vertex"}))
    assert [r[1] for r in auth.methods(chosen, terminal=False)][-1] == "vertex"
    # the terminal sign-in offers every provider whose key it can store
    assert [pid for pid, _label, _var in auth.key_providers(chosen)] == [
        "openai", "anthropic", "gemini", "azure"]
