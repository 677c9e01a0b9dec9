"""What the language server features share: a file's text as the server is given it, paths
as the model sees them, and columns (1-based characters for the model, UTF-16 code units
on the wire, the protocol's default encoding)."""

import os
import stat

MAX_FILE = 2 << 20  # bytes: a larger file is not given to a language server
_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


def read_text(path):
    """The UTF-8 text of the regular file ``path`` (never following a symlink, never
    blocking), or None: absent, not a regular file, too large, not UTF-8."""
    try:
        fd = os.open(path, _FLAGS)
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_size > MAX_FILE:
            return None
        chunks, size = [], 0
        while size <= MAX_FILE:
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        data = b"".join(chunks)
    except OSError:
        return None
    finally:
        os.close(fd)
    if len(data) > MAX_FILE or b"\0" in data[:8192]:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


def shown(root, path):
    """``path`` relative to ``root`` when inside it, else as it is."""
    base = root.rstrip(os.sep) + os.sep
    return path[len(base):] if path.startswith(base) else path


def lines_of(text):
    return text.split("\n")


def line_at(lines, index):
    """Line ``index`` (0-based) without its line end, or ''."""
    return lines[index].rstrip("\r") if 0 <= index < len(lines) else ""


def to_column(line, units):
    """The 1-based character column of UTF-16 offset ``units`` in ``line``."""
    count = 0
    for index, char in enumerate(line):
        if count >= units:
            return index + 1
        count += 2 if ord(char) > 0xFFFF else 1
    return len(line) + 1


def to_units(line, column):
    """The UTF-16 offset of 1-based character ``column`` in ``line``."""
    head = line[:max(column - 1, 0)]
    return len(head) + sum(1 for char in head if ord(char) > 0xFFFF)


def one_line(text, cap=300):
    flat = " ".join(str(text).split())
    return flat if len(flat) <= cap else flat[:cap - 3] + "..."
