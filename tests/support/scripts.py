"""Write scripted-provider files for tests."""

import json


def write_script(directory, turns, name="script.json", **extra):
    path = directory / name
    path.write_text(json.dumps(dict(extra, turns=turns)))
    return path


def text_turn(*texts):
    return [{"text": t} for t in texts]
