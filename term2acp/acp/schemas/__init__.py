"""marshmallow schemas for ACP messages, one module per topic (v2 shapes; the v1-only
shapes are in ``acp/v1/schemas.py``)."""
