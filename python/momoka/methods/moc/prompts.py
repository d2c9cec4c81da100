"""MoC (papers/001): the prompts of Tables 6 and 7 and of the Meta-Chunking / MoC reference code.

Registered with :func:`momoka.llm.prompts.define`, which describes the conventions and loads this module.

Attribution: the templates ``moc.meta_chunker_zh``, ``moc.router_zh``, ``metachunking.msp_en`` and
``metachunking.msp_zh`` reproduce prompts of the Meta-Chunking / MoC reference code
(IAAR-Shanghai/Meta-Chunking, commit 0af6957587aaace58fe29e924f2f01efbf2fb9c8), Copyright their
authors, licensed under the Apache License 2.0 (http://www.apache.org/licenses/LICENSE-2.0). The
released checkpoints only reproduce their results with these exact prompts.
"""

from __future__ import annotations

from ...llm.prompts import APACHE_NOTE, define

# --- MoC (papers/001), Tables 6 and 7, and the reference code ---------------------------

define(
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
)

_META = define(
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
)

define(
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
)

define(
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
)

_MC = _META.template
_MC_LEN = "strike a good balance between recognizing content transitions and chunk length."
assert _MC_LEN in _MC
define(
    "moc.meta_chunker_sized",
    _MC.replace(_MC_LEN, _MC_LEN + " Aim for text chunks of about {target} characters."),
    ("target", "text"),
    system=" You are a helpful assistant.",
    source="MoC, Table 7 with the granularity class's target length added to condition 2 "
           "(momoka's local expert: one model, the class in the prompt)",
    note="Used by the granularity router when the four experts are one model; {target} is the class's length.",
)

define(
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
)

define(
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
)

define(
    "metachunking.msp_zh",
    "这是一个文本分块任务.你是一位文本分析专家，请根据提供的句子的逻辑结构和语义内容，从下面两种方案中选择一种分块方式：\n"
    "        1. 将\u201c{ab}\u201d分割成\u201c{a}\u201d与\u201c{b}\u201d两部分；\n"
    "        2. 将\u201c{ab}\u201d不进行分割，保持原形式；\n"
    "        请回答1或2。",
    ("ab", "a", "b"),
    system="You are a helpful assistant.",
    source="Meta-Chunking reference margin-sampling prompt (Chinese); {ab} is {a} + {b} (no space)",
    note=APACHE_NOTE + " The indent of lines 2-4 is assumed to match the English prompt.",
)
