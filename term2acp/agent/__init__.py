"""The agent loop: model -> tools -> model, emitting plain runtime events."""
