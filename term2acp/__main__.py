"""``python -m term2acp`` and the ``term2-acp`` console script.

gevent's monkey patching must happen before anything else imports the modules it
replaces, so it is the very first thing here; ``bin/term2-acp`` does the same.
"""

from term2acp.patching import patch_all

patch_all()


def main(argv=None):
    from term2acp import cli

    return cli.main(argv)


if __name__ == "__main__":
    raise SystemExit(main())
