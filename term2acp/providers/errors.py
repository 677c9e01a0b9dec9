"""Provider errors (cheap to import: the protocol layer maps them to JSON-RPC errors)."""


class ProviderError(Exception):
    """A provider failure with a user-safe message (auth, network, bad response)."""


class ProviderNotConfigured(ProviderError):
    """Raised at preparation time: tells the user exactly what to set."""
