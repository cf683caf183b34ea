"""The SPARQL 1.1 Protocol endpoint, `/sparql`: the route (`routes`), reading the request
(`protocol`, `negotiation`), fair use (`fair_use`), running the query with the smart client
(`transport`: its quanta as tasks; `first_quantum`: a piece's first one run here), streaming the
answer (`streaming`, `answers`, `progress`: the Server-Sent Events format), and the service
description (`description`)."""
