"""MC-indexing (papers/004): the prompts of Appendix H.

Registered with :func:`momoka.llm.prompts.define`, which describes the conventions and loads this module.
"""

from __future__ import annotations

from ...llm.prompts import define

# --- MC-indexing (papers/004), Appendix H ---------------------------------------------

_MC_NOTE = "Layout reconstructed from the PDF text ($name placeholders written {name}; bold marks dropped)."

define(
    "mcindex.summary",
    "You are a helpful summarization assistant. Please help me summarize the following section into no more than "
    "10 sentences or 200 words.\n"
    "\n"
    "Section Name:\n"
    "{section_name}\n"
    "Section Text:\n"
    "{section_text}",
    ("section_name", "section_text"),
    source="MC-indexing, Appendix H, summary prompt (printed above the caption of Figure 8; captions 8 and 12 are swapped)",
    note=_MC_NOTE + " The paper summarises sections of more than 200 tokens only.",
)

define(
    "mcindex.keywords",
    "You are a helpful keyword extractor. You need to extract keywords from the following section. The keywords "
    "should consist of concepts, entities, or important descriptions that are related to the section text, which "
    "could be used to answer any questions from users.\n"
    "\n"
    "Section Name: {section_name}\n"
    "\n"
    "Section Text: Beginning of text {section_text} End of text\n"
    "\n"
    "Please output format in list format: [...]. Do not output anything else aside from this list.",
    ("section_name", "section_text"),
    source="MC-indexing, Appendix H, Figure 9 (keywords view)",
    note=_MC_NOTE,
)

define(
    "mcindex.answer",
    "You are a helpful question answering assistant. You are good at answering question based on provided "
    "contents.\n"
    "\n"
    "Contents: {quotes}\n"
    "\n"
    "Question: {question}\n"
    "\n"
    "Instruction:\n"
    "\n"
    "Assume you do not have any background and internal knowledge about this given contents and question. You "
    "need to answer the question using the given contents only. The answer need to be short and accurate.",
    ("quotes", "question"),
    source="MC-indexing, Appendix H, Figure 10 (answer generation)",
    note=_MC_NOTE,
)

define(
    "mcindex.pairwise_eval",
    "You are a helpful assistant for evaluating answers. Given a question and ground truth answer, there will be "
    "two possible answers. Provide a score from 0-10 for each answer.\n"
    "\n"
    "Question: {question}\n"
    "\n"
    "Ground truth answer: {ground_truth_answer}\n"
    "\n"
    "Answer 1: {answer_1}\n"
    "\n"
    "Answer 2: {answer_2}\n"
    "\n"
    "Instruction:\n"
    "\n"
    "Assume you do not have any background and internal knowledge about this given contents and question. You "
    "need to evaluate each answer and give a score based on the ground truth answer. You must write out your "
    "reasoning of the score based on relevance to the answer. If both answers are exactly similar, you must ensure "
    "the scores and reasoning for both answers are the same. Finally in a new line, you must return the scores and "
    "nothing else. The scores must be returned in the following json format: "
    "{\"answer_1_score\":\"...\", \"answer_2_score\":\"...\"}",
    ("question", "ground_truth_answer", "answer_1", "answer_2"),
    source="MC-indexing, Appendix H, Figure 11 (pairwise answer evaluation; run twice with positions swapped)",
    note=_MC_NOTE,
)

define(
    "mcindex.atomic_chunking",
    "You are a helpful text chunking assistant that can divide a piece of text into sections. Given a piece of "
    "text, your task is to partition the sentences in the given text into sections according to the following "
    "guidelines: 1. The sentences in each section should make up one stand-alone atomic fact. 2. Each section "
    "should be a contiguous chunk of text from the given text. The text in each section should be faithful and "
    "unchanged from the given text. 3. No sentences in the given text should be divided across two different "
    "sections. Return each section on a new line. Please breakdown the following text into sections: {text}",
    ("text",),
    source="MC-indexing, Appendix H, atomic chunking prompt (printed above the caption of Figure 12)",
    note=_MC_NOTE,
)
