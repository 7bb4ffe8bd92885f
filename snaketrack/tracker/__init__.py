"""tracker room; see DESIGN.md."""
