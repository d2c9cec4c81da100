"""Merges of a store's segments, written apart from the writer: in a background thread or in place.

A merge is a :class:`MergeJob`: the run of segments the policy chose (by name) in one committed
generation, and the name of the segment it writes. :meth:`MergeJob.run` leases that generation (so no
clean-up deletes what it reads), loads it as a read-only snapshot of its own and writes the merged
segment into a temporary folder of the store; it never touches the writer's objects, so the writer
keeps adding, deleting and committing meanwhile. The snapshot holds the segments up to the run's last
one only, so the merged segment holds what the run held, no more and no less. Committing the result is
the writer's: it replaces exactly the merged segments by the new one, at their place in the list, so
segments committed later (before or during the merge) stay after it with their rows and their
tombstones, which apply to the merged segment as they did to the run.

:class:`Merger` runs one job at a time in a daemon thread. A kill at any point leaves at most a
temporary folder (``seg-N.tmp-merge-PID``), which the next writer removes; the manifest does not name
it until the writer commits it.
"""

from __future__ import annotations

import copy
import os
import shutil
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ._io import fsync_dir
from ._lease import Lease

#: Called in the merging thread with the job after its snapshot is loaded, before anything is written
#: (None: nothing). Tests set it to pause a merge at a known point.
before_write: Callable[[MergeJob], None] | None = None


class MergeJob:
    """Merge segments ``first..stop`` of the generation ``manifest`` names into segment ``name``.

    ``snapshot(root, manifest)`` loads a read-only store of the segments a manifest names (its
    ``_write_merge`` writes the merged segment). ``clean``: the run is every segment of the generation (the
    result then holds no deleted data). ``keep_level``: the result keeps the run's level (a segment rewritten
    alone for its deleted rows) instead of going one level up.
    After :meth:`run`: :attr:`entry` (the merged segment's manifest entry) or :attr:`error`.
    """

    def __init__(self, root: Path, manifest: dict, first: int, stop: int, name: str,
                 snapshot: Callable[[Path, dict], Any], clean: bool = False, keep_level: bool = False):
        self.root = Path(root)
        self.manifest = copy.deepcopy(manifest)  # the writer's own copy keeps changing
        self.first, self.stop = first, stop
        self.names = [sg["name"] for sg in self.manifest["segments"][first:stop]]
        self.name = name
        self.snapshot = snapshot
        self.clean = clean
        self.keep_level = keep_level
        self.folder = self.root / f"{name}.tmp-merge-{os.getpid()}"
        self.entry: dict | None = None
        self.error: BaseException | None = None
        self.taken = False  # its result was moved into the store to be committed

    def run(self) -> None:
        """Write the merged segment into :attr:`folder` (fsynced); on failure remove it and keep the error."""
        lease = None
        try:
            lease = Lease.take(self.root / self.manifest["dir"])
            # the store as of the run's last segment: the merged segment then means exactly what the run
            # meant, and the rows and tombstones of every later segment apply to it as they did to the run
            upto = dict(self.manifest, segments=self.manifest["segments"][: self.stop])
            upto.pop("counts", None)  # (those of the whole generation)
            snapshot = self.snapshot(self.root, upto)
            self.folder.mkdir()
            if before_write is not None:
                before_write(self)
            entry = snapshot._write_merge(self.folder, self.name, self.first, self.stop)
            if self.keep_level:  # a segment rewritten alone (without its deleted rows' data) keeps its level
                entry["level"] = max(sg.get("level", 0) for sg in self.manifest["segments"][self.first : self.stop])
            if self.clean:
                entry["clean"] = True  # everything in one segment, nothing deleted left in it
            for d, _, _ in os.walk(self.folder, topdown=False):
                fsync_dir(Path(d))
            self.entry = entry
        except BaseException as exc:  # reported to the writer, who commits or drops the result
            self.error = exc
            self.discard()
        finally:
            if lease is not None:
                lease.release()

    def discard(self) -> None:
        """Remove what the job wrote (its result is not committed)."""
        shutil.rmtree(self.folder, ignore_errors=True)


class Merger:
    """The background merges of one writable store: one :class:`MergeJob` at a time, in a daemon thread."""

    def __init__(self) -> None:
        self.job: MergeJob | None = None
        self._thread: threading.Thread | None = None

    @property
    def busy(self) -> bool:
        """True while a job runs or waits to be committed."""
        return self.job is not None

    def start(self, job: MergeJob) -> None:
        """Run ``job`` in the background (one job at a time)."""
        assert self.job is None, "a merge is already running"
        self.job = job
        self._thread = threading.Thread(target=job.run, name=f"momoka-merge-{job.name}", daemon=True)
        self._thread.start()

    def wait(self) -> None:
        """Wait until the running job (if any) finished."""
        if self._thread is not None:
            self._thread.join()

    def finished(self) -> MergeJob | None:
        """The job, if it finished, handed over to the caller (the merger is free again); else None."""
        if self.job is None or (self._thread is not None and self._thread.is_alive()):
            return None
        job, self.job, self._thread = self.job, None, None
        return job
