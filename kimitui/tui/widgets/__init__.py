"""Cockpit widgets, one per module; each renders from the CockpitModel and does no I/O."""
