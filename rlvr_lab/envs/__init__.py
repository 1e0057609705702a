"""Verifiable environments: the exact prompt bank and synthetic reasoning tasks."""
