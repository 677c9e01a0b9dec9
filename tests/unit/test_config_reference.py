"""README.rst's "Configuration reference" against the code: every config key of the schema
(``term2acp/config.py``) and every environment variable the agent reads is documented, and
nothing documented there is gone from the code."""

import ast
import os
import re
import textwrap
import tomllib

import pytest

from marshmallow import fields

from term2acp import config

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PACKAGE = os.path.join(ROOT, "term2acp")
# The test kit (pytest plug-in) is not the agent: its variables are the suite's own.
NOT_THE_AGENT = ("testing",)
# Names of our variables: anything with these prefixes is an environment variable.
OURS = re.compile(r"^(TERM2ACP|OPENAI|ANTHROPIC|XDG|SSL|REQUESTS|GEVENT)_[A-Z0-9_]+$")


def readme_section(title, underline):
    with open(os.path.join(ROOT, "README.rst"), encoding="utf-8") as fh:
        text = fh.read()
    head = f"\n{title}\n{underline * len(title)}\n"
    assert head in text, f'README.rst has no "{title}" section'
    body = text.split(head, 1)[1]
    end = re.search(r"\n[^\n]+\n[=-]{3,}\n", body)
    return body[:end.start()] if end else body


def readme_config_example():
    """The literal block after "Every key, with its default::", as TOML."""
    section = readme_section("Config file", "-")
    parts = re.split(r"Every key, with its\s+default::\n\n", section)
    assert len(parts) == 2, 'README.rst\'s "Config file" lost its "Every key, with its default::"'
    block = parts[1]
    lines = []
    for line in block.splitlines():
        if line and not line.startswith(" "):
            break
        lines.append(line)
    return tomllib.loads(textwrap.dedent("\n".join(lines)))


# tables whose keys are the user's (at any depth: [mcp] tools; the top-level [tools] is ours)
USER_NAMED = ("headers", "tools", "initialization_options", "hooks")


def key_paths(data, prefix=""):
    for key, value in data.items():
        if prefix in ("providers.", "prices.", "lsp.servers."):
            yield from key_paths(value, f"{prefix}<name>.")
        elif isinstance(value, dict) and (key not in USER_NAMED or prefix + key == "tools"):
            yield from key_paths(value, f"{prefix}{key}.")
        else:
            yield prefix + key


def schema_paths(schema, prefix=""):
    for key, field in schema.fields.items():
        if isinstance(field, fields.Nested):
            yield from schema_paths(field.schema, f"{prefix}{key}.")
        elif isinstance(field, config._Providers):
            yield from schema_paths(field.schema, f"{prefix}{key}.<name>.")
        else:
            yield prefix + key


def test_config_reference_lists_every_key_of_the_schema():
    example = readme_config_example()
    config.SCHEMA.load(example)  # the example itself is a valid config file
    documented, declared = set(key_paths(example)), set(schema_paths(config.SCHEMA))
    assert not declared - documented, (
        "README.rst, section 'Configuration reference' > 'Config file': add a line with its "
        f"default for each of {sorted(declared - documented)} to the example config "
        "(providers.<name>.KEY goes under [providers.ollama])")
    assert not documented - declared, (
        f"README.rst's example config shows {sorted(documented - declared)}, which "
        "term2acp/config.py does not declare: add a field to the schema or drop the line")


def env_reads(path):
    """Variables a module reads: literal names given to an environment lookup (``env.get``,
    ``os.environ[...]``, ``getenv``, ``"X" in os.environ``), ``*_proxy`` names, and string
    constants shaped like our variables (names kept in tables and loops)."""
    with open(path, encoding="utf-8") as fh:
        tree = ast.parse(fh.read())

    def envish(node):
        return "env" in ast.unparse(node).lower()

    found = set()
    for node in ast.walk(tree):
        name = None
        if isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant):
            func = node.func
            if isinstance(func, ast.Attribute) and func.attr in ("get", "pop", "setdefault") \
                    and envish(func.value) or isinstance(func, ast.Attribute) \
                    and func.attr == "getenv":
                name = node.args[0].value
        elif isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant) \
                and envish(node.value):
            name = node.slice.value
        elif isinstance(node, ast.Compare) and isinstance(node.left, ast.Constant) \
                and isinstance(node.ops[0], (ast.In, ast.NotIn)) and envish(node.comparators[0]):
            name = node.left.value
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            if OURS.match(node.value) or re.fullmatch(r"[a-z]+_proxy", node.value):
                found.add(node.value.upper())
        if isinstance(name, str) and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
            found.add(name.upper())
    return found


def agent_env_reads():
    found = {}
    for folder, dirs, files in os.walk(PACKAGE):
        dirs[:] = [d for d in dirs if d not in NOT_THE_AGENT and not d.startswith("__")]
        for name in files:
            if name.endswith(".py"):
                path = os.path.join(folder, name)
                for var in env_reads(path):
                    found.setdefault(var, os.path.relpath(path, ROOT))
    return found


def test_config_reference_lists_every_environment_variable_the_agent_reads():
    documented = set(re.findall(r"``([A-Z][A-Z0-9_]*)``", readme_section(
        "Environment variables", "-")))
    read = agent_env_reads()
    missing = {var: where for var, where in read.items() if var not in documented}
    assert not missing, (
        "README.rst, section 'Configuration reference' > 'Environment variables': add "
        + ", ".join(f"``{var}`` (read in {where})" for var, where in sorted(missing.items()))
        + " with what it does")
    stale = sorted(var for var in documented if OURS.match(var) and var not in read)
    assert not stale, (f"README.rst's 'Environment variables' lists {stale}, which nothing in "
                       "term2acp/ reads any more: drop them (or read them)")


def test_config_reference_scan_finds_each_kind_of_read(tmp_path):
    module = tmp_path / "m.py"
    module.write_text(textwrap.dedent('''
        import os
        a = os.environ.get("PLAIN_GET")
        b = env["SUBSCRIPT"]
        c = os.getenv("GETENV")
        d = "CHECKED" in os.environ
        e = _env(env, "no_proxy")
        TABLE = (("TERM2ACP_IN_A_TABLE", 1),)
        f = headers.get("NOT_AN_ENV")
    '''))
    assert env_reads(str(module)) == {"PLAIN_GET", "SUBSCRIPT", "GETENV", "CHECKED",
                                      "NO_PROXY", "TERM2ACP_IN_A_TABLE"}


def test_config_every_key_replaces_a_default_of_the_settings():
    from term2acp.settings import Settings

    settings = Settings()
    for path in schema_paths(config.SCHEMA):
        if path.startswith(("providers.", "prices.", "lsp.servers.")):  # dicts read as such
            continue
        owner, _, key = path.rpartition(".")
        target = getattr(settings, owner) if owner else settings
        assert hasattr(target, key), (f"config key {path} has no default in "
                                      "term2acp/settings.py: add the attribute there")


def test_config_values_arrive_converted(tmp_path):
    from term2acp.settings import Settings

    path = tmp_path / "config.toml"
    path.write_text('mode = "read-only"\napproval_timeout = 0\nidle_session_timeout = 30\n'
                    '[shell]\ntimeout = 5\nnetwork = true\n'
                    '[providers.box]\nbase_url = "http://127.0.0.1:9/v1"\nreasoning = true\n')
    settings = Settings.load(env={"TERM2ACP_CONFIG": str(path), "TERM2ACP_HOME": str(tmp_path)})
    assert (settings.mode, settings.approval_timeout, settings.idle_session_timeout) == \
        ("read-only", None, 30.0)
    assert (settings.shell.timeout, settings.shell.network, settings.shell.max_timeout) == \
        (5.0, True, 600.0)
    assert settings.providers == {"box": {"base_url": "http://127.0.0.1:9/v1", "reasoning": True}}


def test_config_tunes_the_builtin_providers_and_sets_prices(tmp_path):
    from term2acp.settings import Settings

    path = tmp_path / "config.toml"
    path.write_text('[providers.anthropic]\ncache_ttl = "1h"\n[providers.openai]\napi = "chat"\n'
                    '[prices."my-model"]\ninput = 1\noutput = 2\n')
    settings = Settings.load(env={"TERM2ACP_CONFIG": str(path), "TERM2ACP_HOME": str(tmp_path)})
    assert settings.providers == {"anthropic": {"cache_ttl": "1h"}, "openai": {"api": "chat"}}
    assert settings.prices == {"my-model": {"input": 1.0, "output": 2.0}}
    for wrong, said in (('[providers.openai]\ncache_ttl = "1h"\n', "type anthropic providers only"),
                        ('[providers.anthropic]\nmodels = ["x"]\n', "unknown key"),
                        ('[providers.anthropic]\ncache_ttl = "2h"\n', '"2h" is not allowed'),
                        ('[prices.m]\ninput = 1\n', "output")):
        path.write_text(wrong)
        with pytest.raises(Exception, match=said):
            Settings.load(env={"TERM2ACP_CONFIG": str(path), "TERM2ACP_HOME": str(tmp_path)})
