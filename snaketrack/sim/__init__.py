"""sim room; see DESIGN.md."""
