"""Small example documents shipped with momoka (used by ``momoka quickstart``)."""

from __future__ import annotations

from pathlib import Path

#: Folder holding the example documents.
EXAMPLES_DIR = Path(__file__).resolve().parent

#: The quickstart document and the question ``momoka quickstart`` asks about it.
QUICKSTART_DOCUMENT = EXAMPLES_DIR / "harbor_light.md"
QUICKSTART_QUESTION = "When was the Kessel Point lighthouse automated, and what replaced the keepers?"
