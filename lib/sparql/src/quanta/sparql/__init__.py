"""SPARQL without storage: terms, parsing, the server fragment, expressions, results and error kinds.

Shared by the engine (workers), the smart client and the gateway; needs no
HDT and no engine. See lib/sparql/README.md.
"""
