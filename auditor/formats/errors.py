"""The one exception type of `auditor.formats` (contract: docs/formats-api.md, "errors.py")."""

from __future__ import annotations


class FormatError(ValueError):
    """Bytes or text that break a Kafka on-disk format.

    Names the file, the byte position, the field, the value found and what was expected.
    """

    def __init__(self, file, position, field, found, expected):
        self.file = str(file)
        self.position = position
        self.field = field
        self.found = found
        self.expected = expected
        super().__init__(str(self))

    def __str__(self) -> str:
        return f"{self.file}: byte {self.position}: {self.field} = {self.found!r}, expected {self.expected}"
