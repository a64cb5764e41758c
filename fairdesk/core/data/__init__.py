"""Datasets: column roles and their guessing, table loaders and validation, a user's table into a project (``tables``),
patient-disjoint splits, image folders."""
