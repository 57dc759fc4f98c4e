"""Secrets never leave the parser (issue 29).

SGLang logs ``server_args=ServerArgs(... api_key='…', admin_api_key='…', ssl_keyfile_password='…')``
at start, and a logged command line may carry ``--api-key VALUE``.  :func:`redact_secrets` writes
each secret-named setting's value as ``***`` (the names by :func:`kimitui.knobs.is_secret`) and the
line is parsed once, redacted, so recordings, the cockpit's log and reports only ever see ``***``
(a line with ``=`` is redacted before its parse; a plain, warning or error line with ``--`` only is
parsed, and parsed again where it held a secret).  It stays off the hot path: decode and prefill lines
carry no ``=``, and a line with no ``=`` or ``--``, or naming no key, token, secret or password, is
passed by substring checks alone, never a regex; where one is, the regex runs only at those words.
"""

from __future__ import annotations

from kimitui.knobs import REDACTED, redact_line

FLAG_KINDS = frozenset({"plain", "error", "warning"})
"""Where a command line's ``--api-key VALUE`` is logged (a wrapper's echo, argparse's complaint): the kinds
scanned for ``--`` as well as ``=``.  SGLang's own startup and access lines carry settings as ``name=value``."""
_SECRET_HINTS = ("key", "token", "secret", "passw", "KEY", "TOKEN", "SECRET", "PASSW")
UNREDACTABLE = f"{REDACTED} (a line naming a secret that kimitui could not redact)"


def redact_secrets(text: str) -> str:
    """``text`` with every secret-named setting's value ``***`` (:func:`kimitui.knobs.redact_line`); the same
    object when it cannot hold one (no ``=`` nor ``--``, or no key/token/secret/password in it: substring
    checks only).  Total: a redaction that fails drops the line's text rather than keep a secret."""
    if "=" not in text and "--" not in text:
        return text
    for hint in _SECRET_HINTS:
        if hint in text:
            try:
                return redact_line(text)
            except Exception:  # noqa: BLE001 - never keep a secret because the redaction broke
                return UNREDACTABLE
    return text
