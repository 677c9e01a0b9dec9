"""Import marshmallow without compiling regular expressions nobody here uses.

``marshmallow.validate`` compiles the e-mail patterns (case-insensitive Unicode
classes) at import, a large share of the agent's start-up (bench/startup). While marshmallow is
first imported, case-insensitive patterns are compiled on first use instead.
"""

import re


class LazyPattern:
    __slots__ = ("_args", "_compiled")

    def __init__(self, pattern, flags):
        self._args = (pattern, flags)
        self._compiled = None

    def __getattr__(self, name):
        if name.startswith("__"):  # e.g. class creation probing for __set_name__
            raise AttributeError(name)
        if self._compiled is None:
            self._compiled = _compile(*self._args)
        return getattr(self._compiled, name)


_compile = re.compile


def import_marshmallow():
    def deferring(pattern, flags=0):
        if flags & re.IGNORECASE:
            return LazyPattern(pattern, flags)
        return _compile(pattern, flags)

    re.compile = deferring
    try:
        import marshmallow  # noqa: F401
    finally:
        re.compile = _compile
