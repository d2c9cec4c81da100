"""JERR (papers/003): the prompts of Appendix A.1 to A.6.

Registered with :func:`momoka.llm.prompts.define`, which describes the conventions and loads this module.
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

define(
    "jerr.lookup",
    "The following text is what you remembered from reading an article and a question related to it. You may "
    "read 1 to {max_pages} page(s) of the article again to refresh your memory to prepare yourself for the "
    "question. Please respond with which page(s) you would like to read. For example, if you only need to read "
    "Page 8, respond with \"I want to look up Page [8] to ...\"; if you would like to read Page 7 and 12, respond "
    "with \"I want to look up Page [7, 12] to ...\". DO NOT select more pages if you don't need to. You don't "
    "need to answer the question yet.\n"
    "\n"
    "Text:\n{context}\n"
    "\n"
    "Question:\n{question}",
    ("max_pages", "context", "question"),
    source="JERR, section 4 (Implementation Details): 'a look-up prompt approach inspired by ReadAgent'",
    note="JERR prints no look-up prompt; momoka writes one after ReadAgent's (Lee et al., 2024) look-up prompt, "
         "with the relevant nodes and the units' synopses as the remembered text and the units as pages.",
)
