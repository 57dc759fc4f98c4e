"""Analyses over events that several consumers share (no Textual here)."""
