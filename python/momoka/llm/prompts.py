"""The papers' prompts as named, overridable templates.

Every template is quoted from its source with the source's placeholders
renamed to ``{snake_case}`` names; ``source`` cites where it comes from and
``note`` records any momoka addition (for example an input slot that the paper's
figure leaves implicit) or any reading of a garbled PDF layout.

Use::

    from momoka.llm import prompts
    msgs = prompts.messages("momoka.referee", initial_chunk=a, new_chunk=b)
    client.complete_parsed([msgs], parse_binary)

    prompts.override("momoka.referee", "...{initial_chunk}...{new_chunk}...")   # your own wording
    prompts.reset("momoka.referee")                                            # back to the paper's

Only declared placeholders are substituted, in one pass, so braces elsewhere
in a template (JSON examples) and in the values (chunk text) are left as they are.

Attribution: the templates ``moc.meta_chunker_zh``, ``moc.router_zh``,
``metachunking.msp_en`` and ``metachunking.msp_zh`` reproduce prompts of the
Meta-Chunking / MoC reference code (IAAR-Shanghai/Meta-Chunking, commit
0af6957587aaace58fe29e924f2f01efbf2fb9c8), Copyright their authors, licensed
under the Apache License 2.0 (http://www.apache.org/licenses/LICENSE-2.0).
The released checkpoints only reproduce their results with these exact prompts.

Length: mostly data (the papers' prompt texts quoted verbatim), hence over 500 lines.
"""

from __future__ import annotations

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


def _t(name: str, template: str, placeholders: tuple[str, ...], *, system: str | None = None,
       source: str = "", note: str = "") -> PromptTemplate:
    found = set(_PLACEHOLDER.findall(template))
    missing = [p for p in placeholders if p not in found]
    assert not missing, (name, missing)
    return PromptTemplate(name, template, tuple(placeholders), system, source, note)


_DEFAULTS: dict[str, PromptTemplate] = {}


def _add(p: PromptTemplate) -> None:
    _DEFAULTS[p.name] = p


# --- Momoka-RAG (papers/000), Appendix D ---------------------------------------

_add(_t(
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
))

_add(_t(
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
))

_add(_t(
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
))

_add(_t(
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
))

# --- MoC (papers/001), Tables 6 and 7, and the reference code ---------------------------

_add(_t(
    "moc.direct_chunking",
    "This is a text chunking task, and you are an expert in text segmentation, responsible for dividing the given "
    "text into text chunks. You must adhere to the following four conditions:\n"
    "\n"
    "1. Segment the text based on its logical and semantic structure, ensuring each text chunk expresses a complete "
    "logical thought.\n"
    "2. Avoid making the text chunks too short, balancing the recognition of content transitions with appropriate "
    "chunk length.\n"
    "3. Do not alter the original vocabulary or content of the text.\n"
    "4. Do not add any new words or symbols.\n"
    "\n"
    "If you understand, please segment the following text into text chunks, with each chunk separated by "
    "\"\\n---\\n\". Output the complete set of segmented chunks without omissions.\n"
    "\n"
    "Document content: {text}\n"
    "\n"
    "The segmented text chunks are:",
    ("text",),
    system="You are a helpful assistant.",
    source="MoC, Table 6 (direct chunking by the teacher LLM); system message as in the reference data script",
    note='The PDF prints the separator as "\\n\u2014\\n"; the reference code splits on "\\n---\\n", used here. '
         "[Text to be segmented] is the {text} slot.",
))

_add(_t(
    "moc.meta_chunker",
    "This is a text chunking task. As an expert in text segmentation, you are responsible for segmenting the given "
    "text into text chunks. You must adhere to the following four conditions:\n"
    "\n"
    "1. Combine several consecutive sentences with related content into text chunks, ensuring that each text chunk "
    "has a complete logical expression.\n"
    "2. Avoid making the text chunks too short, and strike a good balance between recognizing content transitions "
    "and chunk length.\n"
    "3. The output of the chunking result should be in a list format, where each element represents a text chunk in "
    "the document.\n"
    "4. Each text chunk in the output should consist of the first few characters of the text chunk, followed by "
    "\"[MASK]\" to replace the intermediate content, and end with the last few characters of the text chunk. The "
    "output format is as follows:\n"
    "\n"
    "[\n"
    "  \"First few characters of text chunk [MASK] Last few characters of text chunk\",\n"
    "  ...\n"
    "]\n"
    "\n"
    "If you understand, please segment the following text into text chunks and output them in the required list "
    "format.\n"
    "\n"
    "Document content: {text}",
    ("text",),
    system=" You are a helpful assistant.",
    source="MoC, Table 7 (meta-chunker outlines, English translation of the training prompt)",
    note="[Text to be segmented] is the {text} slot. The released checkpoints were trained on moc.meta_chunker_zh.",
))

_add(_t(
    "moc.meta_chunker_zh",
    "这是一个文本分块任务，你是一名文本分割方面的专家，负责将给定的文本分割成文本块。你必须遵守以下四个条件：\n"
    "1. 将内容相关的若干个连续句子组合成文本块，使得每个文本块都具有完整的逻辑表达。\n"
    "2. 避免文本块过短，在识别内容转换与分块长度之间取得良好平衡。\n"
    "3. 输出的分块结果是一个列表格式，其中的每个元素表示文档中的一个文本块。\n"
    "4. 其中输出的每个文本块由文本块开头和结尾几个字符组成，中间内容由\u201c[MASK]\u201d来代替，输出格式如下：\n"
    "[\n"
    "    \"文本块1的开头几个字符[MASK]文本块1的结尾几个字符\",\n"
    "    ......\n"
    "]\n"
    "\n"
    "如果你理解，请将以下文本分割成文本块，并通过上述要求输出列表格式。\n"
    "\n"
    "文档内容：{window}\n"
    "\n"
    "分割好的文本块的列表格式输出：",
    ("window",),
    system=" You are a helpful assistant.",
    source="MoC reference inference prompt (chunk_sft_list_z.py / chunk_MoC.py), as the released meta-chunkers were fine-tuned on it",
    note=APACHE_NOTE,
))

_add(_t(
    "moc.router_zh",
    "你是一名文本分析方面的专家，给定一篇文章，你需要根据文章的内容判断其适合的分块粒度。分块粒度分为4个类别，具体分类如下：\n"
    "0: 0-120个字符\n"
    "1: 120-150个字符\n"
    "2: 150-180个字符\n"
    "3: 大于180个字符\n"
    "\n"
    "输出要求：根据文章内容，从上述0~3之间选择一个合适的分块粒度。\n"
    "\n"
    "文章内容：{window}\n"
    "\n"
    "文章的分块粒度类别为：",
    ("window",),
    system=" You are a helpful assistant.",
    source="MoC reference granularity-router prompt (chunk_MoC.py)",
    note=APACHE_NOTE,
))

_MC = _DEFAULTS["moc.meta_chunker"].template
_MC_LEN = "strike a good balance between recognizing content transitions and chunk length."
assert _MC_LEN in _MC
_add(_t(
    "moc.meta_chunker_sized",
    _MC.replace(_MC_LEN, _MC_LEN + " Aim for text chunks of about {target} characters."),
    ("target", "text"),
    system=" You are a helpful assistant.",
    source="MoC, Table 7 with the granularity class's target length added to condition 2 "
           "(momoka's local expert: one model, the class in the prompt)",
    note="Used by the granularity router when the four experts are one model; {target} is the class's length.",
))

_add(_t(
    "moc.router",
    "You are an expert in text analysis. Given an article, you need to judge the chunking granularity that suits "
    "its content. The chunking granularity has 4 classes:\n"
    "0: 0-120 characters\n"
    "1: 120-150 characters\n"
    "2: 150-180 characters\n"
    "3: more than 180 characters\n"
    "\n"
    "Output requirement: based on the content of the article, choose a suitable chunking granularity from 0 to 3.\n"
    "\n"
    "Article content: {window}\n"
    "\n"
    "The chunking granularity class of the article is:",
    ("window",),
    system=" You are a helpful assistant.",
    source="English translation of the MoC reference granularity-router prompt (moc.router_zh, Apache-2.0)",
    note="Written for momoka: the router on English text with a general instruction model.",
))

_add(_t(
    "metachunking.msp_en",
    "This is a text chunking task. You are a text analysis expert. Please choose one of the following two options "
    "based on the logical structure and semantic content of the provided sentence:\n"
    "        1. Split \"{ab}\" into \"{a}\" and \"{b}\" two parts;\n"
    "        2. Keep \"{ab}\" unsplit in its original form;\n"
    "        Please answer 1 or 2.",
    ("ab", "a", "b"),
    system="You are a helpful assistant.",
    source="Meta-Chunking reference margin-sampling prompt (English); {ab} is {a} + ' ' + {b}",
    note=APACHE_NOTE + " Lines 2-4 keep the 8-space indent the model sees in the reference code.",
))

_add(_t(
    "metachunking.msp_zh",
    "这是一个文本分块任务.你是一位文本分析专家，请根据提供的句子的逻辑结构和语义内容，从下面两种方案中选择一种分块方式：\n"
    "        1. 将\u201c{ab}\u201d分割成\u201c{a}\u201d与\u201c{b}\u201d两部分；\n"
    "        2. 将\u201c{ab}\u201d不进行分割，保持原形式；\n"
    "        请回答1或2。",
    ("ab", "a", "b"),
    system="You are a helpful assistant.",
    source="Meta-Chunking reference margin-sampling prompt (Chinese); {ab} is {a} + {b} (no space)",
    note=APACHE_NOTE + " The indent of lines 2-4 is assumed to match the English prompt.",
))

# --- ETS (papers/002), Appendix D ----------------------------------------------------

_add(_t(
    "ets.extraction",
    "Extract sentences from the following documents to answer the question. Do not alter the content of the "
    "sentences. Documents: {background} Question: {query} Relevant Sentences:",
    ("background", "query"),
    source="ETS, Appendix D, Extraction Prompt (policy model)",
    note="The PDF text runs the fields on one line; kept as printed.",
))

_add(_t(
    "ets.answering",
    "Use only the information from the following documents to answer the question with one short phrase. "
    "Documents: {background} Question: {query} Output:",
    ("background", "query"),
    source="ETS, Appendix D, Answering Prompt (reader; its likelihood P(y | q, d) is ETS's reward)",
    note="The PDF text runs the fields on one line; kept as printed.",
))

# --- JERR (papers/003), Appendix A.1 to A.6 ----------------------------------------

_add(_t(
    "jerr.synopsis",
    "Please transfer the following chunk of a passage into synopsis.\n"
    "Just give me a synopsis version. No extra explanation.\n"
    "Passage: {text}",
    ("text",),
    source="JERR, Appendix A.1, Synopsis Extraction Prompt",
    note="{SYNOPSIS TEXT} renamed {text}.",
))

_add(_t(
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
))

_add(_t(
    "jerr.elements",
    "You are a keyword extracting agent. Given a chunk of paragraph of a story, extract only 3 core components.\n"
    "(Core components: The fundamental nouns (e.g., people, moments, occurrences, settings, quantities), verbs "
    "(e.g., activities), and adjectives (e.g., conditions, emotions) that are central to the story's progression.)\n"
    "\n"
    "Paragraph: {text}",
    ("text",),
    source="JERR, Appendix A.3, Elements Extraction Prompt",
    note="The paper prints no input slot; momoka appends 'Paragraph: {text}'.",
))

_add(_t(
    "jerr.edge_attributes",
    "Based on the atomic facts: '{atoms1}' and '{atoms2}', what are the attributes between {element1} and "
    "{element2}?\n"
    "(Information Atoms: smallest, indivisible truths extracted from text chunks.)\n"
    "Use no more than three words to answer.",
    ("atoms1", "atoms2", "element1", "element2"),
    source="JERR, Appendix A.4, Edge Attributes Prompt",
    note="{INFORMATION ATOMS1/2} and {ELEMENT1/2} renamed {atoms1}, {atoms2}, {element1}, {element2}.",
))

_add(_t(
    "jerr.answer_quality",
    "Read the following article and answer a multiple choice question. For example, if (C) is correct, answer "
    "with \"Answer: (C) ...\". No extra explanation please.\n"
    "Article: {context}\n"
    "Question: {question} {options}",
    ("context", "question", "options"),
    source="JERR, Appendix A.5, QuALITY Answer Prompt",
))

_add(_t(
    "jerr.answer",
    "{context}\n"
    "Question: {question}\n"
    "Answer the question based on the above relevant content and extracted synopsis.\n"
    "Your answer should be short and concise.",
    ("context", "question"),
    source="JERR, Appendix A.6, NarrativeQA / MuSiQue Answer Prompt",
    note="{RELEVANT NODES TEXT & SYNOPSIS} renamed {context}.",
))

_add(_t(
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
))

# --- MC-indexing (papers/004), Appendix H ---------------------------------------------

_MC_NOTE = "Layout reconstructed from the PDF text ($name placeholders written {name}; bold marks dropped)."

_add(_t(
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
))

_add(_t(
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
))

_add(_t(
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
))

_add(_t(
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
))

_add(_t(
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
))


# --- registry -----------------------------------------------------------------

_overrides: dict[str, PromptTemplate] = {}


def names() -> list[str]:
    """Names of every template, sorted."""
    return sorted(_DEFAULTS)


def get(name: str) -> PromptTemplate:
    """The template called ``name`` (the override when one is set)."""
    if name in _overrides:
        return _overrides[name]
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
