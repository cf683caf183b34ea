"""From the query's algebra (`quanta.sparql.syntax`) to a preemptable plan: the compiler and the join planner
(parsing, expressions and the server fragment are `quanta.sparql`'s)."""
