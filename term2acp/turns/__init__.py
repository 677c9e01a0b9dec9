"""The turn layer: a prompt's model -> tools -> model loop and what a turn uses (modes,
slash commands, context, checkpoints, titles), emitting plain runtime events."""
