"""Ctrl-C during a decode (C-level only: nothing here is callable from Python)."""
