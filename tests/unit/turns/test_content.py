"""Prompt content -> model text (turns/content.py)."""

import base64

import pytest

from term2acp.turns import content
from term2acp.turns.prompt import PromptError


def test_embedded_text_is_delimited_and_capped(tmp_path):
    big = "q" * (content.FILE_CAP + 50)
    text = content.to_model([{"type": "text", "text": "see"}, {
        "type": "resource", "resource": {"uri": "file:///a.txt", "text": big}}], str(tmp_path))
    assert '<file uri="file:///a.txt">' in text and text.endswith("</file>")
    assert "truncated" in text and len(text) < content.FILE_CAP + 500


def test_binary_and_audio_are_refused():
    with pytest.raises(PromptError, match="binary"):
        content.validate([{"type": "resource", "resource": {"uri": "x", "blob": "AA"}}])
    with pytest.raises(PromptError, match="audio"):
        content.validate([{"type": "audio", "data": "AA", "mimeType": "audio/wav"}])


def test_links_outside_the_root_or_binary_are_not_attached(tmp_path):
    root = tmp_path / "root"
    root.mkdir()
    (root / "bin.dat").write_bytes(b"\x00\x01binary")
    (tmp_path / "out.txt").write_text("OUT")
    text = content.to_model([
        {"type": "text", "text": "t"},
        {"type": "resource_link", "name": "b", "uri": f"file://{root}/bin.dat"},
        {"type": "resource_link", "name": "o", "uri": f"file://{tmp_path}/out.txt"},
        {"type": "resource_link", "name": "web", "uri": "https://example.com/x"}], str(root))
    assert "a binary file" in text and "OUT" not in text and "outside the workspace" in text
    assert "[Linked resource: web <https://example.com/x>]" in text


def test_images_only_for_image_models():
    png = base64.b64encode(b"png").decode()
    block = {"type": "image", "mimeType": "image/png", "data": png}
    with pytest.raises(PromptError, match="does not accept images"):
        content.to_model([block], "/tmp", images=False, model="m")
    text = content.to_model([{"type": "text", "text": "look"}, block], "/tmp", images=True)
    assert text == "look" and text.images == ({"mime_type": "image/png", "data": png},)
    with pytest.raises(PromptError, match="base64"):
        content.to_model([dict(block, data="***")], "/tmp", images=True)


def test_title_words_are_the_users_only():
    blocks = [{"type": "text", "text": "Fix it"},
              {"type": "resource", "resource": {"uri": "u", "text": "FILE TEXT"}}]
    assert content.user_words(blocks) == "Fix it"
    shared = [{"type": "text", "text": "Sharing `AGENTS.md`: ---"}, {"type": "text", "text": "Go"},
              {"type": "text", "text": "  "}]
    assert content.user_words(shared) == "Go"
    assert content.to_model(shared, "/tmp").typed == "Go"
