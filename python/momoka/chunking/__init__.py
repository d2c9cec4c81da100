"""momoka.chunking"""
