"""datasets room; see DESIGN.md."""
