"""momoka.llm"""
