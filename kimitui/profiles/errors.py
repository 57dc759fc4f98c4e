"""ProfileError: a bad profile, located by file, line and field."""

from __future__ import annotations

from pathlib import Path


class ProfileError(Exception):
    """A profile that cannot be found, parsed or validated.

    ``str(err)`` reads ``path:line: field: message`` with the parts that are known.
    """

    def __init__(self, message: str, *, path: Path | str | None = None, line: int | None = None, field: str | None = None) -> None:
        self.message = message
        self.path = Path(path) if path is not None else None
        self.line = line
        self.field = field
        super().__init__(self.__str__())

    def __str__(self) -> str:
        where = ""
        if self.path is not None:
            where = str(self.path) + (f":{self.line}" if self.line is not None else "")
        parts = [p for p in (where, self.field) if p]
        return ": ".join([*parts, self.message])
