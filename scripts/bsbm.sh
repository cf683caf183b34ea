#!/usr/bin/env bash
# What bench/bsbm.py runs beside quanta, each cached by version under ~/.cache/quanta/ (never in
# the repository); prints where it is:
#   scripts/bsbm.sh             # the Berlin SPARQL Benchmark's generator and test driver from Maven
#                               # Central (org.aksw.bsbm:bsbm-core and its dependencies): the folder
#                               # of jars, for `java -cp "DIR/*" benchmark.testdriver.TestDriver ...`
#   scripts/bsbm.sh oxigraph    # Oxigraph's server (PyPI `oxigraph`) in a venv of its own: its binary
#   scripts/bsbm.sh virtuoso    # Debian's virtuoso-opensource (apt-get, as root): virtuoso-t's path
#   scripts/bsbm.sh java        # Java 17 and Maven, what the rest needs (apt-get, as root, when missing): java's path
set -euo pipefail
CACHE="${XDG_CACHE_HOME:-$HOME/.cache}/quanta"
case "${1:-bsbm}" in
bsbm)
  VERSION="${QUANTA_BSBM_VERSION:-3.1.10}"
  DIR="$CACHE/bsbm-$VERSION"
  if [[ ! -s $DIR/lib/bsbm-core-$VERSION.jar ]]; then
    for tool in java mvn; do
      command -v "$tool" >/dev/null || { echo "bsbm.sh: $tool is missing (apt-get install openjdk-17-jre-headless maven)" >&2; exit 2; }
    done
    mkdir -p "$DIR"
    # the generator needs ssj, the driver slf4j and Jena: a throwaway pom copies them all
    cat >"$DIR/pom.xml" <<EOF
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>quanta.bench</groupId><artifactId>bsbm-driver</artifactId><version>1</version>
  <dependencies>
    <dependency><groupId>org.aksw.bsbm</groupId><artifactId>bsbm-core</artifactId><version>$VERSION</version></dependency>
  </dependencies>
</project>
EOF
    mvn -q -B -f "$DIR/pom.xml" dependency:copy-dependencies "-DoutputDirectory=$DIR/lib.tmp" >&2
    rm -rf "$DIR/lib" && mv "$DIR/lib.tmp" "$DIR/lib"
  fi
  echo "$DIR/lib"
  ;;
oxigraph)
  VERSION="${QUANTA_OXIGRAPH_VERSION:-0.5.13}"
  VENV="$CACHE/oxigraph-$VERSION"
  if ! "$VENV/bin/oxigraph" --version 2>/dev/null | grep -q "$VERSION"; then
    rm -rf "$VENV"
    "${PYTHON:-python3.11}" -m venv "$VENV"
    "$VENV/bin/python" -m pip install --disable-pip-version-check -q "oxigraph==$VERSION" >&2
  fi
  echo "$VENV/bin/oxigraph"
  ;;
virtuoso)
  if ! command -v virtuoso-t >/dev/null; then
    if [[ $(id -u) != 0 ]] || ! command -v apt-get >/dev/null; then
      echo "bsbm.sh: virtuoso-t is missing (as root: apt-get install virtuoso-opensource)" >&2
      exit 2
    fi
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q virtuoso-opensource >&2 \
      || { apt-get update -q >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y -q virtuoso-opensource >&2; }
  fi
  command -v virtuoso-t
  ;;
java)
  if ! command -v java >/dev/null || ! command -v mvn >/dev/null; then
    if [[ $(id -u) != 0 ]] || ! command -v apt-get >/dev/null; then
      echo "bsbm.sh: java or mvn is missing (as root: apt-get install openjdk-17-jre-headless maven)" >&2
      exit 2
    fi
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q openjdk-17-jre-headless maven >&2 \
      || { apt-get update -q >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y -q openjdk-17-jre-headless maven >&2; }
  fi
  command -v java
  ;;
*)
  echo "usage: scripts/bsbm.sh [bsbm|oxigraph|virtuoso|java]" >&2
  exit 2
  ;;
esac
