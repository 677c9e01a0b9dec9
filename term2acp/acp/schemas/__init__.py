"""marshmallow schemas for ACP v2 messages, one module per topic."""

from term2acp.acp.schemas.lazyre import import_marshmallow

import_marshmallow()
