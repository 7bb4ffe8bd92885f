"""estimation room; see DESIGN.md."""
