"""A whole query: its form, its variables, and the operator that produces its answers.

The dataset a query runs on (SPARQL 1.1 section 13): the protocol's
`default-graph-uri` / `named-graph-uri` if either is given, else the
query's FROM / FROM NAMED if it has any, else the dataset's default graph
and all its named graphs. A graph that these name and the dataset lacks is
refused before anything runs (`unknown-graph`: the service cannot fetch
graphs from the Web, and answering as if the graph were empty would hide
the mistake); GRAPH <g> on a graph outside the query's dataset matches
nothing, as the spec says.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Awaitable, Callable
from dataclasses import dataclass
from functools import partial
from operator import itemgetter
from typing import TYPE_CHECKING, Any

from quanta.client.ops.base import Batch, Op
from quanta.client.ops.construct import Construct, Describe, template_part
from quanta.client.ops.hashjoin import HashJoin
from quanta.client.ops.remote import Columns, Piece, Remote, Source, Sources, Whole
from quanta.client.ops.standalone import Rows
from quanta.client.plan.algebra import Prepass, member
from quanta.client.plan.context import QueryContext
from quanta.client.plan.parsing import Query, parse_query, query_error
from quanta.client.plan.planner import Graphs, Planner, QueryDataset, server_may_run
from quanta.client.plan.scope import Scope, Slots
from quanta.client.plan.whole import WholeTries, shape
from quanta.client.transport import Cardinalities, QueryError, Transport
from quanta.sparql.errors import ErrorKind, QuantaError
from quanta.sparql.parse import bounded_async, with_base
from quanta.sparql.syntax import AlgebraNode, IriTerm, RdfTerm, Var
from quanta.sparql.term_rows import Row
from quanta.sparql.terms import from_term
from quanta.sparql.variables import all_variables, maybe

if TYPE_CHECKING:
    from quanta.client.smart import DatasetSpec

FORMS = {"SelectQuery": "select", "AskQuery": "ask", "ConstructQuery": "construct", "DescribeQuery": "describe"}


@dataclass
class QueryPlan:
    form: str
    variables: list[str]
    root: Op
    output: list[int]  # the slots of the answer's columns (SELECT: its variables; graphs: s, p, o)
    # SELECT: the one server query whose pages, as they come, are the whole answer
    # (its columns are the answer's, named alike); None when the client does any work
    direct: Remote | None = None

    async def run(self, context: QueryContext) -> AsyncGenerator[Batch, None]:
        project = columns(self.output)
        async for batch in self.root.run(context):
            if batch:
                yield list(map(project, batch))

    def explain(self) -> str:
        return self.root.explain()


async def plan_query(
    text: str,
    spec: DatasetSpec,
    context: QueryContext,
    transport: Transport,
    *,
    strategy: str = "server",
    base: str | None = None,
    ship: bool = True,
    whole: WholeTries | None = None,
) -> QueryPlan:
    """`whole`: what the workers answered queries sent whole first (`Whole`); None: in pieces."""
    query = await parse_query(text, base)
    algebra = query.algebra
    form = FORMS[algebra.name]
    if query.refusals:  # else there is no SERVICE to check, nor GRAPH to look for
        _check_services(algebra.p, context)
    dataset, sources = await _dataset(algebra, spec, transport, bool(query.refusals))
    server = server_may_run(strategy, algebra)  # OPTIONAL in the server's pieces (else the client was asked to)
    written = with_base(text, base)  # what a worker is sent, relative IRIs too
    sent = _whole_on_server(written, query, form, dataset, sources) if server else None
    if sent is not None:
        return sent
    counts = partial(transport.cardinalities, spec.name)

    async def pieces() -> QueryPlan:
        # planning walks the tree as deep as parsing: in the same bounds (a parse thread past a short text)
        try:
            return await bounded_async(
                lambda: _plan(query, form, dataset, sources, context, strategy, ship, counts), text, base
            )
        except QuantaError as error:
            raise query_error(error) from error

    if whole is not None and server:
        first = _whole_first(written, query, form, dataset, sources, whole, pieces)
        if first is not None:
            return first
    return await pieces()


def _plan(
    query: Query,
    form: str,
    dataset: QueryDataset,
    sources: Sources,
    context: QueryContext,
    strategy: str,
    ship: bool,
    counts: Callable[[str | None], Cardinalities | None],
) -> QueryPlan:
    """The query in pieces: what the workers run of it, and the client's operators over their rows."""
    algebra = query.algebra
    slots = Slots(str(v) for v in all_variables(algebra))
    prepass = Prepass(slots.fresh)
    pattern = prepass.run(algebra.p) if algebra.p is not None else None
    # the answer's variables (and a CONSTRUCT template's) are used by the answer
    prepass.uses.update(all_variables([member(algebra, "template"), member(algebra, "PV")]))
    uses = None if prepass.counts_all else prepass.uses
    planner = Planner(
        slots=slots,
        sources=sources,
        dataset=dataset,
        budgets=context.budgets,
        services=set(context.services),
        hidden=set(prepass.hidden),
        uses=uses,
        base=query.base,
        now=context.now,
        prologue=query.prologue,
        strategy=strategy,
        shipping=ship,
        counts=counts,
    )
    scope = Scope(slots)
    if form == "construct":
        return _construct(algebra, pattern, planner, scope, dataset)
    if form == "describe":
        return _describe(algebra, pattern, planner, scope, dataset)
    root = planner.plan(pattern, scope, dataset.default)
    if form == "ask":
        return QueryPlan(form, [], root, [])
    head = _head(algebra, query, planner)
    variables, output = [str(v) for v in head], [scope.slot(v) for v in head]
    return QueryPlan(form, variables, root, output, _direct(root, sources, variables, output))


def _whole_first(
    text: str,
    query: Query,
    form: str,
    dataset: QueryDataset,
    sources: Sources,
    tries: WholeTries,
    pieces: Callable[[], Awaitable[QueryPlan]],
) -> QueryPlan | None:
    """A SELECT of named variables outside the fragment that a worker can run whole, sent whole
    first (function shipping of the whole query) when its shape is worth trying (`tries`); its
    pieces are planned only if the worker does not finish it. None: plan the pieces now."""
    algebra = query.algebra
    source = dataset.default.single
    variables = _named(algebra) if form == "select" and not query.star else []
    if not variables or source is None or sources.rename or query.whole_refusals():
        return None
    key = shape(algebra)
    if not tries.worth_trying(key):
        return None

    async def planned() -> Op:
        plan = await pieces()
        return _Slots(plan.root, plan.output)  # the answer's columns, as the whole query's rows have them

    root = Whole(_answer_piece(text, variables, source, whole=True), planned, lambda done: tries.outcome(key, done))
    return QueryPlan(form, variables, root, list(range(len(variables))))


def _whole_on_server(text: str, query: Query, form: str, dataset: QueryDataset, sources: Sources) -> QueryPlan | None:
    """A SELECT of named variables that the server evaluates whole on the default graph, sent
    as it was written (`text`, after `BASE <base>` for relative IRIs): no planning, and the
    server's pages are the answer. What the planner would send differs only in its spelling."""
    algebra = query.algebra
    source = dataset.default.single
    if form != "select" or query.star or source is None or sources.rename or source.graph is not None:
        return None
    if query.refusals:  # FROM, or something below the SELECT
        return None
    variables = _named(algebra)
    if not variables:
        return None
    remote = _answer_piece(text, variables, source)
    return QueryPlan(form, variables, remote, list(range(len(variables))), remote)


def _named(algebra: Any) -> list[str]:
    """A SELECT's variables, none when it projects anything else."""
    head = algebra.PV
    return [str(v) for v in head] if head and all(isinstance(v, Var) for v in head) else []


def _answer_piece(text: str, variables: list[str], source: Source, whole: bool = False) -> Remote:
    """`text` sent as it is, its pages' columns the answer's `variables`, in order."""
    slots = Slots(variables)
    for name in variables:
        slots.add(name)
    columns = Columns({v: i for i, v in enumerate(variables)}, slots, source)
    return Remote(Piece(lambda _: text, columns, frozenset(range(len(variables))), frozenset(), whole=whole))


def _direct(root: Op, sources: Sources, variables: list[str], output: list[int]) -> Remote | None:
    """`root`, when it is one server query on one source (no blank node renamed)
    whose page columns are the answer's `variables` as they are named there."""
    if not isinstance(root, Remote) or sources.rename or not variables:
        return None
    slots = root.piece.columns.slots  # the piece's variable names -> slots
    return root if all(slots.get(v) == s for v, s in zip(variables, output, strict=True)) else None


def columns(slots: list[int]) -> Callable[[Row], Row]:
    """A function picking `slots` of a row, as a tuple (itemgetter: no Python frame per row)."""
    if len(slots) == 1:
        one = slots[0]
        return lambda row: (row[one],)
    return itemgetter(*slots) if slots else (lambda row: ())


def _head(algebra: Any, query: Query, planner: Planner) -> list[Var]:
    """SELECT's variables. For SELECT *, the pattern's in-scope variables in
    the order the text first names them (rdflib would also list variables
    only FILTERs or EXISTS mention)."""
    if not query.star:
        return [v for v in algebra.PV if isinstance(v, Var)]
    node = algebra.p
    while node.name in ("Slice", "Distinct", "Reduced", "Project", "OrderBy"):
        node = node.p
    visible = [v for v in maybe(node) if v not in planner.hidden]
    return sorted(visible, key=lambda v: (query.order.get(str(v), len(query.order)), str(v)))


def _construct(algebra: Any, pattern: Any, planner: Planner, scope: Scope, dataset: QueryDataset) -> QueryPlan:
    template = member(algebra, "template")
    if template is None:  # CONSTRUCT WHERE { triples }: the pattern is the template
        template = _triples(algebra.p)
    root = planner.plan(pattern, scope, dataset.default)
    parts = [
        (template_part(s, scope.slot), template_part(p, scope.slot), template_part(o, scope.slot))
        for s, p, o in template
    ]
    op = Construct(root, parts, planner.bnodes)
    return QueryPlan("construct", [], op, [0, 1, 2])


def _triples(node: Any) -> list[tuple[RdfTerm, RdfTerm, RdfTerm]]:
    if node.name == "BGP":
        return list(node.triples)
    if isinstance(node, AlgebraNode) and "p" in node:
        return _triples(node.p)
    return []


def _describe(algebra: Any, pattern: Any, planner: Planner, scope: Scope, dataset: QueryDataset) -> QueryPlan:
    """DESCRIBE: the resources named, and the values of the variables named in the solutions."""
    resources = [from_term(t) for t in algebra.PV if isinstance(t, IriTerm)]
    variables = [v for v in algebra.PV if isinstance(v, Var)]
    child = planner.plan(pattern, scope, dataset.default) if pattern is not None else planner.one()
    described = _Slots(child, [scope.slot(v) for v in variables])
    s, p, o = (planner.hidden_var(scope, hint) for hint in ("ds", "dp", "do"))
    bgp = AlgebraNode("BGP", triples=[(s, p, o)])
    spo = [scope.slot(v) for v in (s, p, o)]
    source = dataset.default.single
    every = planner.plan(bgp, scope, dataset.default)

    def describe(block: list[str]) -> Op:
        start = Rows([{spo[0]: r} for r in block], planner.slots, frozenset({spo[0]}))
        if source is not None:
            return _Slots(planner.bind_join(start, bgp, scope, source), spo)
        return _Slots(HashJoin(start, every, "join"), spo)

    return QueryPlan("describe", [], Describe(described, resources, describe), [0, 1, 2])


class _Slots(Op):
    """Rows reduced to some slots, in order (the rows are no longer full-width)."""

    def __init__(self, child: Op, slots: list[int]) -> None:
        self.child, self.slots = child, slots
        self.maybe, self.certain = frozenset(range(len(slots))), frozenset()

    def children(self) -> list[Op]:
        return [self.child]

    async def run(self, ctx: QueryContext) -> AsyncGenerator[Batch, None]:
        project = columns(self.slots)
        async for batch in self.child.run(ctx):
            yield list(map(project, batch))


# -- the dataset --


async def _dataset(
    algebra: Any, spec: DatasetSpec, transport: Transport, refused: bool
) -> tuple[QueryDataset, Sources]:
    clauses = member(algebra, "datasetClause") or []
    if spec.default_graph_uri is not None or spec.named_graph_uri is not None:
        default: list[str] | None = list(spec.default_graph_uri or ())
        named: list[str] | None = list(spec.named_graph_uri or ())
    elif clauses:
        default = [from_term(c.default) for c in clauses if member(c, "default") is not None]
        named = [from_term(c.named) for c in clauses if member(c, "named") is not None]
    else:
        default = named = None
    uses_graphs = named is None and refused and _has_graph(algebra.p)
    available = await transport.named_graphs(spec.name) if default is not None or uses_graphs else []
    for iri in [*(default or ()), *(named or ())]:
        if iri not in available:
            raise QueryError(ErrorKind.UNKNOWN_GRAPH, f"dataset {spec.name} has no graph <{iri}>")
    sources = Sources()
    sources.get(None)
    for iri in available:
        sources.get(iri)
    sources.freeze()
    if default is None:
        graphs = Graphs([sources.get(None)])
    else:
        graphs = Graphs([sources.get(g) for g in dict.fromkeys(default)])
    return QueryDataset(graphs, list(dict.fromkeys(named if named is not None else available))), sources


def _has_graph(node: Any) -> bool:
    if isinstance(node, AlgebraNode):
        if node.name == "Graph":
            return True
        return any(_has_graph(v) for k, v in node.items() if not k.startswith("_"))
    if isinstance(node, list | tuple):
        return any(_has_graph(v) for v in node)
    return False


def _check_services(node: Any, context: QueryContext) -> None:
    """A SERVICE IRI not on the allowlist is refused before anything runs (unless SILENT)."""
    if isinstance(node, AlgebraNode):
        if node.name == "ServiceGraphPattern" and isinstance(node.term, IriTerm) and not member(node, "silent"):
            iri = from_term(node.term)
            if iri not in context.services:
                raise QueryError(ErrorKind.SERVICE_NOT_ALLOWED, f"SERVICE <{iri}> is not on the allowlist")
        for key, value in node.items():
            if not key.startswith("_"):
                _check_services(value, context)
    elif isinstance(node, list | tuple):
        for value in node:
            _check_services(value, context)
