"""Datasets: column roles, loaders and validation."""
