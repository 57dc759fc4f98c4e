"""The cockpit's view model: what the panels show, folded from events, with neither Textual nor rich.

Kept apart so it can be tested alone and reused by live, replay and fleet alike; the widgets in
``kimitui.tui.widgets`` draw from it.  ``tests/test_house.py`` holds the rule that nothing here draws.
"""
