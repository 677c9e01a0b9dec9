"""Sessions: workspace roots, the SQLite store, grants and the live-session manager."""
