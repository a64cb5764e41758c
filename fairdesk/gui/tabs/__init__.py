"""The main window's tabs: Dataset, Model, Audit."""
