"""ETS (papers/002): the prompts of Appendix D.

Registered with :func:`momoka.llm.prompts.define`, which describes the conventions and loads this module.
"""

from __future__ import annotations

from ...llm.prompts import define

# --- ETS (papers/002), Appendix D ----------------------------------------------------

define(
    "ets.extraction",
    "Extract sentences from the following documents to answer the question. Do not alter the content of the "
    "sentences. Documents: {background} Question: {query} Relevant Sentences:",
    ("background", "query"),
    source="ETS, Appendix D, Extraction Prompt (policy model)",
    note="The PDF text runs the fields on one line; kept as printed.",
)

define(
    "ets.answering",
    "Use only the information from the following documents to answer the question with one short phrase. "
    "Documents: {background} Question: {query} Output:",
    ("background", "query"),
    source="ETS, Appendix D, Answering Prompt (reader; its likelihood P(y | q, d) is ETS's reward)",
    note="The PDF text runs the fields on one line; kept as printed.",
)
