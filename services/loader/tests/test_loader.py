"""`quanta load` end to end: real files, the real converter (quanta-rdf2hdt), pyHDT to read back,
pyoxigraph as the independent parser the output is compared with."""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import random
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import hdt
import pyoxigraph as ox
import pytest
from rdflib import BNode, Graph, Literal, URIRef
from rdflib.compare import isomorphic

from quanta.cli.main import main
from quanta.loader import build, memory
from quanta.loader.inputs import Source

try:
    build.converter()
except build.LoadError as e:  # pragma: no cover - depends on the machine
    pytest.skip(f"converter not installed: {e}", allow_module_level=True)

XSD_STRING = "http://www.w3.org/2001/XMLSchema#string"
WATDIV = Path("/work/shared/datasets/watdiv")
OX_FORMATS = {"nt": ox.RdfFormat.N_TRIPLES, "nq": ox.RdfFormat.N_QUADS, "ttl": ox.RdfFormat.TURTLE}

NT_A = r"""<http://ex.org/s1> <http://ex.org/p> <http://ex.org/o1> .
<http://ex.org/s1> <http://ex.org/name> "plain" .
<http://ex.org/s1> <http://ex.org/name> "tab\there \"quoted\" back\\slash\nnewline" .
<http://ex.org/s1> <http://ex.org/name> "caf\u00e9 \U0001F600 naïve" .
<http://ex.org/s2> <http://ex.org/label> "hello"@en-GB .
<http://ex.org/s2> <http://ex.org/age> "42"^^<http://www.w3.org/2001/XMLSchema#integer> .
<http://ex.org/s2> <http://ex.org/same> "explicit"^^<http://www.w3.org/2001/XMLSchema#string> .
_:x <http://ex.org/p> _:y .
<http://ex.org/s%20space> <http://ex.org/p> <http://ex.org/o1> .
# a comment, then an empty line

<http://ex.org/s1> <http://ex.org/p> <http://ex.org/o1> .
"""

# overlaps NT_A on two triples
NT_B = """<http://ex.org/s1> <http://ex.org/p> <http://ex.org/o1> .
<http://ex.org/s2> <http://ex.org/label> "hello"@en-GB .
<http://ex.org/s3> <http://ex.org/p> <http://ex.org/o3> .
_:x <http://ex.org/p> <http://ex.org/o3> .
"""

TTL = """@prefix ex: <http://ex.org/> .
@prefix xsd: <http://www.w3.org/2001/XMLSchema#> .
PREFIX foaf: <http://xmlns.com/foaf/0.1/>
ex:s1 ex:p ex:o1 ;                      # overlaps NT_A
      foaf:name "Ann", "Anne"@fr ;
      ex:when "2020-01-01"^^xsd:date ;
      ex:n 7, 1.5, true .
<relative> ex:p ex:o4 .
_:t ex:p \"\"\"multi
line\"\"\" .
"""

NQ = """<http://ex.org/s1> <http://ex.org/p> <http://ex.org/o1> .
<http://ex.org/s5> <http://ex.org/p> <http://ex.org/o5> <http://ex.org/graph1> .
<http://ex.org/s1> <http://ex.org/p> <http://ex.org/o1> <http://ex.org/graph2> .
<http://ex.org/s6> <http://ex.org/p> "in a blank-node graph" _:g .
"""


def write(path: Path, text: str, gz: bool = False) -> Path:
    data = text.encode()
    path.write_bytes(gzip.compress(data) if gz else data)
    return path


def spell(term: Any, prefix: str) -> str:
    """pyoxigraph term -> HDT dictionary spelling (IRIs bare, literals unescaped)."""
    if isinstance(term, ox.NamedNode):
        return term.value
    if isinstance(term, ox.BlankNode):
        return f"_:{prefix}{term.value}"
    assert isinstance(term, ox.Literal)
    if term.language:
        return f'"{term.value}"@{term.language}'
    if term.datatype.value != XSD_STRING:
        return f'"{term.value}"^^<{term.datatype.value}>'
    return f'"{term.value}"'


def expected(paths: list[Path], base: str | None = None) -> set[tuple[str, str, str]]:
    """What pyoxigraph reads from the inputs, named graphs merged, blank nodes scoped per input."""
    triples = set()
    for i, path in enumerate(paths):
        source = Source.probe(str(path))
        data = gzip.decompress(path.read_bytes()) if source.gzip else path.read_bytes()
        prefix = f"f{i + 1}_" if len(paths) > 1 else ""
        base_iri = base or path.absolute().as_uri()
        for q in ox.parse(data, format=OX_FORMATS[source.format], base_iri=base_iri):
            triples.add((spell(q.subject, prefix), spell(q.predicate, prefix), spell(q.object, prefix)))
    return triples


def hdt_triples(path: Path) -> set[tuple[str, str, str]]:
    doc = hdt.HDTDocument(str(path))
    found, count = doc.search_triples("", "", "")
    triples = set(found)
    assert len(triples) == count == doc.total_triples
    return triples


def load(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, dict[str, Any], str]:
    """Runs `quanta load` in-process (stdout is not a terminal: the JSON summary)."""
    status = main(["load", *argv])
    out, err = capsys.readouterr()
    lines = [line for line in out.splitlines() if line.strip()]
    return status, json.loads(lines[-1]) if lines else {}, err


def load_apart(*argv: str) -> tuple[int, dict[str, Any], str]:
    """Runs the installed `quanta load` as a process of its own: a memory budget then counts the
    load's own driver, not this test process and whatever the suite holds by then."""
    done = subprocess.run(
        [str(Path(sys.executable).parent / "quanta"), "load", *argv], capture_output=True, text=True, check=False
    )
    lines = [line for line in done.stdout.splitlines() if line.strip()]
    return done.returncode, json.loads(lines[-1]) if lines else {}, done.stderr


def outputs(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir() if ".hdt" in p.name)


# ---------------------------------------------------------------- round trips


def test_round_trip_all_formats_plain_and_gzip_merged(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    inputs = [
        write(tmp_path / "a.nt", NT_A),
        write(tmp_path / "b.nt.gz", NT_B, gz=True),
        write(tmp_path / "c.ttl.gz", TTL, gz=True),
        write(tmp_path / "d.nq", NQ),
    ]
    out = tmp_path / "out" / "all.hdt"
    out.parent.mkdir()
    status, summary, _ = load(capsys, *map(str, inputs), "-o", str(out))
    assert status == 0
    want = expected(inputs)
    assert hdt_triples(out) == want
    assert summary["distinct_triples"] == len(want)
    lines = sum(1 for t in (NT_A, NT_B, NQ) for line in t.splitlines() if line.startswith(("<", "_")))
    ttl_triples = sum(1 for _ in ox.parse(TTL.encode(), format=ox.RdfFormat.TURTLE, base_iri="http://b/"))
    assert summary["triples_read"] == lines + ttl_triples
    assert summary["duplicates"] == summary["triples_read"] - len(want) > 0
    assert summary["named_graph_triples"] == 3
    assert summary["skipped"] == 0
    # the literal forms the engine expects: unescaped inside the quotes
    assert '"tab\there "quoted" back\\slash\nnewline"' in {o for _, _, o in want}
    assert f"{out.absolute().parent.parent.as_uri()}/relative" in {s for s, _, _ in want}


@pytest.mark.parametrize("name", ["one.nt", "one.nt.gz", "one.ttl", "one.nq.gz"])
def test_round_trip_single_input(tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str) -> None:
    text = {"nt": NT_A, "ttl": TTL, "nq": NQ}[name.split(".")[1]]
    src = write(tmp_path / name, text, gz=name.endswith(".gz"))
    out = tmp_path / "one.hdt"
    status, summary, _ = load(capsys, str(src), "-o", str(out), "--base-uri", "http://base.example/")
    assert status == 0
    assert hdt_triples(out) == expected([src], base="http://base.example/")
    assert summary["distinct_triples"] == len(expected([src], base="http://base.example/"))


def test_blank_nodes_are_scoped_per_input(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a = write(tmp_path / "a.nt", "_:b <http://ex.org/p> <http://ex.org/o> .\n")
    b = write(tmp_path / "b.nt", "_:b <http://ex.org/p> <http://ex.org/o> .\n")
    status, summary, _ = load(capsys, str(a), str(b), "-o", str(tmp_path / "o.hdt"))
    assert status == 0
    assert summary["distinct_triples"] == 2  # two different nodes (RDF merge), not one


def test_turtle_anonymous_blank_nodes_and_lists(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    text = "@prefix ex: <http://ex.org/> .\nex:s ex:p [ ex:q 1 ; ex:r [ ex:q 2 ] ] , ( 1 2 ex:z ) .\n"
    src = write(tmp_path / "anon.ttl", text)
    out = tmp_path / "anon.hdt"
    assert load(capsys, str(src), "-o", str(out))[0] == 0

    def node(term: str) -> Any:
        if term.startswith("_:"):
            return BNode(term[2:])
        if term.startswith('"'):
            return Literal(term[1 : term.rindex('"')], datatype=URIRef(term[term.rindex("<") + 1 : -1]))
        return URIRef(term)

    got, want = Graph(), Graph()
    for s, p, o in hdt_triples(out):
        got.add((node(s), node(p), node(o)))
    for s, p, o in expected([src]):
        want.add((node(s), node(p), node(o)))
    assert len(got) == len(want) == 11
    assert isomorphic(got, want)


def test_watdiv_100k_gzip_matches_the_reference_hdt(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A real dump: same triple set as the shared HDT made by the crate's own converter."""
    out = tmp_path / "w.hdt"
    status, summary, _ = load(capsys, str(WATDIV / "watdiv-100k.nt.gz"), "-o", str(out))
    assert status == 0
    assert summary["distinct_triples"] == summary["triples_read"] == 104_072
    reference = tmp_path / "reference.hdt"  # copied: pyHDT writes its index beside the file
    reference.write_bytes((WATDIV / "watdiv-100k.hdt").read_bytes())
    assert hdt_triples(out) == hdt_triples(reference)
    assert summary["bytes_per_triple"] <= 12


# ---------------------------------------------------------------- bad input


BAD_LINES = [
    '<http://ex.org/s> <http://ex.org/p> "unterminated .',
    "<http://ex.org/s> <http://ex.org/p> <http://ex.org/o>",  # no dot: oxttl still emits the triple
    "<http://ex.org/s> <http://ex.org/p> <not an iri> .",
    "<http://ex.org/s> <http://ex.org/p> <http://ex.org/a> . <http://ex.org/s> <http://ex.org/p> <http://ex.org/b> .",
    '<http://ex.org/s> <http://ex.org/p> "x"^^<http://www.w3.org/1999/02/22-rdf-syntax-ns#langString> .',
    "<http://ex.org/s> <http://ex.org/p> .",
    '"literal subject" <http://ex.org/p> <http://ex.org/o> .',
]


def mixed_file(path: Path, good: int, gz: bool = False) -> tuple[Path, list[int]]:
    """`good` valid triples with the BAD_LINES spread among them; returns the bad line numbers."""
    lines, bad_at = [], []
    bad = iter(BAD_LINES)
    for i in range(good):
        lines.append(f"<http://ex.org/s{i}> <http://ex.org/p> <http://ex.org/o{i}> .")
        if i % 3 == 1 and (line := next(bad, None)):
            lines.append(line)
            bad_at.append(len(lines))
    return write(path, "\n".join(lines) + "\n", gz=gz), bad_at


def test_abort_reports_file_and_line_and_leaves_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    good = write(tmp_path / "good.nt", NT_B)
    bad, bad_at = mixed_file(tmp_path / "bad.nt.gz", 30, gz=True)
    out = tmp_path / "out.hdt"
    status, summary, err = load(capsys, str(good), str(bad), "-o", str(out))
    assert status == 1
    assert f"{bad}:{bad_at[0]}:" in err
    assert "end of line" in err  # the reason, from the parser
    assert summary["error"]["statement"]["line"] == bad_at[0]
    assert summary["error"]["statement"]["file"] == str(bad)
    assert outputs(tmp_path) == []  # no OUT.hdt, no index, no metadata, no temporary file


def test_abort_reports_the_first_error_even_across_parallel_blocks(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Blocks of 1 MiB are parsed in parallel: a later block's error must not win."""
    filler = "".join(f"<http://ex.org/s{i}> <http://ex.org/p> <http://ex.org/o{i}> .\n" for i in range(60_000))
    text = filler + "<http://ex.org/a> <b> .\n" + filler + "<bad\n" + filler
    src = write(tmp_path / "big.nt", text)
    status, summary, _ = load(capsys, str(src), "-o", str(tmp_path / "o.hdt"))
    assert status == 1
    assert summary["error"]["statement"]["line"] == 60_001
    assert outputs(tmp_path) == []


def test_skip_counts_and_reports_every_bad_statement(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad, bad_at = mixed_file(tmp_path / "bad.nt", 30)
    out = tmp_path / "out.hdt"
    status, summary, err = load(capsys, str(bad), "-o", str(out), "--on-error", "skip")
    assert status == 0
    assert summary["skipped"] == len(BAD_LINES) == len(bad_at)
    assert summary["skipped_by_file"] == {str(bad): len(BAD_LINES)}
    assert [s["line"] for s in summary["skipped_statements"]] == bad_at
    for line in bad_at:
        assert f"skipped {bad}:{line}:" in err
    # only the good lines: nothing of a bad line gets in (not even the triple before a missing dot)
    assert summary["triples_read"] == summary["distinct_triples"] == 30
    assert hdt_triples(out) == {(f"http://ex.org/s{i}", "http://ex.org/p", f"http://ex.org/o{i}") for i in range(30)}


TRICKY_TERMS = [
    "<http://ex.org/a b>",
    "<relative>",
    "<>",
    "<http://ex.org/caf\\u00e9>",
    "<http://ex.org/café>",
    "<http://ex.org/{x}>",
    "<http://ex.org/a|b>",
    "<http://[::1]/x>",
    "<http://ex.org:80x/>",
    "<urn:isbn:0451450523>",
    "<http://ex.org/%zz>",
    "<http://ex.org/%41>",
    "<mailto:a@b.org>",
    "<http://ex.org/\\u0020>",
    "_:b1",
    "_:b.x",
]
TRICKY_OBJECTS = [
    *TRICKY_TERMS,
    '"plain"',
    '"x"@en',
    '"x"@EN-gb',
    '"x"@abcdefghijk',
    '"x"@en-',
    '"x"@1en',
    '"x"^^<http://www.w3.org/1999/02/22-rdf-syntax-ns#langString>',
    '"x"^^<not an iri>',
    '"x"^^<http://www.w3.org/2001/XMLSchema#integer>',
    '"\\uD83D\\uDE00"',
    '"a\rb"',
    '"tab\tinside"',
    '"bad escape \\q"',
]


def test_line_acceptance_matches_the_strict_parser(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The converter parses plain lines leniently and re-checks IRIs and language tags itself;
    every line must be accepted or refused exactly as pyoxigraph's strict parser does."""
    rng = random.Random(7)
    lines = []
    for _ in range(1500):
        s = rng.choice(TRICKY_TERMS)
        p = rng.choice(TRICKY_TERMS[:14])
        o = rng.choice(TRICKY_OBJECTS)
        lines.append(f"{s} {p} {o} .")
    src = write(tmp_path / "tricky.nt", "\n".join(lines) + "\n")
    out = tmp_path / "t.hdt"
    status, summary, _ = load(capsys, str(src), "-o", str(out), "--on-error", "skip")
    assert status == 0

    refused, accepted = set(), set()
    for number, line in enumerate(lines, 1):
        try:
            triples = list(ox.parse(line.encode(), format=ox.RdfFormat.N_TRIPLES))
        except SyntaxError:
            refused.add(number)
        else:
            accepted |= {(spell(t.subject, ""), spell(t.predicate, ""), spell(t.object, "")) for t in triples}
    assert 100 < len(refused) < 1400  # both kinds are well represented
    assert summary["skipped"] == len(refused)
    assert set(summary["skipped_by_file"].values()) == {len(refused)}
    assert hdt_triples(out) == accepted


def test_skip_in_turtle_resumes_after_the_statement(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    text = (
        "@prefix ex: <http://ex.org/> .\n"
        "ex:a ex:p ex:b .\n"
        'ex:c ex:p "bad \\q escape" .\n'
        "ex:d ex:p ex:e .\n"
        "ex:f ex:p <bad iri> .\n"
        "ex:g ex:p ex:h .\n"
    )
    src = write(tmp_path / "bad.ttl", text)
    out = tmp_path / "out.hdt"
    status, summary, _ = load(capsys, str(src), "-o", str(out), "--on-error", "skip")
    assert status == 0
    assert summary["skipped"] == 2
    assert [s["line"] for s in summary["skipped_statements"]] == [3, 5]
    assert {s for s, _, _ in hdt_triples(out)} == {"http://ex.org/a", "http://ex.org/d", "http://ex.org/g"}


def test_missing_input_and_unknown_format_are_usage_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    status, _, err = load(capsys, str(tmp_path / "nope.nt"), "-o", str(tmp_path / "o.hdt"))
    assert status == 2 and "no such file" in err
    odd = write(tmp_path / "data.rdf", "<a> <b> <c> .")
    status, _, err = load(capsys, str(odd), "-o", str(tmp_path / "o.hdt"))
    assert status == 2 and "format" in err
    assert outputs(tmp_path) == []


# ---------------------------------------------------------------- outputs


def test_metadata_index_and_summary(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a = write(tmp_path / "a.nt", NT_A)
    b = write(tmp_path / "b.nt.gz", NT_B, gz=True)
    out = tmp_path / "data.hdt"
    status, summary, _ = load(capsys, str(a), str(b), "-o", str(out))
    assert status == 0
    assert outputs(tmp_path) == ["data.hdt", "data.hdt.meta.json", "data.hdt.quanta-index.v1"]

    meta = json.loads((tmp_path / "data.hdt.meta.json").read_text())
    assert re.fullmatch(r"[0-9a-f]{32}", meta["version_id"])
    assert meta["version_id"] == hashlib.sha256(out.read_bytes()).hexdigest()[:32] == summary["version_id"]
    assert meta["triples"] == summary["distinct_triples"] == len(expected([a, b]))
    assert meta["sources"] == [
        {
            "path": str(p),
            "bytes": p.stat().st_size,
            "sha256": hashlib.sha256(p.read_bytes()).hexdigest(),
            "format": "nt",
            "compression": c,
        }
        for p, c in ((a, "none"), (b, "gzip"))
    ]
    assert meta["built_at"].endswith("Z") and re.match(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", meta["built_at"])
    assert meta["seconds"] > 0
    assert meta["tool"]["name"] == "quanta-rdf2hdt" and meta["tool"]["writer"] == "hdt crate 0.7.3"
    assert meta["named_graphs"] == summary["named_graphs"] == build.NAMED_GRAPHS

    # the engine takes the version identity from the metadata
    from quanta.engine.storage.version import file_version

    assert file_version(str(out)) == int(meta["version_id"][:16], 16)

    # the index is complete: opening does not rebuild it; pyHDT (another reader) agrees on the count
    from quanta.engine.storage.native import NativeStore

    index = tmp_path / "data.hdt.quanta-index.v1"
    before = index.stat().st_mtime_ns, index.stat().st_size
    assert NativeStore(str(out)).triples == meta["triples"]
    assert (index.stat().st_mtime_ns, index.stat().st_size) == before
    copy = tmp_path / "copy" / "data.hdt"  # pyHDT writes its own index beside the file it opens
    copy.parent.mkdir()
    copy.write_bytes(out.read_bytes())
    assert hdt.HDTDocument(str(copy)).total_triples == meta["triples"]

    for key in ("triples_read", "distinct_triples", "skipped", "seconds", "bytes_out", "peak_memory_bytes"):
        assert key in summary
    assert summary["bytes_out"] == out.stat().st_size + index.stat().st_size == meta["hdt_bytes"] + meta["index_bytes"]


def test_rebuild_replaces_all_three_files(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "d.hdt"
    assert load(capsys, str(write(tmp_path / "a.nt", NT_A)), "-o", str(out))[0] == 0
    first = json.loads((tmp_path / "d.hdt.meta.json").read_text())["version_id"]
    assert load(capsys, str(write(tmp_path / "b.nt", NT_B)), "-o", str(out))[0] == 0
    meta = json.loads((tmp_path / "d.hdt.meta.json").read_text())
    assert meta["version_id"] != first
    from quanta.engine.storage.native import NativeStore

    assert NativeStore(str(out)).triples == meta["triples"] == 4  # a stale index would not open
    assert outputs(tmp_path) == ["d.hdt", "d.hdt.meta.json", "d.hdt.quanta-index.v1"]


# ---------------------------------------------------------------- memory


def test_max_memory_refuses_before_reading(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src = WATDIV / "watdiv-1m.nt.gz"
    out = tmp_path / "big.hdt"
    status, summary, err = load(capsys, str(src), "-o", str(out), "--max-memory", "100M")
    assert status == 3
    assert "refusing" in err and "--max-memory" in err and "100.0 MiB" in err
    assert "extrapolated from the first" in err  # the size bound was over budget: the input was sampled
    assert summary["error"]["exit_status"] == 3
    assert outputs(tmp_path) == []
    # the estimate is an upper bound of what this input really needs (about 120 MiB measured)
    estimate = memory.sampled([Source.probe(str(src))], build.converter())
    assert 150 * memory.MIB < estimate.peak_bytes < memory.bound([Source.probe(str(src))])


def test_sampling_lets_a_load_through_that_the_size_bound_would_refuse(tmp_path: Path) -> None:
    src = WATDIV / "watdiv-100k.nt.gz"  # bound about 210 MiB; sampled (whole file) about 90 MiB
    status, summary, err = load_apart(str(src), "-o", str(tmp_path / "w.hdt"), "--max-memory", "150M")
    assert status == 0, err
    assert summary["memory_estimate"] == "sample"
    assert summary["estimated_peak_memory_bytes"] < 150 * memory.MIB < memory.bound([Source.probe(str(src))])


def test_a_load_over_budget_is_stopped_while_running(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The model extrapolates from the start of the input: a start far more repetitive than the rest
    fools it, and the budget is then enforced on the running converter."""
    monkeypatch.setattr(memory, "SAMPLE_BYTES", 64 << 10)
    lines = ["<http://e.org/same> <http://e.org/p> <http://e.org/o> .\n"] * 20_000
    lines += [f'<http://e.org/s{i}> <http://e.org/p{i % 7}> "{i}" .\n' for i in range(1_000_000)]
    src = write(tmp_path / "tricky.nt", "".join(lines))
    status, _, err = load(capsys, str(src), "-o", str(tmp_path / "t.hdt"), "--max-memory", "170M")
    assert status == 3, err
    assert "stopped" in err and "over the budget" in err
    assert outputs(tmp_path) == []


def test_memory_sizes_and_gzip_estimate(tmp_path: Path) -> None:
    assert memory.parse_size("512M") == 512 << 20
    assert memory.parse_size("1.5GiB") == int(1.5 * (1 << 30))
    assert memory.parse_size("2000") == 2000
    with pytest.raises(ValueError):
        memory.parse_size("lots")
    text = NT_A * 200
    src = write(tmp_path / "x.nt.gz", text, gz=True)
    assert Source.probe(str(src)).uncompressed_bytes == len(text.encode())
    assert Source.probe(str(WATDIV / "watdiv-1m.nt.gz")).uncompressed_bytes == 150_692_620


# ---------------------------------------------------------------- the command


def test_command_prints_json_summary_and_is_interruptible(tmp_path: Path) -> None:
    """As a user runs it: the installed `quanta load` (the venv's, whatever PATH says) in a
    subprocess, stdout a pipe; then SIGINT mid-load."""
    src = write(tmp_path / "a.nt", NT_A)
    command = str(Path(sys.executable).parent / "quanta")
    done = subprocess.run(
        [command, "load", str(src), "-o", str(tmp_path / "a.hdt")], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    assert summary["distinct_triples"] == len(expected([src]))
    assert done.stderr == ""  # quiet when not a terminal

    out = tmp_path / "w.hdt"
    # watdiv-1m read four times over (merged into one dataset): a load of a few seconds, surely
    # still under way when the signal comes (the file alone loads in about 1.4 s here)
    inputs = [str(WATDIV / "watdiv-1m.nt.gz")] * 4
    proc = subprocess.Popen(
        [sys.executable, "-m", "quanta.cli.main", "load", *inputs, "-o", str(out)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        # Ctrl-C as a terminal sends it: a runner that started this suite in the background may
        # have left SIGINT ignored, which the child would inherit (and then load to the end)
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    time.sleep(0.8)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 130, err
    assert "interrupted" in err
    assert not [p for p in os.listdir(tmp_path) if p.startswith((".w.hdt", "w.hdt"))]
