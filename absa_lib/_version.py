"""The library version: part of every run's identity (a run id hashes it), so a change here gives
every run a new id."""

__version__ = "0.1.0"

# The companion's public repository (https://github.com/OWNER/NAME), declared once: the "Open in
# Colab" links of the README and the notebooks, and the notebooks' install cell, are written from it
# (`python -m absa_lib.harness.colab --write`; tests/test_colab.py keeps them in step). Not known yet:
# empty, so no link is written and the install cell asks for a clone or $ABSA_REPOSITORY.
REPOSITORY = ""
