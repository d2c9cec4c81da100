"""Momoka-RAG (papers/000): the prompts of Appendix D and the one momoka adds (the document title).

Registered with :func:`momoka.llm.prompts.define`, which describes the conventions and loads this module.
"""

from __future__ import annotations

from ...llm.prompts import define

# --- Momoka-RAG (papers/000), Appendix D ---------------------------------------

define(
    "momoka.llm_chunk",
    "You are a master of text segmentation. You are now provided with a natural paragraph of text that requires "
    "segmentation. Please merge and split at the sentence level while respecting the original logic, semantic "
    "connections, and coherence. Note: Do not alter any of the original content; your sole task is segmentation.\n"
    "\n"
    "**Text Paragraph**: {item}\n"
    "\n"
    "Notes:\n"
    "\n"
    "1. Output the result as a list in the format [\"Chunk1\", \"Chunk2\", ...]. The number of chunks is up to you. "
    "Output ONLY the list and nothing else.\n"
    "2. Do not split originally complete sentences.\n"
    "3. Segmentation is not simply isolating individual sentences; you must identify semantically coherent "
    "combinations of sentences to form a Chunk. The results must respect the logic and semantic links of the "
    "original text.\n"
    "\n"
    "**Output Format**: [\"Chunk1\", \"Chunk2\", ...]",
    ("item",),
    source="Momoka-RAG, Figure 3 (LLM chunking, one natural paragraph per call)",
)

define(
    "momoka.referee",
    "You are an information verification expert. An article has been divided into multiple chunks, and you need to "
    "assess whether the new chunk semantically completes the initial chunk\u2014such as completing the subject, "
    "establishing a causal link, or adding a parallel concept under the same theme.\n"
    "\n"
    "If it does provide semantic completion, return 1; otherwise, return 0. Do not output anything else.\n"
    "\n"
    "Initial Chunk: {initial_chunk}\n"
    "\n"
    "New Chunk: {new_chunk}\n"
    "\n"
    "Output format: 1/0",
    ("initial_chunk", "new_chunk"),
    source="Momoka-RAG, Figure 4 (referee I_LLM of the step reward, eq. 4)",
    note="Placeholders {initial_chunk.text} and {new_chunk.text} renamed {initial_chunk} and {new_chunk}.",
)

define(
    "momoka.referee_path",
    "You are a master of information judgment. You are provided with a **Preceding Text** (concatenated from "
    "multiple chunks) and a **New Chunk**.\n"
    "\n"
    "Please determine if the **New Chunk** is a reasonable semantic continuation or completion of the **Preceding "
    "Text** (e.g., logical coherence, subject continuity, causal relationship, or thematic elaboration).\n"
    "\n"
    "If the New Chunk follows the Preceding Text well, return 1; if there is a logical break or it is irrelevant, "
    "return 0. Do not output anything else.\n"
    "\n"
    "**Preceding Text**:\n"
    "\n"
    "{context_text}\n"
    "\n"
    "**New Chunk**:\n"
    "\n"
    "{new_chunk}\n"
    "\n"
    "Output Format: 1/0",
    ("context_text", "new_chunk"),
    source="Momoka-RAG, Figure 5 (path-context reward, eq. 7)",
    note="Placeholder {new_chunk.text} renamed {new_chunk}.",
)

define(
    "momoka.title",
    "You are given the opening of a long document. Write a concise global title for the whole document: one line "
    "that names its main subject (the people, organisation, event or topic it is about) so that any passage of the "
    "document can be understood with this title in front of it. Output ONLY the title, without quotes or any "
    "other text.\n"
    "\n"
    "Document:\n"
    "{document}",
    ("document",),
    source="written for momoka: Momoka-RAG section 3.1 asks an LLM for a global title T_D but prints no prompt",
    note="Not from the paper.",
)
