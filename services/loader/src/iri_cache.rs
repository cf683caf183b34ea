//! The strict parser's checks (IRIs, language tags), run once per distinct IRI on the fast path.

use oxrdf::{NamedOrBlankNode, Term};

use crate::batch::XSD_STRING;

const RDF_LANG_STRING: &str = "http://www.w3.org/1999/02/22-rdf-syntax-ns#langString";

/// IRIs already validated, so that the IRIs repeated all over a dump are checked once: the strict
/// parser re-validates every occurrence, a fifth of the whole conversion's CPU. Direct-mapped and
/// exact (a hit compares the string).
pub struct IriCache {
    slots: Vec<Option<(u64, Box<str>)>>,
    hasher: ahash::RandomState,
}

impl IriCache {
    const SLOTS: usize = 1 << 14;

    pub fn new() -> Self {
        Self { slots: vec![None; Self::SLOTS], hasher: ahash::RandomState::with_seeds(1, 2, 3, 4) }
    }

    pub fn valid(&mut self, iri: &str) -> bool {
        let h = self.hasher.hash_one(iri);
        let slot = &mut self.slots[(h as usize) & (Self::SLOTS - 1)];
        if matches!(slot, Some((sh, s)) if *sh == h && &**s == iri) {
            return true;
        }
        if oxiri::Iri::parse(iri).is_err() {
            return false;
        }
        *slot = Some((h, iri.into()));
        true
    }

    /// What the strict parser checks and the lenient one does not, for a line without escapes
    /// or carriage returns: IRIs, language tags, and no rdf:langString without a language.
    pub fn valid_triple(&mut self, subject: &NamedOrBlankNode, predicate: &str, object: &Term) -> bool {
        if let NamedOrBlankNode::NamedNode(n) = subject {
            if !self.valid(n.as_str()) {
                return false;
            }
        }
        if !self.valid(predicate) {
            return false;
        }
        match object {
            Term::NamedNode(n) => self.valid(n.as_str()),
            Term::BlankNode(_) => true,
            Term::Literal(l) => match l.language() {
                Some(lang) => oxilangtag::LanguageTag::parse(lang).is_ok(),
                None => {
                    let dt = l.datatype().as_str();
                    dt == XSD_STRING || (dt != RDF_LANG_STRING && self.valid(dt))
                }
            },
        }
    }
}
