"""Credential and shell start-up files: the one list, used by the file tools and the sandbox.

The file tools ask for every access to a path this module calls sensitive, even inside
the workspace root and even when a folder grant covers it. The sandbox masks the ones
under the home directory, even when the workspace root is the home directory itself.

Paths are canonical (symlinks resolved) before they are checked here.
"""

import fnmatch
import glob
import os

# Relative to the user's home directory. A directory entry covers everything below it.
HOME_ENTRIES = (
    ".ssh",
    ".gnupg",
    ".aws",
    ".azure",
    ".kube",
    ".docker",
    ".cargo/credentials",
    ".cargo/credentials.toml",
    ".gem/credentials",
    ".config/hub",
    ".local/share/keyrings",
    ".config/gcloud",
    ".config/gh",
    ".netrc",
    ".npmrc",
    ".pypirc",
    ".git-credentials",
    ".bashrc",
    ".bash_profile",
    ".bash_login",
    ".bash_logout",
    ".profile",
    ".zshrc",
    ".zshenv",
    ".zprofile",
    ".zlogin",
    ".env",
    # Shell and REPL histories hold pasted tokens and command lines with secrets.
    ".bash_history",
    ".zsh_history",
    ".python_history",
    ".node_repl_history",
    ".psql_history",
    ".mysql_history",
    ".local/share/fish/fish_history",
)
# Globs relative to the home directory.
HOME_GLOBS = (".config/*/auth*.json", ".config/*/auth*.toml", ".config/*/credentials*", ".env.*")
# File names that are sensitive wherever they are (dotenv files hold secrets).
NAME_GLOBS = (".env", ".env.*")


def home_dir():
    home = os.environ.get("HOME") or os.path.expanduser("~")
    try:
        return os.path.realpath(home)
    except (OSError, ValueError):
        return home


def _within(base, path):
    return path == base or path.startswith(base.rstrip(os.sep) + os.sep)


def is_sensitive(path, home=None):
    """True when canonical ``path`` is, or lies inside, a credential or start-up file."""
    home = home_dir() if home is None else home
    if any(fnmatch.fnmatchcase(os.path.basename(path), g) for g in NAME_GLOBS):
        return True
    if not _within(home, path) or path == home:
        return False
    rel = os.path.relpath(path, home)
    for entry in HOME_ENTRIES:
        if rel == entry or rel.startswith(entry + os.sep):
            return True
    parts = rel.split(os.sep)
    for pattern in HOME_GLOBS:
        depth = pattern.count("/") + 1
        if len(parts) >= depth and fnmatch.fnmatchcase("/".join(parts[:depth]), pattern):
            return True
    return False


def home_credentials(home=None):
    """The existing credential and start-up paths under ``home`` (for the sandbox to mask)."""
    home = home_dir() if home is None else home
    found = []
    for entry in HOME_ENTRIES:
        path = os.path.join(home, entry)
        if os.path.lexists(path):
            found.append(path)
    for pattern in HOME_GLOBS:
        found.extend(glob.glob(os.path.join(glob.escape(home), pattern), include_hidden=True))
    return sorted(set(found))
