"""SPARQL front end: from rdflib's algebra to the engine's plan pieces."""
