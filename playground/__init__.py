"""The UI side of the playground: layout, events, figures and HTML built from records (no torch)."""
