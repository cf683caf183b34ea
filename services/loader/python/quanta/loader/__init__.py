"""The bulk loader: `quanta load` turns RDF dumps into the indexed HDT files the workers serve."""
