"""The one list of error kinds, and the exceptions of the engine and the workers.

Every error the service reports has an `ErrorKind`: its stable slug (the
`Error.kind` string of a worker's reply on the Redis queue, and the last
segment of the problem `type` URI at the HTTP edge), the HTTP status and
the title the gateway answers with, and whether resending the same request
later may succeed. The engine's exceptions name their kind; the worker
copies it into its reply; the gateway builds its problem types from it.
A new kind is added here and nowhere else.
"""

from __future__ import annotations

from enum import Enum

PROBLEM_BASE = "https://quanta.dev/problems/"


class ErrorKind(Enum):
    """slug, HTTP status, title, retryable (the same request may succeed later)."""

    # the request
    INVALID_REQUEST = ("invalid-request", 400, "The request body is not a valid query request")
    SYNTAX_ERROR = ("syntax-error", 400, "The query does not parse")
    QUERY_TOO_COMPLEX = ("query-too-complex", 400, "The query is past a limit of the parser (nesting, size or time)")
    INVALID_TOKEN = ("invalid-token", 400, "The next token was not issued by this service")
    INVALID_PLAN = ("invalid-plan", 400, "The saved plan cannot be resumed by this version")
    UNKNOWN_DATASET = ("unknown-dataset", 404, "No such dataset")
    NOT_ACCEPTABLE = ("not-acceptable", 406, "None of the accepted media types can carry this query's results")
    DATASET_MISMATCH = ("dataset-mismatch", 409, "The saved plan belongs to another dataset or another build of it")
    PLAN_EXPIRED = ("plan-expired", 410, "The saved plan has expired")
    PLAN_VERSION = ("plan-version", 409, "The saved plan is in a format this release does not read")
    BODY_TOO_LARGE = ("body-too-large", 413, "The request body is too large")
    QUERY_TOO_LONG = ("query-too-long", 413, "The query is too long")
    UNSUPPORTED_MEDIA_TYPE = ("unsupported-media-type", 415, "The endpoint does not read this media type")
    UNSUPPORTED_OPERATOR = ("unsupported-operator", 422, "The query uses an operator the server does not evaluate")
    # asked to run a query whole (the smart client's try before it runs the query in pieces)
    UNFINISHED = ("unfinished", 422, "The query does not finish in one quantum on a worker")
    UNKNOWN_GRAPH = ("unknown-graph", 404, "The dataset has no graph of that name")
    SERVICE_NOT_ALLOWED = ("service-not-allowed", 403, "SERVICE names an endpoint that is not on the allowlist")
    # an expression (FILTER, BIND, ...) built a value past a limit: quanta.sparql.expr_values.ExpressionLimit
    EXPRESSION_LIMIT = ("expression-limit", 422, "An expression builds a value past a limit of the service")
    # the connection (the HTTP edge: quanta.gateway.server and middleware)
    REQUEST_TIMEOUT = ("request-timeout", 408, "The request did not arrive in time")
    URI_TOO_LONG = ("uri-too-long", 414, "The request line is too long")
    HEADERS_TOO_LARGE = ("headers-too-large", 431, "The request's header fields are too large")
    TOO_MANY_CONNECTIONS = ("too-many-connections", 503, "The server holds as many connections as it may", True)
    # the smart client
    BUDGET_EXCEEDED = ("budget-exceeded", 507, "The query needs more than its memory or disk budget")
    DISK_FULL = ("disk-full", 507, "The service's disk has no room for this query's temporary files", True)
    SERVICE_FAILED = ("service-failed", 502, "A SERVICE endpoint failed")
    UNREACHABLE = ("unreachable", 502, "The service could not be reached", True)
    # the service
    RATE_LIMITED = ("rate-limited", 429, "Too many requests from this client", True)
    TOO_MANY_QUERIES = ("too-many-queries", 429, "Too many queries running for this client", True)
    TOO_MANY_TASKS = ("too-many-tasks", 429, "This client holds its share of the task queue", True)
    INTERNAL = ("internal", 500, "Internal error")
    # one quantum ran past the workers' stall limit (QUANTA_WORKER_STALL_S), or the query stalled
    # keys.MAX_STALLS workers (or keys.MAX_VANISHED of its workers died) in turn: the query's doing
    STALLED = ("stall-limit", 422, "One quantum of the query ran past the workers' stall limit")
    DEAD_LETTER = ("dead-letter", 422, "The query stopped every worker that ran it")
    QUEUE_FULL = ("queue-full", 503, "The query queue is full", True)
    PARSER_BUSY = ("parser-busy", 503, "The service is too busy to read the query now", True)
    REDIS_UNAVAILABLE = ("redis-unavailable", 503, "The queue is unreachable", True)
    REPLY_TIMEOUT = ("reply-timeout", 504, "No worker replied in time", True)

    slug: str
    status: int
    title: str
    retryable: bool

    def __new__(cls, slug: str, status: int, title: str, retryable: bool = False) -> ErrorKind:
        kind = object.__new__(cls)
        kind._value_ = slug
        kind.slug, kind.status, kind.title, kind.retryable = slug, status, title, retryable
        return kind

    @property
    def uri(self) -> str:
        """The problem `type` URI (RFC 9457)."""
        return PROBLEM_BASE + self.slug

    @classmethod
    def of(cls, slug: str) -> ErrorKind:
        """The kind of a slug; INTERNAL for one this version does not know."""
        return _BY_SLUG.get(slug, cls.INTERNAL)


_BY_SLUG = {kind.slug: kind for kind in ErrorKind}


class QuantaError(Exception):
    """Base class of the errors a request can end with; `kind` says which."""

    kind = ErrorKind.INTERNAL


class QuerySyntaxError(QuantaError):
    """The query text does not parse. Line and column are 1-based."""

    kind = ErrorKind.SYNTAX_ERROR

    def __init__(self, message: str, line: int, column: int) -> None:
        super().__init__(f"syntax error at line {line}, column {column}: {message}")
        self.message = message
        self.line = line
        self.column = column


class QueryTooComplex(QuantaError):
    """The query is past one of the parser's limits (`quanta.sparql.bounds`); `limit` names it."""

    kind = ErrorKind.QUERY_TOO_COMPLEX

    def __init__(self, message: str, limit: str) -> None:
        super().__init__(message)
        self.limit = limit


class ParserBusy(QuantaError):
    """Reading the query ran out of wall time before its CPU budget: the machine is overloaded,
    not the query too complex (never remembered as a refusal: the same query may pass later)."""

    kind = ErrorKind.PARSER_BUSY


class UnsupportedQuery(QuantaError):
    """The query uses an operator the preemptable server does not run.

    `operator` names it (for example "OPTIONAL", see `quanta.sparql.fragment`):
    the smart client runs it.
    """

    kind = ErrorKind.UNSUPPORTED_OPERATOR

    def __init__(self, operator: str, detail: str = "") -> None:
        text = f"{operator} is not evaluated server-side; the smart client runs it"
        super().__init__(f"{text} ({detail})" if detail else text)
        self.operator = operator


class Unfinished(QuantaError):
    """A query asked to run whole holds what a worker cannot run whole (a value it cannot order or
    add, more than a plan run whole may hold): the smart client runs it in pieces instead."""

    kind = ErrorKind.UNFINISHED


class InvalidPlan(QuantaError):
    """A saved plan that cannot be decoded or describes an impossible plan."""

    kind = ErrorKind.INVALID_PLAN


class PlanVersion(QuantaError):
    """A saved plan in a layout this release does not read (an older or newer release saved it)."""

    kind = ErrorKind.PLAN_VERSION

    def __init__(self, found: int, readable: frozenset[int]) -> None:
        known = ", ".join(str(f) for f in sorted(readable))
        super().__init__(f"saved plan is in format {found}; this release reads formats {known}: start the query again")
        self.found = found


class DatasetMismatch(QuantaError):
    """A saved plan built against another dataset, or another build of its file."""

    kind = ErrorKind.DATASET_MISMATCH

    def __init__(self, expected: str, found: str) -> None:
        super().__init__(f"saved plan is for {found}, this is {expected}")
        self.expected = expected
        self.found = found


class PlanExpired(QuantaError):
    """A saved plan kept by reference is no longer in Redis."""

    kind = ErrorKind.PLAN_EXPIRED


class UnknownDataset(QuantaError):
    """No dataset of that name."""

    kind = ErrorKind.UNKNOWN_DATASET


class UnknownGraph(QuantaError):
    """The dataset has no named graph of that IRI."""

    kind = ErrorKind.UNKNOWN_GRAPH


class StateTooLarge(QuantaError):
    """An operator's state on a worker passed its bound (a property path's closure reached more
    nodes from one start than `CLOSURE_NODES`, lib/native/src/exec.rs)."""

    kind = ErrorKind.BUDGET_EXCEEDED


class InvalidRequest(QuantaError):
    """A task asks for what its query cannot give (a column not in its head)."""

    kind = ErrorKind.INVALID_REQUEST
