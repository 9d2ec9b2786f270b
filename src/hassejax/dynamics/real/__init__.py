"""Real trained attention heads through the dynamics (placeholder, filled below)."""
