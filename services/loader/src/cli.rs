//! The command line: what to read (format, compression, base IRI, path of each input), where to
//! write, and how (error mode, threads, progress ticks, blank node scoping, sampling).

use std::path::PathBuf;
use std::process;
use std::thread;

#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Format {
    NTriples,
    NQuads,
    Turtle,
}

pub struct Input {
    pub format: Format,
    pub gzip: bool,
    /// Base IRI for relative IRIs (Turtle only; N-Triples and N-Quads have none).
    pub base: String,
    pub path: PathBuf,
    pub display: String,
}

pub struct Args {
    pub output: PathBuf,
    pub dataset_iri: String,
    pub skip: bool,
    pub threads: usize,
    pub progress_ms: u64,
    pub scope_blank_nodes: bool,
    /// `--sample BYTES`: only measure the first BYTES of each input (for the memory model).
    pub sample: Option<u64>,
    pub inputs: Vec<Input>,
}

fn usage(msg: &str) -> ! {
    eprintln!("quanta-rdf2hdt: {msg}");
    eprintln!(
        "usage: quanta-rdf2hdt --output OUT --dataset-iri IRI [--on-error abort|skip] [--threads N] \
         [--progress-ms MS] [--scope-blank-nodes] --input FORMAT COMPRESSION BASE PATH..."
    );
    process::exit(2);
}

pub fn parse_args() -> Args {
    let mut output = None;
    let mut dataset_iri = None;
    let mut skip = false;
    let mut threads = thread::available_parallelism().map_or(2, std::num::NonZero::get).min(16);
    let mut progress_ms = 0;
    let mut scope_blank_nodes = false;
    let mut sample = None;
    let mut inputs = Vec::new();
    let mut it = std::env::args().skip(1);
    while let Some(arg) = it.next() {
        let mut value = |name: &str| it.next().unwrap_or_else(|| usage(&format!("{name} needs a value")));
        match arg.as_str() {
            "--output" => output = Some(PathBuf::from(value("--output"))),
            "--dataset-iri" => dataset_iri = Some(value("--dataset-iri")),
            "--on-error" => match value("--on-error").as_str() {
                "abort" => skip = false,
                "skip" => skip = true,
                other => usage(&format!("--on-error must be abort or skip, not {other}")),
            },
            "--threads" => threads = value("--threads").parse().unwrap_or_else(|_| usage("bad --threads")),
            "--progress-ms" => {
                progress_ms = value("--progress-ms").parse().unwrap_or_else(|_| usage("bad --progress-ms"));
            }
            "--scope-blank-nodes" => scope_blank_nodes = true,
            "--sample" => sample = Some(value("--sample").parse().unwrap_or_else(|_| usage("bad --sample"))),
            "--version" => {
                println!("quanta-rdf2hdt {} (hdt crate 0.7.3)", env!("CARGO_PKG_VERSION"));
                process::exit(0);
            }
            "--input" => {
                let (fmt, comp, base, path) = (value("FORMAT"), value("COMPRESSION"), value("BASE"), value("PATH"));
                let format = match fmt.as_str() {
                    "nt" => Format::NTriples,
                    "nq" => Format::NQuads,
                    "ttl" => Format::Turtle,
                    _ => usage(&format!("unknown format {fmt:?}")),
                };
                let gzip = match comp.as_str() {
                    "gz" => true,
                    "plain" => false,
                    _ => usage(&format!("unknown compression {comp:?}")),
                };
                inputs.push(Input { format, gzip, base, path: PathBuf::from(&path), display: path });
            }
            other => usage(&format!("unknown option {other}")),
        }
    }
    let output =
        output.unwrap_or_else(|| if sample.is_some() { PathBuf::new() } else { usage("--output is required") });
    let dataset_iri = dataset_iri.unwrap_or_default();
    if inputs.is_empty() {
        usage("no input");
    }
    Args { output, dataset_iri, skip, threads: threads.max(1), progress_ms, scope_blank_nodes, sample, inputs }
}
