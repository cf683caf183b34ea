//! SPARQL 1.1 results (JSON, TSV, CSV, XML) written straight from term ids:
//! each term's encoding in a format is made once (from its dictionary
//! string) and then copied, so a page costs a cache lookup and a copy per
//! binding. The bytes are those of `quanta.sparql.results`'s writers (the
//! Python writers, which the gateway and the pyHDT backend use): the tests
//! compare both.

const XSD_STRING: &[u8] = b"http://www.w3.org/2001/XMLSchema#string";

/// A results format; its code is the index `Format::of` takes.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Format {
    Json,
    Tsv,
    Csv,
    Xml,
}

impl Format {
    pub const ALL: [Format; 4] = [Format::Json, Format::Tsv, Format::Csv, Format::Xml];

    pub fn of(name: &str) -> Option<Format> {
        match name {
            "json" => Some(Format::Json),
            "tsv" => Some(Format::Tsv),
            "csv" => Some(Format::Csv),
            "xml" => Some(Format::Xml),
            _ => None,
        }
    }

    pub fn index(self) -> usize {
        self as usize
    }

    /// A term (dictionary syntax) as this format writes it in a row; an
    /// error (nothing written) when the format cannot carry one of its
    /// characters (XML).
    pub fn term(self, term: &[u8], out: &mut Vec<u8>) -> Result<(), Unrepresentable> {
        match self {
            Format::Json => json_term(term, out),
            Format::Tsv => tsv_term(term, out),
            Format::Csv => csv_cell(term, out),
            Format::Xml => return xml_term(term, out),
        }
        Ok(())
    }

    /// Rows, each a list of cells: `None` unbound, else the term's encoding
    /// (from `term`), after `keys[i]` (JSON: `"var":`, XML: `<binding
    /// name="var">`; unused by TSV and CSV). JSON: the "bindings" array,
    /// brackets included; the others: the rows' lines as the writer's `rows`.
    pub fn rows<'a, R, C>(self, keys: &[Vec<u8>], rows: R, out: &mut Vec<u8>)
    where
        R: IntoIterator<Item = C>,
        C: IntoIterator<Item = Option<&'a [u8]>>,
    {
        if self == Format::Json {
            out.push(b'[');
        }
        for (r, row) in rows.into_iter().enumerate() {
            match self {
                Format::Json => {
                    if r > 0 {
                        out.push(b',');
                    }
                    out.push(b'{');
                    let mut first = true;
                    for (key, cell) in keys.iter().zip(row) {
                        if let Some(cell) = cell {
                            if !first {
                                out.push(b',');
                            }
                            first = false;
                            out.extend_from_slice(key);
                            out.extend_from_slice(cell);
                        }
                    }
                    out.push(b'}');
                }
                Format::Tsv | Format::Csv => {
                    let (sep, end): (u8, &[u8]) = if self == Format::Tsv {
                        (b'\t', b"\n")
                    } else {
                        (b',', b"\r\n")
                    };
                    let start = out.len();
                    for (i, cell) in row.into_iter().enumerate() {
                        if i > 0 {
                            out.push(sep);
                        }
                        if let Some(cell) = cell {
                            out.extend_from_slice(cell);
                        }
                    }
                    if self == Format::Csv && out.len() == start {
                        out.extend_from_slice(b"\"\""); // a lone empty cell (an empty line is no row)
                    }
                    out.extend_from_slice(end);
                }
                Format::Xml => {
                    out.extend_from_slice(b"<result>\n");
                    for (key, cell) in keys.iter().zip(row) {
                        if let Some(cell) = cell {
                            out.extend_from_slice(key);
                            out.extend_from_slice(cell);
                            out.extend_from_slice(b"</binding>\n");
                        }
                    }
                    out.extend_from_slice(b"</result>\n");
                }
            }
        }
        if self == Format::Json {
            out.push(b']');
        }
    }
}

/// A literal's parts: lexical form, language tag, datatype (None for
/// xsd:string, as `quanta.sparql.terms.split_literal`).
fn split_literal(term: &[u8]) -> (&[u8], Option<&[u8]>, Option<&[u8]>) {
    let end = term.iter().rposition(|&b| b == b'"').unwrap_or(0);
    let lexical = if end >= 1 { &term[1..end] } else { &term[0..0] };
    let rest = &term[end + 1..];
    if let Some(lang) = rest.strip_prefix(b"@") {
        return (lexical, Some(lang), None);
    }
    if let Some(datatype) = rest.strip_prefix(b"^^<") {
        let datatype = &datatype[..datatype.len().saturating_sub(1)];
        return (lexical, None, (datatype != XSD_STRING).then_some(datatype));
    }
    (lexical, None, None)
}

/// `{"type":...,"value":...}` of a term in dictionary syntax.
pub fn json_term(term: &[u8], out: &mut Vec<u8>) {
    if term.first() == Some(&b'"') {
        let (lexical, lang, datatype) = split_literal(term);
        out.extend_from_slice(br#"{"type":"literal","value":"#);
        json_string(lexical, out);
        if let Some(lang) = lang {
            out.extend_from_slice(br#","xml:lang":"#);
            json_string(lang, out);
        } else if let Some(datatype) = datatype {
            out.extend_from_slice(br#","datatype":"#);
            json_string(datatype, out);
        }
        out.push(b'}');
    } else if let Some(label) = term.strip_prefix(b"_:") {
        out.extend_from_slice(br#"{"type":"bnode","value":"#);
        json_string(label, out);
        out.push(b'}');
    } else {
        out.extend_from_slice(br#"{"type":"uri","value":"#);
        json_string(term, out);
        out.push(b'}');
    }
}

/// A JSON string as Python's `json.dumps` writes it by default: printable
/// ASCII as is, `\"` `\\` `\n` `\r` `\t` `\b` `\f`, everything else `\uxxxx`
/// (UTF-16, lowercase hex).
pub fn json_string(s: &[u8], out: &mut Vec<u8>) {
    out.push(b'"');
    let plain = |b: u8| (0x20..0x7f).contains(&b) && b != b'"' && b != b'\\';
    if s.iter().all(|&b| plain(b)) {
        out.extend_from_slice(s);
    } else {
        for c in String::from_utf8_lossy(s).chars() {
            match c {
                '"' => out.extend_from_slice(b"\\\""),
                '\\' => out.extend_from_slice(b"\\\\"),
                '\n' => out.extend_from_slice(b"\\n"),
                '\r' => out.extend_from_slice(b"\\r"),
                '\t' => out.extend_from_slice(b"\\t"),
                '\u{8}' => out.extend_from_slice(b"\\b"),
                '\u{c}' => out.extend_from_slice(b"\\f"),
                c if (' '..='~').contains(&c) => out.push(c as u8),
                c => {
                    let mut units = [0u16; 2];
                    for unit in c.encode_utf16(&mut units) {
                        out.extend_from_slice(format!("\\u{unit:04x}").as_bytes());
                    }
                }
            }
        }
    }
    out.push(b'"');
}

/// `\u00XX`, as the Python writers escape (uppercase hex).
fn unicode_escape(b: u8, out: &mut Vec<u8>) {
    out.extend_from_slice(format!("\\u{b:04X}").as_bytes());
}

/// A term in N-Triples syntax (`quanta.sparql.terms.nt_term`): TSV's cells.
pub fn tsv_term(term: &[u8], out: &mut Vec<u8>) {
    if term.first() == Some(&b'"') {
        let (lexical, lang, datatype) = split_literal(term);
        out.push(b'"');
        for &b in lexical {
            match b {
                b'\\' => out.extend_from_slice(b"\\\\"),
                b'"' => out.extend_from_slice(b"\\\""),
                b'\n' => out.extend_from_slice(b"\\n"),
                b'\r' => out.extend_from_slice(b"\\r"),
                b'\t' => out.extend_from_slice(b"\\t"),
                0x08 => out.extend_from_slice(b"\\b"),
                0x0c => out.extend_from_slice(b"\\f"),
                0x00..=0x1f | 0x7f => unicode_escape(b, out),
                _ => out.push(b),
            }
        }
        out.push(b'"');
        if let Some(lang) = lang {
            out.push(b'@');
            out.extend_from_slice(lang);
        } else if let Some(datatype) = datatype {
            out.extend_from_slice(b"^^");
            iri_ref(datatype, out);
        }
    } else if term.starts_with(b"_:") {
        out.extend_from_slice(term);
    } else {
        iri_ref(term, out);
    }
}

/// `<iri>` with what IRIREF does not allow as `\u` escapes (`terms.iri_ref`).
fn iri_ref(iri: &[u8], out: &mut Vec<u8>) {
    out.push(b'<');
    for &b in iri {
        match b {
            0x00..=0x20 | b'<' | b'>' | b'"' | b'{' | b'}' | b'|' | b'^' | b'`' | b'\\' => {
                unicode_escape(b, out)
            }
            _ => out.push(b),
        }
    }
    out.push(b'>');
}

/// A CSV cell: the lexical form or the IRI, quoted when it holds `,"\r\n`.
pub fn csv_cell(term: &[u8], out: &mut Vec<u8>) {
    let text = if term.first() == Some(&b'"') {
        split_literal(term).0
    } else {
        term
    };
    if text
        .iter()
        .any(|b| matches!(b, b',' | b'"' | b'\r' | b'\n'))
    {
        out.push(b'"');
        for &b in text {
            if b == b'"' {
                out.push(b'"');
            }
            out.push(b);
        }
        out.push(b'"');
    } else {
        out.extend_from_slice(text);
    }
}

/// A character a result holds that its format cannot carry (XML 1.0: the
/// control characters but tab, line feed and carriage return, U+FFFE,
/// U+FFFF, surrogates), as `quanta.sparql.results.Unrepresentable` refuses
/// it: the message is the same.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Unrepresentable(pub u32);

impl std::fmt::Display for Unrepresentable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "the XML results format cannot carry the character U+{:04X} that a result holds; \
             ask for application/sparql-results+json, text/tab-separated-values or text/csv",
            self.0
        )
    }
}

/// The first character of UTF-8 `s` that XML 1.0 forbids (its production
/// Char), even as a character reference. Bytewise: a UTF-8 continuation
/// byte is never below 0x80, so a low byte is the character itself.
fn xml_forbidden(s: &[u8]) -> Option<u32> {
    for (i, &b) in s.iter().enumerate() {
        let next = |k: usize| s.get(i + k).copied().unwrap_or(0);
        match b {
            0x09 | 0x0a | 0x0d => {}
            0x00..=0x1f => return Some(b as u32),
            0xef if next(1) == 0xbf && matches!(next(2), 0xbe | 0xbf) => {
                return Some(0xfffe + (next(2) - 0xbe) as u32)
            }
            0xed if (0xa0..=0xbf).contains(&next(1)) => {
                return Some(0xd000 | ((next(1) as u32 & 0x3f) << 6) | (next(2) as u32 & 0x3f))
            }
            _ => {}
        }
    }
    None
}

fn xml_check(s: &[u8]) -> Result<(), Unrepresentable> {
    xml_forbidden(s).map_or(Ok(()), |c| Err(Unrepresentable(c)))
}

/// A term as XML results write it: `<literal ...>`, `<bnode>`, `<uri>`.
pub fn xml_term(term: &[u8], out: &mut Vec<u8>) -> Result<(), Unrepresentable> {
    let start = out.len();
    let written = xml_term_parts(term, out);
    if written.is_err() {
        out.truncate(start);
    }
    written
}

fn xml_term_parts(term: &[u8], out: &mut Vec<u8>) -> Result<(), Unrepresentable> {
    if term.first() == Some(&b'"') {
        let (lexical, lang, datatype) = split_literal(term);
        out.extend_from_slice(b"<literal");
        if let Some(lang) = lang {
            out.extend_from_slice(b" xml:lang=");
            xml_attribute(lang, out)?;
        } else if let Some(datatype) = datatype {
            out.extend_from_slice(b" datatype=");
            xml_attribute(datatype, out)?;
        }
        out.push(b'>');
        xml_text(lexical, true, out)?;
        out.extend_from_slice(b"</literal>");
    } else if let Some(label) = term.strip_prefix(b"_:") {
        out.extend_from_slice(b"<bnode>");
        xml_text(label, false, out)?;
        out.extend_from_slice(b"</bnode>");
    } else {
        out.extend_from_slice(b"<uri>");
        xml_text(term, false, out)?;
        out.extend_from_slice(b"</uri>");
    }
    Ok(())
}

/// `xml.sax.saxutils.escape` (with `\r` as `&#13;` in literals: a raw CR
/// would be read back as a line feed).
fn xml_text(s: &[u8], cr: bool, out: &mut Vec<u8>) -> Result<(), Unrepresentable> {
    xml_check(s)?;
    for &b in s {
        match b {
            b'&' => out.extend_from_slice(b"&amp;"),
            b'<' => out.extend_from_slice(b"&lt;"),
            b'>' => out.extend_from_slice(b"&gt;"),
            b'\r' if cr => out.extend_from_slice(b"&#13;"),
            _ => out.push(b),
        }
    }
    Ok(())
}

/// `xml.sax.saxutils.quoteattr`: escaped, in double quotes unless the value
/// holds one (then single quotes, or `&quot;` if it holds both).
pub fn xml_attribute(s: &[u8], out: &mut Vec<u8>) -> Result<(), Unrepresentable> {
    xml_check(s)?;
    let double = s.contains(&b'"');
    let quote = if double && !s.contains(&b'\'') {
        b'\''
    } else {
        b'"'
    };
    out.push(quote);
    for &b in s {
        match b {
            b'&' => out.extend_from_slice(b"&amp;"),
            b'<' => out.extend_from_slice(b"&lt;"),
            b'>' => out.extend_from_slice(b"&gt;"),
            b'\n' => out.extend_from_slice(b"&#10;"),
            b'\r' => out.extend_from_slice(b"&#13;"),
            b'\t' => out.extend_from_slice(b"&#9;"),
            b'"' if quote == b'"' => out.extend_from_slice(b"&quot;"),
            _ => out.push(b),
        }
    }
    out.push(quote);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn term(format: Format, t: &str) -> String {
        let mut out = Vec::new();
        format.term(t.as_bytes(), &mut out).unwrap();
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn json_terms_as_python_writes_them() {
        let json = |t| term(Format::Json, t);
        assert_eq!(json("http://a/b"), r#"{"type":"uri","value":"http://a/b"}"#);
        assert_eq!(json("_:b1"), r#"{"type":"bnode","value":"b1"}"#);
        assert_eq!(
            json(r#""x"@en"#),
            r#"{"type":"literal","value":"x","xml:lang":"en"}"#
        );
        assert_eq!(
            json(r#""1"^^<http://www.w3.org/2001/XMLSchema#integer>"#),
            r#"{"type":"literal","value":"1","datatype":"http://www.w3.org/2001/XMLSchema#integer"}"#
        );
        assert_eq!(
            json(r#""s"^^<http://www.w3.org/2001/XMLSchema#string>"#),
            r#"{"type":"literal","value":"s"}"#
        );
        assert_eq!(
            json("\"a\"b\\\n\u{1}é😀\""),
            r#"{"type":"literal","value":"a\"b\\\n\u0001\u00e9\ud83d\ude00"}"#
        );
    }

    #[test]
    fn tsv_csv_xml_terms() {
        assert_eq!(term(Format::Tsv, "http://a/b c"), r"<http://a/b\u0020c>");
        assert_eq!(
            term(Format::Tsv, "\"a\tb\u{7f}\"@en"),
            "\"a\\tb\\u007F\"@en"
        );
        assert_eq!(term(Format::Csv, "\"a,\"b\""), "\"a,\"\"b\"");
        assert_eq!(term(Format::Csv, "_:x"), "_:x");
        assert_eq!(
            term(Format::Xml, "\"a<&\r\"^^<http://x/'>"),
            "<literal datatype=\"http://x/'\">a&lt;&amp;&#13;</literal>"
        );
        let attribute = |s: &str| {
            let mut out = Vec::new();
            xml_attribute(s.as_bytes(), &mut out).unwrap();
            String::from_utf8(out).unwrap()
        };
        assert_eq!(attribute("a\"b"), "'a\"b'");
        assert_eq!(attribute("a\"b'\n"), "\"a&quot;b'&#10;\"");
    }

    #[test]
    fn xml_refuses_what_xml_cannot_carry() {
        let refused = |t: &[u8]| {
            let mut out = b"kept".to_vec();
            let error = Format::Xml.term(t, &mut out).unwrap_err();
            assert_eq!(out, b"kept", "nothing written");
            error.0
        };
        assert_eq!(refused(b"\"a\x00b\""), 0x0);
        assert_eq!(refused(b"\"a\x08\"@en"), 0x8);
        assert_eq!(refused("\"\u{fffe}\"".as_bytes()), 0xfffe);
        assert_eq!(refused("\"x\u{ffff}\"".as_bytes()), 0xffff);
        assert_eq!(refused(b"\"s\xed\xa0\x80\""), 0xd800); // a surrogate (CESU-8)
        assert_eq!(refused(b"\"x\"^^<http://a/\x1f>"), 0x1f);
        assert_eq!(refused(b"_:b\x0b"), 0xb);
        assert_eq!(refused(b"http://a/\x0c"), 0xc);
        assert_eq!(
            term(Format::Xml, "\"\t\n\r\u{fffd}\u{10000}\""),
            "<literal>\t\n&#13;\u{fffd}\u{10000}</literal>"
        );
        assert_eq!(
            term(Format::Json, "\"\u{0}\u{fffe}\""),
            r#"{"type":"literal","value":"\u0000\ufffe"}"#
        );
        assert!(Unrepresentable(0xfffe).to_string().contains("U+FFFE"));
    }

    #[test]
    fn rows_are_framed_per_format() {
        let rows = [vec![Some(&b"A"[..]), None], vec![None, None]];
        let keys = vec![b"k1:".to_vec(), b"k2:".to_vec()];
        let framed = |format: Format| {
            let mut out = Vec::new();
            format.rows(&keys, rows.iter().map(|r| r.iter().copied()), &mut out);
            String::from_utf8(out).unwrap()
        };
        assert_eq!(framed(Format::Json), "[{k1:A},{}]");
        assert_eq!(framed(Format::Tsv), "A\t\n\t\n");
        assert_eq!(framed(Format::Csv), "A,\r\n,\r\n");
        assert_eq!(
            framed(Format::Xml),
            "<result>\nk1:A</binding>\n</result>\n<result>\n</result>\n"
        );
    }
}
