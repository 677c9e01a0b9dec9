"""turns/sources.py: a folder of command files looked at cheaply, and a first look at
hundreds of them that leaves the hub its turns."""

import os
import time

import gevent

from term2acp.turns.sources import Folder, files_ending, front_matter


def parse(path, data):
    fields, body = front_matter(data.decode())
    return (os.path.basename(path), fields.get("description"), body.strip())


def commands(tmp_path, count):
    folder = tmp_path / "commands"
    folder.mkdir()
    for i in range(count):
        (folder / f"c{i:04}.md").write_text(
            f"---\ndescription: command {i}\nargument-hint: <file>\n---\n"
            + "Review $1 with care. " * 60)
    return Folder(str(folder), files_ending(".md"), parse, project=False)


def test_a_first_look_at_many_files_lets_the_hub_run_meanwhile(tmp_path):
    folder = commands(tmp_path, 3000)
    stamps = []

    def tick():
        while True:
            stamps.append(time.monotonic())
            gevent.sleep(0.001)
    ticker = gevent.spawn(tick)
    gevent.sleep(0.005)
    looked = gevent.spawn(folder.scan)
    items, foreign = looked.get(timeout=60)
    ticker.kill()
    assert len(items) == 3000 and foreign == []
    assert items[0] == ("c0000.md", "command 0", ("Review $1 with care. " * 60).strip())
    during = [b - a for a, b in zip(stamps, stamps[1:])]
    # the hub ran throughout: no stall near the length of the whole look
    assert len(stamps) > 3 and max(during) < (stamps[-1] - stamps[0]) / 2


def test_the_next_look_reads_only_what_changed(tmp_path):
    folder = commands(tmp_path, 3)
    first, _ = folder.scan()
    path = os.path.join(folder.path, "c0001.md")
    with open(path, "w") as fh:
        fh.write("---\ndescription: changed\n---\nNew words.\n")
    second, _ = folder.scan()
    assert second[0] is first[0] and second[2] is first[2]  # the same parsed items
    assert second[1] == ("c0001.md", "changed", "New words.")
