"""momoka.search"""
