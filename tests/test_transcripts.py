"""Golden wire transcripts: glob, parametrize, one driver (term2acp.testing.transcript)."""

import glob
import os

import pytest

HERE = os.path.join(os.path.dirname(__file__), "transcripts")
CASES = sorted(glob.glob(os.path.join(HERE, "*.transcript")))


@pytest.mark.parametrize("path", CASES, ids=[os.path.basename(c) for c in CASES])
def test_transcript(acp_transcript, path):
    acp_transcript(path)
