"""Counterfactual generation (images: :mod:`fairdesk.core.generation.images`)."""
