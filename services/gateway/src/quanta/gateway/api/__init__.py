"""The routes `/sparql` and `/v1` share (the probes, the query page), and where every router is assembled (`main`)."""
