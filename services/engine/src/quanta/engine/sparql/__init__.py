"""From rdflib's algebra to a preemptable plan: the compiler and the join planner
(parsing, expressions and the server fragment are `quanta.sparql`'s)."""
