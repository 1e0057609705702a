"""Policies: the tabular softmax policy and the tiny transformer."""
