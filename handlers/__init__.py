"""Thin HTTP handlers: authenticate, parse, call one function, write the result."""
