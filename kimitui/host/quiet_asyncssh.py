"""asyncssh, imported without the CryptographyDeprecationWarning lines its DSA support prints.

asyncssh still names ``cryptography``'s DSA classes in its annotations, and every import printed
six warnings before any SSH command's own output (issue 30).  Only that category, only from
asyncssh's modules, only during the import: any other warning is shown as usual.
"""

from __future__ import annotations

import warnings

try:
    from cryptography.utils import CryptographyDeprecationWarning as _Deprecated
except ImportError:  # pragma: no cover - asyncssh needs cryptography; a release that moved the class
    _Deprecated = DeprecationWarning  # type: ignore[assignment,misc]  # a stand-in class for one that moved

with warnings.catch_warnings():
    warnings.filterwarnings("ignore", category=_Deprecated, module=r"asyncssh(\.|$)")
    import asyncssh

__all__ = ["asyncssh"]
