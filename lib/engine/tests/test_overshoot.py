"""A quantum's overshoot is the real time it ran past its deadline, however it stopped: measured
when the quantum stops, not at the last clock check (a quantum whose last steps were slow, or
that completed late without reaching a check, reported 0.0)."""

from __future__ import annotations

import time

from quanta.engine.execute import execute, run
from quanta.engine.planning.compile import compile_query
from quanta.engine.quantum import Quantum
from quanta.engine.storage import TripleStore


class LateQuantum(Quantum):
    """Starts 50 ms past its deadline with a budget no query here spends: the work after the
    deadline (slow steps before the next check, or a query completing) is all the run does."""

    def start(self) -> None:
        self.deadline = time.perf_counter() - 0.05
        self.budget = 1 << 40


def test_a_quantum_that_completes_past_its_deadline_reports_how_far(watdiv_store: TripleStore) -> None:
    plan = compile_query("SELECT ?x WHERE { VALUES ?x { 1 2 3 } }", watdiv_store)
    quantum = LateQuantum(0.001)
    plan.ctx.quantum = quantum
    rows, done = run(plan, quantum)
    assert done and len(rows) == 3, "no clock check: the query completed"
    assert 0.05 <= quantum.overshoot < 1.0


def test_a_quantum_that_completes_in_time_has_none(watdiv_store: TripleStore) -> None:
    page = execute(watdiv_store, query="SELECT ?x WHERE { VALUES ?x { 1 2 } }", quantum_seconds=10)
    assert page.next is None and page.stats.overshoot_ms == 0.0


def test_a_preempted_quantum_reports_its_overshoot(watdiv_store: TripleStore) -> None:
    # a cross product: 10^10 rows, never done in one quantum (a plain scan of the 100K triples
    # takes 1.6 to 3 ms here, about the quantum, and sometimes completed in it)
    query = "SELECT * WHERE { ?s ?p ?o . ?x ?y ?z }"
    page = execute(watdiv_store, query=query, quantum_seconds=0.002, max_results=10**7)
    s = page.stats
    assert page.next is not None
    assert 0 < s.overshoot_ms < 50 and s.overshoot_ms <= s.quantum_ms - 2 + 0.5, s
