"""momoka.models"""
