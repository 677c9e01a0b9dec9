"""marshmallow schemas for ACP v2 messages, one module per topic."""
