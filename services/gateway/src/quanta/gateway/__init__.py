"""quanta's HTTP gateway: admits queries into the Redis stream and answers with the workers' pages.

- `sparql_endpoint/`: the standard SPARQL 1.1 Protocol endpoint, `/sparql` (the smart client runs each query).
- `v1/`: the preemptive API, `/v1` (one quantum per request, `next` tokens).
- `tasks/`: what both send through: admission, a task's round trip to the workers (`dispatch`, over the
  RESP pool `resp`), and reading the worker's page (`pages`).
- `api/`: the routes both share (probes, the query page) and where every router is assembled.
- here: the app (`main`, `deps`), the command (`cli`), the HTTP edge (`server`, `middleware`),
  settings (`config`), `logs`, `metrics`, `problems`, and `testing` (a scripted worker for tests).
"""
