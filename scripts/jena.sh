#!/usr/bin/env bash
# Apache Jena from Maven Central: the Fuseki server's standalone jar, which also holds
# Jena's command-line tools (arq.rsparql: a SPARQL client outside Python). Cached by
# version under ~/.cache/quanta/ (never in the repository); prints the jar's path.
#   scripts/jena.sh                      # -> ~/.cache/quanta/jena-5.2.0/jena-fuseki-server-5.2.0.jar
#   java -cp "$(scripts/jena.sh)" arq.rsparql --service http://127.0.0.1:8000/sparql --query q.rq
set -euo pipefail
VERSION="${QUANTA_JENA_VERSION:-5.2.0}"  # Jena 5 needs Java 17
DIR="${XDG_CACHE_HOME:-$HOME/.cache}/quanta/jena-$VERSION"
JAR="$DIR/jena-fuseki-server-$VERSION.jar"
if [[ ! -s $JAR ]]; then
  for tool in java mvn; do
    command -v "$tool" >/dev/null || { echo "jena.sh: $tool is missing (apt-get install openjdk-17-jre-headless maven)" >&2; exit 2; }
  done
  mvn -q -B dependency:copy "-Dartifact=org.apache.jena:jena-fuseki-server:$VERSION" "-DoutputDirectory=$DIR" >&2
fi
echo "$JAR"
