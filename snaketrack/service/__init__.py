"""service room; see DESIGN.md."""
