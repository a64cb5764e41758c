"""Errors whose message is meant for the user: what happened and how to fix it."""
from __future__ import annotations


class FairDeskError(Exception):
    """Base class. ``str(err)`` is one plain sentence (or a few) a clinician auditor can act on."""


class DataError(FairDeskError):
    """The input table or file cannot be used as it is."""


class ModelError(FairDeskError):
    """A model cannot be trained, loaded or used."""


class ProjectError(FairDeskError):
    """The project store cannot be opened or written."""
