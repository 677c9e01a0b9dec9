"""Write scripted-provider files for tests."""

import json
import os


def write_script(directory, turns, name="script.json", **extra):
    path = directory / name
    path.write_text(json.dumps(dict(extra, turns=turns)))
    return path


def text_turn(*texts):
    return [{"text": t} for t in texts]


def write_file(path, text):
    """Write ``text`` to ``path``, making its folders."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(text)
