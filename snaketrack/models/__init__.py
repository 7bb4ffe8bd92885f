"""models room; see DESIGN.md."""
