"""Modal screens: confirmations, forms and detail views."""
