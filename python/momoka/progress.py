"""Progress on stderr (placeholder until the shared reporter lands)."""

from __future__ import annotations



class Progress:
    def __init__(self, label, total=None, unit="", enabled=None, stream=None, interval=5.0):
        self.enabled = bool(enabled)
        self.done = 0

    def update(self, n=1, **postfix):
        self.done += n

    def close(self):
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
