"""momoka.methods"""
