"""momoka.index"""
