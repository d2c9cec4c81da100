"""JERR (papers/003): the prompts of Appendix A.1 to A.6.

Each template is quoted from its source with the source's placeholders renamed to ``{snake_case}``
names and registered under its name with :func:`momoka.llm.prompts.define`; ``source`` cites where it
comes from and ``note`` records any momoka addition. :mod:`momoka.llm.prompts` loads this module on the
first lookup (its ``PROMPT_MODULES``), so ``prompts.get(name)`` works wherever it is called.
"""

from __future__ import annotations

from ...llm.prompts import define

# --- JERR (papers/003), Appendix A.1 to A.6 ----------------------------------------

define(
    "jerr.synopsis",
    "Please transfer the following chunk of a passage into synopsis.\n"
    "Just give me a synopsis version. No extra explanation.\n"
    "Passage: {text}",
    ("text",),
    source="JERR, Appendix A.1, Synopsis Extraction Prompt",
    note="{SYNOPSIS TEXT} renamed {text}.",
)

define(
    "jerr.entities",
    "You are a summarizing agent. Given a chunk of paragraph, summarize it into information atoms. (Information "
    "Atoms: Brief statements represent the most fundamental, indivisible facts, covering ideas like propositions, "
    "theories, entities, concepts, and underlying aspects such as reasoning, cause-effect relationships, event "
    "sequences, social interactions, timelines, and similar elements.)\n"
    "\n"
    "Paragraph: {text}",
    ("text",),
    source="JERR, Appendix A.2, Entities Extraction Prompt",
    note="The paper prints no input slot; momoka appends 'Paragraph: {text}'.",
)

define(
    "jerr.elements",
    "You are a keyword extracting agent. Given a chunk of paragraph of a story, extract only 3 core components.\n"
    "(Core components: The fundamental nouns (e.g., people, moments, occurrences, settings, quantities), verbs "
    "(e.g., activities), and adjectives (e.g., conditions, emotions) that are central to the story's progression.)\n"
    "\n"
    "Paragraph: {text}",
    ("text",),
    source="JERR, Appendix A.3, Elements Extraction Prompt",
    note="The paper prints no input slot; momoka appends 'Paragraph: {text}'.",
)

define(
    "jerr.edge_attributes",
    "Based on the atomic facts: '{atoms1}' and '{atoms2}', what are the attributes between {element1} and "
    "{element2}?\n"
    "(Information Atoms: smallest, indivisible truths extracted from text chunks.)\n"
    "Use no more than three words to answer.",
    ("atoms1", "atoms2", "element1", "element2"),
    source="JERR, Appendix A.4, Edge Attributes Prompt",
    note="{INFORMATION ATOMS1/2} and {ELEMENT1/2} renamed {atoms1}, {atoms2}, {element1}, {element2}.",
)

define(
    "jerr.answer_quality",
    "Read the following article and answer a multiple choice question. For example, if (C) is correct, answer "
    "with \"Answer: (C) ...\". No extra explanation please.\n"
    "Article: {context}\n"
    "Question: {question} {options}",
    ("context", "question", "options"),
    source="JERR, Appendix A.5, QuALITY Answer Prompt",
)

define(
    "jerr.answer",
    "{context}\n"
    "Question: {question}\n"
    "Answer the question based on the above relevant content and extracted synopsis.\n"
    "Your answer should be short and concise.",
    ("context", "question"),
    source="JERR, Appendix A.6, NarrativeQA / MuSiQue Answer Prompt",
    note="{RELEVANT NODES TEXT & SYNOPSIS} renamed {context}.",
)
