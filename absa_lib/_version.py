"""The library version: part of every run's identity (a run id hashes it), so a change here gives
every run a new id."""

__version__ = "0.1.0"
