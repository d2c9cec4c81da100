"""The former path of :mod:`momoka.chunking.headers` (contextual headers), kept so that imports written
against it keep working; "context" now names only what a reader is given to answer from."""

from .headers import (  # noqa: F401 (re-exported)
    HEADED_TEXT,
    HEADER_CHARS,
    HEADER_TOKENS,
    __all__,
    context_headers,
    headed,
    indexed_text,
    with_header,
)
