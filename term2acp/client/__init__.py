"""A small ACP v2 client for people at a terminal (``term2-acp-chat``)."""
