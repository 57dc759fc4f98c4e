"""How the cockpit paints its model with rich: marks, colours, legends and text built from plain data.

The data lives in :mod:`kimitui.tui.model` (neither Textual nor rich); what turns it into rich
Text and tables for more than one widget or screen lives here.
"""
