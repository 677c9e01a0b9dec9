"""term2acp/cli.py: the argument parser (the launcher's behaviour is in e2e/test_cli.py)."""

from docopt import docopt

from term2acp import cli


def test_no_arguments_give_docopt_s_answer_without_running_it():
    opts = docopt(cli.__doc__, argv=[], default_help=False)
    expected = {"provider": opts["--provider"], "model": opts["--model"],
                "effort": opts["--effort"]}
    assert cli.parse([]) == expected == {"provider": None, "model": None, "effort": None}


def test_arguments_go_through_docopt_and_the_last_repeat_wins():
    assert cli.parse(["--provider", "openai", "--model", "m", "--provider", "anthropic"]) == {
        "provider": "anthropic", "model": "m", "effort": None}
