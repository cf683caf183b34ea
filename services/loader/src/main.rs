//! quanta-rdf2hdt: RDF dumps (N-Triples, N-Quads, Turtle; plain or gzip) into one HDT file.
//!
//! Parsing is oxttl (the parser the `hdt` crate itself uses) with all its strict checks (a fast
//! path parses plain N-Triples lines leniently and runs those checks once per distinct IRI); the
//! HDT is written by the `hdt` crate (`Hdt::from_triples`), never by code of ours. `quanta load` (Python) runs this
//! binary and reads the JSON lines it prints on stdout:
//!
//!   {"event":"progress","bytes":..,"triples":..}      every --progress-ms
//!   {"event":"skipped","file":..,"line":..,"column":..,"reason":..}   --on-error skip, one per statement
//!   {"event":"phase","name":"dictionary"|"write"}
//!   {"event":"error","file":..,"line":..,"column":..,"reason":..}     then exit status 1
//!   {"event":"done",...}                               the summary, exit status 0
//!
//! With `--sample BYTES` it writes nothing and prints, per input, what the first BYTES hold
//! (triples, distinct terms and their bytes): `quanta load`'s memory model extrapolates from it.
//!
//! Usage: quanta-rdf2hdt --output OUT --dataset-iri IRI [--on-error abort|skip] [--threads N]
//!        [--progress-ms MS] [--scope-blank-nodes] --input FORMAT COMPRESSION BASE PATH...
//! where FORMAT is nt, nq or ttl, COMPRESSION is gz or plain, BASE the base IRI for Turtle.
//!
//! Pipeline (why it is shaped like this): the crate's `from_triples` interns terms on the calling
//! thread, so that thread does nothing else; a producer thread reads (and un-gzips) the inputs,
//! cuts line-based formats into line-aligned blocks that worker threads parse in parallel (the
//! same parallelism `hdt convert` gets from splitting a plain file), and parses Turtle itself.
//!
//! Where each part lives: `cli` the arguments; `producer` reads the inputs and runs the parser
//! threads (`line_formats` for N-Triples and N-Quads, `turtle`), which append terms to `batch`es;
//! `feed` hands the batches to the `hdt` crate and `convert` writes the file and the summary;
//! `events` prints the JSON lines; `sample` measures the first bytes for the memory model.

mod batch;
mod cli;
mod convert;
mod events;
mod feed;
mod fingerprint;
mod iri_cache;
mod line_formats;
mod pool;
mod producer;
mod sample;
mod shared;
mod turtle;

fn main() {
    let args = cli::parse_args();
    match args.sample {
        Some(limit) => sample::sample(&args, limit),
        None => convert::convert(&args),
    }
}
