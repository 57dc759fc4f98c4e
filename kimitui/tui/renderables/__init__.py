"""Rich renderables built from the model's plain data: marks, colours, legends and text (the painter, tui/painter.py, decides when).

The data lives in :mod:`kimitui.tui.model` (neither Textual nor rich); what turns it into rich
Text and tables for more than one widget or screen lives here.
"""
