"""A whole query: its form, its variables, and the operators that produce its rows."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

from quanta.client.plan.context import Context
from quanta.client.transport import QueryError, Row, SubRequest, Transport
from quanta.sparql import fragment
from quanta.sparql.errors import ErrorKind, QuerySyntaxError
from quanta.sparql.parse import parse

FORMS = {"SelectQuery": "select", "AskQuery": "ask", "ConstructQuery": "construct", "DescribeQuery": "describe"}


@dataclass
class QueryPlan:
    form: str
    variables: list[str]
    text: str
    dataset: str

    async def run(self, context: Context) -> AsyncIterator[list[Row]]:
        request = SubRequest(self.dataset, None, self.text)
        async for page in context.requester.pages(request):
            if self.form == "ask":
                if page.boolean:
                    yield [()]
                continue
            order = [page.variables.index(v) if v in page.variables else None for v in self.variables]
            yield [tuple(row[i] if i is not None else None for i in order) for row in page.rows]


async def plan_query(text: str, spec: Any, context: Context, transport: Transport) -> QueryPlan:
    try:
        parsed = parse(text)
    except QuerySyntaxError as error:
        raise QueryError(ErrorKind.SYNTAX_ERROR, error.message, line=error.line, column=error.column) from error
    query = parsed.algebra.algebra
    refused = fragment.query_refusals(query)
    if refused:
        raise QueryError(ErrorKind.UNSUPPORTED_OPERATOR, f"{refused[0]}: not yet", operator=refused[0])
    variables = [str(v) for v in query.PV] if query.name == "SelectQuery" else []
    return QueryPlan(FORMS[query.name], variables, text, spec.name)
