"""The autopilot: the field notes' loop (one knob, swap, sweep, verdict, keep or revert) run unattended.

``candidates`` says what to try, ``variants`` writes each change on top of the best profile so far,
``state`` keeps the plan and every step on disk (so ``kimitui tune --resume`` carries on),
``steps`` judges a step against the best, ``tuner`` runs the loop over a live controller, and
``report`` writes what it found.  No Textual here: the cockpit's tune panel reads ``TuneProgress``.
"""
