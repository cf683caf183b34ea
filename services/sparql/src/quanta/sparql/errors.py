"""Errors the engine raises; each maps to one stable problem type at the HTTP edge."""

from __future__ import annotations


class QuantaError(Exception):
    """Base class. `kind` is a stable machine-readable name."""

    kind = "error"


class QuerySyntaxError(QuantaError):
    """The query text does not parse. Line and column are 1-based."""

    kind = "syntax-error"

    def __init__(self, message: str, line: int, column: int) -> None:
        super().__init__(f"syntax error at line {line}, column {column}: {message}")
        self.message = message
        self.line = line
        self.column = column


class UnsupportedQuery(QuantaError):
    """The query uses an operator the preemptable server does not run.

    `operator` names it (for example "OPTIONAL"): the smart client runs it.
    """

    kind = "unsupported-operator"

    def __init__(self, operator: str, detail: str = "") -> None:
        text = f"{operator} is not evaluated server-side; the smart client runs it"
        super().__init__(f"{text} ({detail})" if detail else text)
        self.operator = operator


class InvalidPlan(QuantaError):
    """A saved plan that cannot be decoded or describes an impossible plan."""

    kind = "invalid-plan"


class DatasetMismatch(QuantaError):
    """A saved plan built against another dataset, or another build of its file."""

    kind = "dataset-mismatch"

    def __init__(self, expected: str, found: str) -> None:
        super().__init__(f"saved plan is for {found}, this is {expected}")
        self.expected = expected
        self.found = found
