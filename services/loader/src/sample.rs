//! `--sample BYTES`: what the first bytes of each input hold, for `quanta load`'s memory model.

use std::io::{BufReader, Read};
use std::sync::Arc;

use flate2::read::MultiGzDecoder;
use oxttl::TurtleParser;

use crate::batch::Batch;
use crate::cli::{Args, Format};
use crate::events::{emit, fatal, json_str};
use crate::fingerprint::Fingerprint;
use crate::iri_cache::IriCache;
use crate::line_formats::{parse_block, Block};
use crate::producer::open;
use crate::shared::Shared;

/// Triples, distinct terms and distinct term bytes in the first `limit` uncompressed bytes of each
/// input; malformed statements are ignored (the sample may end mid-statement).
pub fn sample(args: &Args, limit: u64) {
    let shared = Arc::new(Shared::new(true, true));
    let fp = Fingerprint::new();
    for input in &args.inputs {
        let mut tap = open(input, &shared);
        let mut data = Vec::new();
        let read = if input.gzip {
            MultiGzDecoder::new(BufReader::new(&mut tap)).take(limit).read_to_end(&mut data)
        } else {
            (&mut tap).take(limit).read_to_end(&mut data)
        };
        if let Err(e) = read {
            fatal(&input.display, &format!("cannot read: {e}"));
        }
        let complete = (data.len() as u64) < limit;
        let mut batch = Batch::with_capacity(data.len());
        let sampled;
        if input.format == Format::Turtle {
            sampled = data.len();
            for t in TurtleParser::new().with_base_iri(&input.base).unwrap_or_default().for_slice(&data).flatten() {
                batch.push(&t.subject, t.predicate.as_str(), &t.object, "");
            }
        } else {
            if !complete {
                data.truncate(memchr::memrchr(b'\n', &data).map_or(0, |i| i + 1));
            }
            sampled = data.len();
            let block = Block { seq: 0, input: 0, first_line: 1, data };
            batch = parse_block(&block, input, "", &shared, &fp, &mut Vec::new(), &mut IriCache::new());
        }
        let mut seen = std::collections::HashSet::with_capacity(batch.ends.len());
        let mut distinct_bytes = 0u64;
        for i in 0..batch.ends.len() {
            let term = batch.term(i);
            if seen.insert(fp.a.hash_one(term)) {
                distinct_bytes += term.len() as u64;
            }
        }
        emit(&format!(
            "{{\"event\":\"sample\",\"file\":{},\"bytes\":{},\"complete\":{complete},\"triples\":{},\
             \"distinct_terms\":{},\"distinct_term_bytes\":{distinct_bytes}}}",
            json_str(&input.display),
            sampled,
            batch.triples(),
            seen.len()
        ));
    }
}
