"""Adapters that put momoka's retrievers inside other frameworks.

* :mod:`momoka.integrations.langchain`: ``MomokaRetriever``, a LangChain
  ``BaseRetriever`` (extra ``momoka[langchain]``);
* :mod:`momoka.integrations.llama_index`: ``MomokaRetriever``, a LlamaIndex
  ``BaseRetriever`` (extra ``momoka[llama-index]``).

Both wrap :meth:`momoka.Index.search` over any registered retriever; the
framework's documents / nodes carry the exact spans (``doc.text[start:end]``)
in their metadata. Importing an adapter without its extra raises
:class:`momoka._extras.MissingExtraError` with the pip command.
"""
