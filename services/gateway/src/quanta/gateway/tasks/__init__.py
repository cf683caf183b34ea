"""What `/sparql` and `/v1` both send through: admission (`admission`, over `token_bucket`), one
task's round trip to the workers (`dispatch`) on the RESP connection pool (`resp`), and the
worker's page read (`pages`)."""
