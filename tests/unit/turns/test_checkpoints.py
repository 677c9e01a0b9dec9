"""turns/checkpoints.py, snapshots.py and undo.py on the real store and git, in process:
the size bound, symlinks and modes, files outside the root, and that a snapshot never runs
the user's git config (filters, fsmonitor) nor touches their repository."""

import os
import sqlite3
import subprocess
import uuid

import pytest

from term2acp.turns.checkpoints import TurnCheckpoint
from term2acp.turns.undo import undo_last
from term2acp.sessions.store import Store
from term2acp.settings import Settings
from tests.support.turnsession import TurnSessionStub


class Session(TurnSessionStub):
    def __init__(self, store, root):
        super().__init__(root, store)
        self.id = str(uuid.uuid4())
        store.create_session(self.id, root, "scripted", "scripted")


@pytest.fixture
def env(tmp_path):
    root = tmp_path / "work"
    root.mkdir()
    store = Store(str(tmp_path / "store.sqlite3")).open()
    settings = Settings(data_dir=str(tmp_path / "home"))
    yield Session(store, os.path.realpath(root)), settings
    store.close()


def turn(session, settings, text="do it"):
    checkpoint = TurnCheckpoint.begin(session, settings, f"user_{uuid.uuid4().hex}", text)
    session.append_history({"role": "user", "content": text})
    return checkpoint


def write(path, data):
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(data)


def read(path):
    with open(path, encoding="utf-8") as fh:
        return fh.read()


def test_a_file_over_the_bound_is_named_and_old_turns_are_dropped(env):
    session, settings = env
    settings.checkpoint_max_mb = 1 / 1024  # 1 KiB
    big, small, old = (os.path.join(session.root, n) for n in ("big", "small", "old"))
    write(old, "o" * 800)
    first = turn(session, settings, "first")
    first.before_write(old)
    write(old, "changed")
    first.finish()
    write(big, "b" * 2000)
    write(small, "s" * 800)
    second = turn(session, settings, "second")
    second.before_write(big)
    second.before_write(small)
    write(big, "B")
    write(small, "S")
    second.finish()
    session.commit()
    report = undo_last(session)
    assert "big (it was larger than the checkpoint limit" in report
    assert "Restored: small" in report and read(small) == "s" * 800 and read(big) == "B"
    report = undo_last(session)  # the first turn's content went to keep the bound
    assert "old (its checkpoint was dropped" in report and read(old) == "changed"
    assert session.history == [] and session.history_rows == 0


def test_a_credential_file_is_named_never_copied(env):
    session, settings = env
    dotenv = os.path.join(session.root, ".env")
    write(dotenv, "API_KEY=sk-secret-value-123")
    checkpoint = turn(session, settings)
    checkpoint.before_write(dotenv)
    write(dotenv, "API_KEY=other")
    checkpoint.finish()
    session.commit()
    db = sqlite3.connect(session.store.path)
    rows = db.execute("SELECT content, why FROM checkpoint_files").fetchall()
    db.close()
    assert rows == [(b"", "it is a credential file, of which term2 keeps no copy")]
    assert ".env (it is a credential file" in undo_last(session)


def test_modes_symlinks_and_deleted_files_come_back(env):
    session, settings = env
    script, link, gone = (os.path.join(session.root, n) for n in ("run.sh", "link", "gone"))
    write(script, "#!/bin/sh\n")
    os.chmod(script, 0o750)
    os.symlink("run.sh", link)
    write(gone, "x")
    checkpoint = turn(session, settings)
    for path in (script, link, gone):
        checkpoint.before_write(path)
    write(script, "changed")
    os.chmod(script, 0o600)
    os.unlink(link)
    write(link, "now a file")
    os.unlink(gone)
    checkpoint.finish()
    session.commit()
    report = undo_last(session)
    assert "Restored:" in report and "gone" in report
    assert read(script) == "#!/bin/sh\n" and os.stat(script).st_mode & 0o777 == 0o750
    assert os.readlink(link) == "run.sh" and read(gone) == "x"


def test_a_file_outside_the_root_is_named_not_restored(env, tmp_path):
    session, settings = env
    outside = str(tmp_path / "outside.txt")
    write(outside, "before")
    checkpoint = turn(session, settings)
    checkpoint.before_write(outside)
    write(outside, "after")
    checkpoint.finish()
    session.commit()
    report = undo_last(session)
    assert f"{outside} (it is outside the workspace)" in report and read(outside) == "after"


def git(root, *args):
    return subprocess.run(("git", *args), cwd=root, check=True, capture_output=True, text=True,
                          env=dict(os.environ, GIT_CONFIG_GLOBAL=os.devnull,
                                   GIT_CONFIG_NOSYSTEM="1", GIT_OPTIONAL_LOCKS="0")).stdout


def test_a_snapshot_never_runs_the_repositorys_config_and_honours_its_ignores(env, tmp_path):
    session, settings = env
    root = session.root
    ran = tmp_path / "ran"
    git(root, "init", "-q")
    git(root, "config", "filter.evil.clean", f"touch {ran}; cat")
    git(root, "config", "core.fsmonitor", f"touch {ran}")
    write(os.path.join(root, ".gitattributes"), "*.txt filter=evil\n")
    write(os.path.join(root, ".gitignore"), "build/\n")
    write(os.path.join(root, ".git", "info", "exclude"), "*.log\n")
    os.makedirs(os.path.join(root, "build"))
    write(os.path.join(root, "a.txt"), "a")
    write(os.path.join(root, "build", "out"), "o")
    write(os.path.join(root, "x.log"), "l")
    objects = sorted(os.listdir(os.path.join(root, ".git", "objects")))
    checkpoint = turn(session, settings)
    before = checkpoint.before_command("shell")
    write(os.path.join(root, "a.txt"), "A")
    write(os.path.join(root, "build", "out"), "O")
    write(os.path.join(root, "x.log"), "L")
    checkpoint.after_command("shell", before)
    assert list(checkpoint.paths) == [os.path.join(root, "a.txt")]  # ignored ones are not
    assert not ran.exists()
    assert sorted(os.listdir(os.path.join(root, ".git", "objects"))) == objects
    assert not os.path.exists(os.path.join(root, ".git", "index"))
    checkpoint.finish()
    session.commit()
    assert "Restored: a.txt" in undo_last(session) and read(os.path.join(root, "a.txt")) == "a"


@pytest.mark.parametrize("hidden", [False, True])
def test_a_snapshot_seeded_from_the_users_index_still_sees_every_change(env, hidden):
    session, settings = env
    root = session.root
    git(root, "init", "-q")
    for name in ("a.txt", "b.txt"):
        write(os.path.join(root, name), name)
    git(root, "add", ".")
    if hidden:  # an entry whose changes the index would hide: nothing is seeded
        git(root, "update-index", "--assume-unchanged", "b.txt")
    index = open(os.path.join(root, ".git", "index"), "rb").read()
    checkpoint = turn(session, settings)
    before = checkpoint.before_command("shell")
    write(os.path.join(root, "b.txt"), "B!")
    write(os.path.join(root, "c.txt"), "c")
    checkpoint.after_command("shell", before)
    assert sorted(checkpoint.paths) == [os.path.join(root, n) for n in ("b.txt", "c.txt")]
    assert open(os.path.join(root, ".git", "index"), "rb").read() == index
    checkpoint.finish()
    session.commit()
    assert "Restored: b.txt" in undo_last(session)
    assert read(os.path.join(root, "b.txt")) == "b.txt" and not os.path.exists(
        os.path.join(root, "c.txt"))


def test_undo_is_all_or_nothing(env, monkeypatch):
    """A failure while putting files back (here the disk fills at the second file) rolls
    back what was put back already, leaves no temp file and keeps the turn to undo."""
    session, settings = env
    paths = [os.path.join(session.root, n) for n in ("a.txt", "b.txt", "new.txt")]
    write(paths[0], "a")
    write(paths[1], "b")
    checkpoint = turn(session, settings)
    for path in paths:
        checkpoint.before_write(path)
    for path in paths:
        write(path, "changed")
    checkpoint.finish()
    session.commit()
    real_link, links = os.link, []

    def link(*args, **kwargs):
        links.append(args)
        if len(links) == 2:
            raise OSError(28, "No space left on device")
        return real_link(*args, **kwargs)
    monkeypatch.setattr(os, "link", link)
    report = undo_last(session)
    assert report.startswith("Nothing was undone: b.txt could not be put back"), report
    assert [read(p) for p in paths] == ["changed"] * 3
    assert sorted(os.listdir(session.root)) == ["a.txt", "b.txt", "new.txt"]
    monkeypatch.setattr(os, "link", real_link)
    report = undo_last(session)  # the turn is still there to undo
    assert "Restored: a.txt, b.txt" in report and "new.txt" in report
    assert [read(p) for p in paths[:2]] == ["a", "b"] and not os.path.exists(paths[2])


def test_undo_never_follows_a_folder_swapped_for_a_symlink(env, tmp_path):
    """The folder of the turn's files is a symlink to outside by the time /undo runs: the
    files are named as left alone, nothing outside is written or removed."""
    session, settings = env
    sub, outside = os.path.join(session.root, "sub"), tmp_path / "outside"
    os.mkdir(sub)
    outside.mkdir()
    write(os.path.join(sub, "old.txt"), "old")
    checkpoint = turn(session, settings)
    for name in ("old.txt", "made.txt"):
        checkpoint.before_write(os.path.join(sub, name))
        write(os.path.join(sub, name), "turn")
    checkpoint.finish()
    session.commit()
    for name in ("old.txt", "made.txt"):
        write(str(outside / name), "outside")
    os.rename(sub, os.path.join(session.root, "moved"))
    os.symlink(str(outside), sub)
    report = undo_last(session)
    assert "sub/old.txt (a folder on its path is not a folder any more)" in report, report
    assert sorted(os.listdir(outside)) == ["made.txt", "old.txt"]
    assert read(str(outside / "old.txt")) == "outside" == read(str(outside / "made.txt"))
