//! SPARQL 1.1 JSON results written straight from term ids: each term's
//! encoding is made once (from its dictionary string) and then copied, so a
//! page costs a cache lookup and a copy per binding. The bytes are those of
//! `quanta.engine.results.json_bindings_text` (Python's `json.dumps` with
//! `ensure_ascii`): the tests compare both.

const XSD_STRING: &[u8] = b"http://www.w3.org/2001/XMLSchema#string";

/// `{"type":...,"value":...}` of a term in dictionary syntax.
pub fn json_term(term: &[u8], out: &mut Vec<u8>) {
    if term.first() == Some(&b'"') {
        let end = term.iter().rposition(|&b| b == b'"').unwrap_or(0);
        let lexical = if end >= 1 { &term[1..end] } else { &term[0..0] };
        let rest = &term[end + 1..];
        out.extend_from_slice(br#"{"type":"literal","value":"#);
        json_string(lexical, out);
        if let Some(lang) = rest.strip_prefix(b"@") {
            out.extend_from_slice(br#","xml:lang":"#);
            json_string(lang, out);
        } else if let Some(datatype) = rest.strip_prefix(b"^^<") {
            let datatype = &datatype[..datatype.len().saturating_sub(1)];
            if datatype != XSD_STRING {
                out.extend_from_slice(br#","datatype":"#);
                json_string(datatype, out);
            }
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

#[cfg(test)]
mod tests {
    use super::*;

    fn term(t: &str) -> String {
        let mut out = Vec::new();
        json_term(t.as_bytes(), &mut out);
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn terms_as_python_writes_them() {
        assert_eq!(term("http://a/b"), r#"{"type":"uri","value":"http://a/b"}"#);
        assert_eq!(term("_:b1"), r#"{"type":"bnode","value":"b1"}"#);
        assert_eq!(
            term(r#""x"@en"#),
            r#"{"type":"literal","value":"x","xml:lang":"en"}"#
        );
        assert_eq!(
            term(r#""1"^^<http://www.w3.org/2001/XMLSchema#integer>"#),
            r#"{"type":"literal","value":"1","datatype":"http://www.w3.org/2001/XMLSchema#integer"}"#
        );
        assert_eq!(
            term(r#""s"^^<http://www.w3.org/2001/XMLSchema#string>"#),
            r#"{"type":"literal","value":"s"}"#
        );
        assert_eq!(
            term("\"a\"b\\\n\u{1}é😀\""),
            r#"{"type":"literal","value":"a\"b\\\n\u0001\u00e9\ud83d\ude00"}"#
        );
    }
}
