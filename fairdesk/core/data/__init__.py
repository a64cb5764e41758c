"""Datasets: column roles and their guessing, table loaders and validation, patient-disjoint splits, image folders."""
