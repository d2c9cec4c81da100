"""The papers' prompts as named, overridable templates: the machinery.

Every template is quoted from its source with the source's placeholders
renamed to ``{snake_case}`` names; ``source`` cites where it comes from and
``note`` records any momoka addition (for example an input slot that the paper's
figure leaves implicit) or any reading of a garbled PDF layout. Each method
package keeps its paper's templates in its own ``prompts`` module
(``momoka/methods/<paper>/prompts.py``), which registers them with
:func:`define`; this module loads them on the first lookup (:data:`PROMPT_MODULES`).

Use::

    from momoka.llm import prompts
    msgs = prompts.messages("momoka.referee", initial_chunk=a, new_chunk=b)
    client.complete_parsed([msgs], parse_binary)

    prompts.override("momoka.referee", "...{initial_chunk}...{new_chunk}...")   # your own wording
    prompts.reset("momoka.referee")                                            # back to the paper's

Only declared placeholders are substituted, in one pass, so braces elsewhere
in a template (JSON examples) and in the values (chunk text) are left as they are.
"""

from __future__ import annotations

import importlib
import json
import re
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Mapping

from ..errors import ConfigError, InputError

_PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")

APACHE_NOTE = (
    "From the Meta-Chunking/MoC reference code (IAAR-Shanghai/Meta-Chunking @ 0af6957), "
    "Apache License 2.0; quoted as the released checkpoints were trained on it."
)


@dataclass(frozen=True)
class PromptTemplate:
    """A named prompt: ``template`` (the user message) with ``{placeholders}``, an optional ``system`` message."""

    name: str
    template: str
    placeholders: tuple[str, ...]
    system: str | None = None
    source: str = ""
    note: str = ""

    def render(self, **values: object) -> str:
        """The user message with every placeholder replaced by ``str(value)``.

        Raises :class:`InputError` when a placeholder has no value or a value
        names no placeholder.
        """
        missing = [p for p in self.placeholders if p not in values]
        extra = [k for k in values if k not in self.placeholders]
        if missing:
            raise InputError(f"prompt {self.name!r} needs values for {missing}")
        if extra:
            raise InputError(f"prompt {self.name!r} has no placeholder(s) {extra} (it has {list(self.placeholders)})")
        names = set(self.placeholders)

        def sub(m: re.Match) -> str:
            key = m.group(1)
            return str(values[key]) if key in names else m.group(0)

        return _PLACEHOLDER.sub(sub, self.template)

    def messages(self, **values: object) -> list[dict]:
        """Chat messages: the system message (if any) then the rendered user message."""
        out = []
        if self.system is not None:
            out.append({"role": "system", "content": self.system})
        out.append({"role": "user", "content": self.render(**values)})
        return out


_DEFAULTS: dict[str, PromptTemplate] = {}

#: The modules that define the papers' prompts (each method package keeps its own), imported on the first
#: lookup or listing, as :data:`momoka.registry.BUILTIN_PACKAGES` are: by name, so that this module
#: depends on no method package and ``get(name)`` works wherever it is called.
PROMPT_MODULES = ("momoka.methods.momoka.prompts", "momoka.methods.moc.prompts", "momoka.methods.ets.prompts",
                  "momoka.methods.jerr.prompts", "momoka.methods.mcindex.prompts")
_loaded = False


def _load() -> None:
    global _loaded
    if not _loaded:
        _loaded = True

        for mod in PROMPT_MODULES:
            importlib.import_module(mod)


def define(name: str, template: str, placeholders: tuple[str, ...], *, system: str | None = None,
           source: str = "", note: str = "") -> PromptTemplate:
    """Register the default template ``name`` (a method package's prompts module calls this at import);
    returns it. Every declared placeholder must occur in ``template``; a name is defined once."""
    found = set(_PLACEHOLDER.findall(template))
    missing = [p for p in placeholders if p not in found]
    if missing:
        raise ConfigError(f"prompt {name!r} lacks placeholder(s) {missing}")
    if name in _DEFAULTS:
        raise ConfigError(f"prompt {name!r} is defined twice")
    p = PromptTemplate(name, template, tuple(placeholders), system, source, note)
    _DEFAULTS[name] = p
    return p


# --- registry -----------------------------------------------------------------

_overrides: dict[str, PromptTemplate] = {}


def names() -> list[str]:
    """Names of every template, sorted."""
    _load()
    return sorted(_DEFAULTS)


def get(name: str) -> PromptTemplate:
    """The template called ``name`` (the override when one is set)."""
    if name in _overrides:
        return _overrides[name]
    _load()
    try:
        return _DEFAULTS[name]
    except KeyError:
        raise ConfigError(f"no prompt named {name!r}; known: {', '.join(names())}") from None


def default(name: str) -> PromptTemplate:
    """The template as quoted from its source, ignoring overrides."""
    get(name)
    return _DEFAULTS[name]


def render(name: str, **values: object) -> str:
    """``get(name).render(**values)``."""
    return get(name).render(**values)


def messages(name: str, **values: object) -> list[dict]:
    """``get(name).messages(**values)``."""
    return get(name).messages(**values)


_KEEP = object()


def override(name: str, template: str | None = None, *, system: object = _KEEP) -> PromptTemplate:
    """Replace the wording of template ``name`` for this process; returns the new template.

    The new ``template`` must contain every placeholder of the original (so
    that no input is silently dropped) and no other ``{name}`` placeholder.
    ``system`` replaces the system message (``None`` removes it).
    """
    base = default(name)
    new_text = base.template if template is None else template
    if not isinstance(new_text, str) or not new_text.strip():
        raise ConfigError(f"override of {name!r}: the template must be a non-empty str")
    found = set(_PLACEHOLDER.findall(new_text))
    missing = [p for p in base.placeholders if p not in found]
    if missing:
        raise ConfigError(f"override of {name!r} lacks placeholder(s) {['{' + m + '}' for m in missing]}")
    new_sys = base.system if system is _KEEP else system
    if new_sys is not None and not isinstance(new_sys, str):
        raise ConfigError(f"override of {name!r}: system must be a str or None")
    p = replace(base, template=new_text, system=new_sys, source="user override of " + base.source, note="")
    _overrides[name] = p
    return p


def reset(name: str | None = None) -> None:
    """Drop the override of ``name`` (or every override)."""
    if name is None:
        _overrides.clear()
    else:
        default(name)
        _overrides.pop(name, None)


def load_overrides(path: str | Path) -> list[str]:
    """Apply overrides from a JSON file ``{name: "template" | {"template": ..., "system": ...}}``; returns the names."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError(f"cannot read prompt overrides {path}: {exc}") from exc
    except ValueError as exc:
        raise ConfigError(f"prompt overrides {path} are not valid JSON: {exc}") from exc
    if not isinstance(data, Mapping):
        raise ConfigError(f"prompt overrides {path} must be a JSON object of name -> template")
    done = []
    for name, spec in data.items():
        if isinstance(spec, str):
            override(name, spec)
        elif isinstance(spec, Mapping):
            kw = {"system": spec["system"]} if "system" in spec else {}
            override(name, spec.get("template"), **kw)
        else:
            raise ConfigError(f"prompt override {name!r} must be a string or an object")
        done.append(name)
    return done
