"""Reusable widgets: pandas tables, the interactive gap (forest) plot."""
