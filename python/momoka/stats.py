"""One shape for the counters a component keeps (its ``stats``): :class:`Stats`.

A statistic is a dataclass that subclasses :class:`Stats` and only declares its fields::

    @dataclass
    class MyStats(Stats):
        documents: int = 0
        seconds: float = 0.0
        by_length: dict = field(default_factory=dict)           # counts by key
        routed: list = field(default_factory=lambda: [0, 0])    # a vector of counts
        failures: list = examples(20)                           # at most 20 examples

Its fields are numbers, dicts of numbers (counts by key), lists of numbers of a fixed length (count vectors)
and lists of examples (:func:`examples`, kept up to a limit). :meth:`Stats.to_dict` is the JSON view
recorded in store manifests and printed by the CLI; :meth:`Stats.merge` adds another statistic of the same
class into this one. This module sits on the ground floor: it imports nothing of momoka but its errors.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any, ClassVar, TypeVar

from .errors import InputError

__all__ = ["Stats", "examples", "stats_dict"]

_S = TypeVar("_S", bound="Stats")


def examples(limit: int) -> Any:
    """A field of at most ``limit`` examples (a list, empty by default): :meth:`Stats.example` adds one,
    :meth:`Stats.merge` keeps the first ``limit``."""
    return field(default_factory=list, metadata={"examples": int(limit)})


def _plain(v: Any) -> Any:
    """``v`` as JSON values: dicts sorted by key with string keys, tuples as lists."""
    if isinstance(v, Mapping):
        return {str(k): _plain(x) for k, x in sorted(v.items())}
    if isinstance(v, (list, tuple)):
        return [_plain(x) for x in v]
    return v


@dataclass
class Stats:
    """Counters of a component (see the module docstring); subclasses declare the fields."""

    #: Read-only properties that :meth:`to_dict` adds after the fields (e.g. a sum of two fields).
    derived: ClassVar[tuple[str, ...]] = ()

    def to_dict(self) -> dict:
        """A JSON-serialisable view: every field in declaration order, then the :attr:`derived` properties.

        Counts by key come sorted by key (keys as strings), tuples as lists.
        """
        d = {f.name: _plain(getattr(self, f.name)) for f in fields(self)}
        for name in self.derived:
            d[name] = getattr(self, name)
        return d

    def merge(self: _S, other: _S) -> _S:
        """Add ``other``'s counts into these and return ``self``.

        Numbers add, counts by key add key by key, count vectors add element by element, example lists
        are extended up to their limit. Raises :class:`~momoka.errors.InputError` when ``other`` is not
        of this class or a count vector differs in length.
        """
        if type(other) is not type(self):
            raise InputError(f"cannot merge {type(other).__name__} into {type(self).__name__}")
        for f in fields(self):
            mine, theirs = getattr(self, f.name), getattr(other, f.name)
            if "examples" in f.metadata:
                mine.extend(theirs[: max(0, f.metadata["examples"] - len(mine))])
            elif isinstance(mine, dict):
                for k, v in theirs.items():
                    mine[k] = mine.get(k, 0) + v
            elif isinstance(mine, list):
                if len(mine) != len(theirs):
                    raise InputError(f"{type(self).__name__}.{f.name}: cannot add {len(theirs)} counts to "
                                     f"{len(mine)}")
                mine[:] = [a + b for a, b in zip(mine, theirs)]
            else:
                setattr(self, f.name, mine + theirs)
        return self

    def count(self, name: str, n: float = 1) -> None:
        """Add ``n`` to the number field ``name`` (a name known only at run time)."""
        setattr(self, name, getattr(self, name) + n)

    def example(self, name: str, item: Any) -> None:
        """Add ``item`` to the example list ``name`` unless it holds its limit already."""
        f = next((f for f in fields(self) if f.name == name and "examples" in f.metadata), None)
        if f is None:
            raise InputError(f"{type(self).__name__} has no example list {name!r}")
        items = getattr(self, name)
        if len(items) < f.metadata["examples"]:
            items.append(item)


def stats_dict(stats: Any) -> dict | None:
    """The dict of a component's ``stats``: a :class:`Stats`' :meth:`~Stats.to_dict`, a copy of a mapping (a
    component from outside momoka may keep a plain dict), None for None."""
    if stats is None:
        return None
    return stats.to_dict() if isinstance(stats, Stats) else dict(stats)
