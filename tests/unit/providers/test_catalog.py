import pytest

from term2acp.providers.catalog import Catalog, CatalogError
from term2acp.providers.errors import ProviderNotConfigured
from term2acp.settings import Settings


def catalog(tmp_path, config="", **env):
    path = tmp_path / "config.toml"
    path.write_text(config)
    return Catalog(Settings.load(env=dict(env, TERM2ACP_CONFIG=str(path),
                                          TERM2ACP_HOME=str(tmp_path), TERM2ACP_LOCAL_MODEL="off")))


def test_catalog_custom_loopback_provider_needs_no_key(tmp_path):
    cat = catalog(tmp_path, '[providers.ollama]\ntype = "openai"\nbase_url = "http://127.0.0.1:11434/v1"\n'
                            'models = ["qwen2.5-coder:7b"]\n')
    assert cat.resolve(None, "ollama/qwen2.5-coder:7b") == ("ollama", "qwen2.5-coder:7b")
    provider = cat.create("ollama")
    assert provider._api_key == "not-needed"


def test_catalog_custom_remote_provider_without_key_is_not_configured(tmp_path):
    cat = catalog(tmp_path, '[providers.router]\ntype = "openai"\nbase_url = "https://router.example/v1"\n'
                            'api_key_env = "ROUTER_KEY"\n', OPENAI_API_KEY="sk-must-not-be-used")
    with pytest.raises(ProviderNotConfigured):
        cat.create("router")


def test_catalog_resolution_rules(tmp_path):
    cat = catalog(tmp_path)
    assert cat.resolve(None, "GPT-4O") == ("openai", "gpt-4o")
    assert cat.resolve("anthropic", None) == ("anthropic", "claude-sonnet-5")
    assert cat.resolve(None, None) == (None, None)
    # any id: the given provider, or the one the id's naming follows, decides
    assert cat.resolve("openai", "made-up") == ("openai", "made-up")
    assert cat.resolve(None, "claude-sonnet-9") == ("anthropic", "claude-sonnet-9")
    assert cat.resolve(None, "gpt-7") == ("openai", "gpt-7")
    with pytest.raises(CatalogError, match="No models match"):
        cat.resolve(None, "made-up")
    with pytest.raises(CatalogError, match="No models match"):
        cat.resolve("local", "made-up")
    assert catalog(tmp_path, OPENAI_BASE_URL="http://127.0.0.1:9/v1").resolve("openai", "made-up") == \
        ("openai", "made-up")


def test_catalog_knows_which_models_take_a_reasoning_effort(tmp_path):
    cat = catalog(tmp_path, '[providers.mine]\ntype = "openai"\nbase_url = "http://127.0.0.1:9/v1"\n'
                            'models = ["m1"]\n')
    assert cat.info("openai", "gpt-4.1-mini").reasoning is False
    assert cat.info("openai", "o4-mini").reasoning is True
    assert cat.info("mine", "m1").reasoning is None  # unknown: the effort passes through
    assert cat.info("openai", "brand-new").reasoning is None
    # a newer model of a known family: that family's defaults
    assert cat.info("anthropic", "claude-sonnet-9")[2:] == (200_000, True, True)
    assert cat.info("openai", "gpt-5.9").context_window == 400_000


def test_the_config_files_model_may_be_any_id(tmp_path):
    cat = catalog(tmp_path, 'model = "claude-sonnet-9"\n', ANTHROPIC_API_KEY="sk-ant")
    assert cat.resolve() == ("anthropic", "claude-sonnet-9")
    cat = catalog(tmp_path, 'provider = "openai"\nmodel = "brand-new"\n', OPENAI_API_KEY="sk")
    assert cat.resolve() == ("openai", "brand-new")
