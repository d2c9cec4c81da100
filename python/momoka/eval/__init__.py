"""momoka.eval"""
