//! Terms in the HDT dictionary's spelling, packed many triples to a `Batch`: what the parser
//! threads produce and the `hdt` crate interns.

use oxrdf::{Literal, NamedOrBlankNode, Term};

use crate::pool::BATCHES;

/// The datatype of a literal without one, left implicit in the dictionary (as hdt-cpp does).
pub const XSD_STRING: &str = "http://www.w3.org/2001/XMLSchema#string";

/// Terms of many triples packed into one string: one allocation per batch instead of one per
/// term, and the terms are freed on the thread that made them rather than on the interning
/// thread (glibc's malloc is slow at cross-thread frees).
pub struct Batch {
    pub text: String,
    /// End offset of each term in `text`; three per triple.
    pub ends: Vec<u32>,
}

impl Batch {
    pub fn with_capacity(bytes: usize) -> Self {
        Self { text: String::with_capacity(bytes), ends: Vec::with_capacity(bytes / 24) }
    }

    /// An empty batch, recycled when one is available.
    pub fn recycled(bytes: usize) -> Self {
        match BATCHES.take() {
            Some(mut b) => {
                b.text.clear();
                b.ends.clear();
                b
            }
            None => Self::with_capacity(bytes),
        }
    }

    pub fn end_term(&mut self) {
        self.ends.push(u32::try_from(self.text.len()).expect("batch over 4 GiB"));
    }

    pub fn mark(&self) -> (usize, usize) {
        (self.text.len(), self.ends.len())
    }

    pub fn rollback(&mut self, mark: (usize, usize)) {
        self.text.truncate(mark.0);
        self.ends.truncate(mark.1);
    }

    pub fn term(&self, i: usize) -> &str {
        let start = if i == 0 { 0 } else { self.ends[i - 1] as usize };
        &self.text[start..self.ends[i] as usize]
    }

    pub fn triples(&self) -> usize {
        self.ends.len() / 3
    }

    /// Appends a triple in the HDT dictionary spelling (hdt-cpp's, which the engine reads):
    /// IRIs bare, literals quoted with their lexical form unescaped, blank nodes `_:label`.
    pub fn push(&mut self, subject: &NamedOrBlankNode, predicate: &str, object: &Term, bnode_prefix: &str) {
        match subject {
            NamedOrBlankNode::NamedNode(n) => self.text.push_str(n.as_str()),
            NamedOrBlankNode::BlankNode(b) => self.push_bnode(b.as_str(), bnode_prefix),
        }
        self.end_term();
        self.text.push_str(predicate);
        self.end_term();
        match object {
            Term::NamedNode(n) => self.text.push_str(n.as_str()),
            Term::BlankNode(b) => self.push_bnode(b.as_str(), bnode_prefix),
            Term::Literal(l) => self.push_literal(l),
        }
        self.end_term();
    }

    pub fn push_bnode(&mut self, label: &str, prefix: &str) {
        self.text.push_str("_:");
        self.text.push_str(prefix);
        self.text.push_str(label);
    }

    pub fn push_literal(&mut self, l: &Literal) {
        self.text.push('"');
        self.text.push_str(l.value());
        self.text.push('"');
        if let Some(lang) = l.language() {
            self.text.push('@');
            self.text.push_str(lang);
        } else {
            let dt = l.datatype().as_str();
            if dt != XSD_STRING {
                self.text.push_str("^^<");
                self.text.push_str(dt);
                self.text.push('>');
            }
        }
    }
}
