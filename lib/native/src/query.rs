//! SPARQL queries parsed with Oxigraph's `spargebra` (SPARQL 1.1 algebra, errors
//! with line and column, in microseconds where rdflib took milliseconds).
//!
//! The algebra crosses into Python as nested tuples whose first item is a tag
//! (`quanta.sparql.translate` reads them); Rust keeps no state between calls.
//! spargebra's parser recurses with the query's nesting: `parse` gives
//! deeply bracketed text a thread with stack for it, and the service bounds
//! the nesting before parsing (`quanta.sparql.bounds`).

use spargebra::algebra::{
    AggregateExpression, AggregateFunction, Expression, Function, GraphPattern, OrderExpression,
    PropertyPathExpression, QueryDataset,
};
use spargebra::term::{
    GroundTerm, Literal, NamedNode, NamedNodePattern, TermPattern, TriplePattern, Variable,
};
use spargebra::{Query, SparqlParser};

/// Brackets nested this deep or less parse on the caller's stack: spargebra's
/// recursive descent takes 2-4 KiB per level (256 levels fit in 1 MiB).
const DEPTH_ON_CALLER: usize = 64;
/// Stack for a parse on a thread of its own, per level of nesting, and at most.
const STACK_PER_LEVEL: usize = 16 << 10;
const MAX_STACK: usize = 1 << 30;

/// A syntax error: spargebra's message, and where it is (1-based; column in characters).
#[derive(Debug)]
pub struct SyntaxError {
    pub message: String,
    pub line: usize,
    pub column: usize,
}

/// Parse `text` (relative IRIs against `base`). Deeply bracketed text parses on a
/// thread with stack for its nesting (counted over every bracket, so never less).
pub fn parse(text: &str, base: Option<&str>) -> Result<Query, SyntaxError> {
    let depth = bracket_depth(text);
    if depth <= DEPTH_ON_CALLER {
        return parse_here(text, base);
    }
    let stack = (8 << 20) + depth.saturating_mul(STACK_PER_LEVEL).min(MAX_STACK);
    std::thread::scope(|scope| {
        std::thread::Builder::new()
            .stack_size(stack)
            .spawn_scoped(scope, || parse_here(text, base))
            .map_err(|e| SyntaxError {
                message: format!("no thread to parse on: {e}"),
                line: 1,
                column: 1,
            })?
            .join()
            .unwrap_or_else(|_| {
                Err(SyntaxError {
                    message: "the parser failed".into(),
                    line: 1,
                    column: 1,
                })
            })
    })
}

/// The deepest nesting of brackets, strings and comments included.
fn bracket_depth(text: &str) -> usize {
    let (mut depth, mut deepest) = (0usize, 0usize);
    for b in text.bytes() {
        match b {
            b'(' | b'{' | b'[' => {
                depth += 1;
                deepest = deepest.max(depth);
            }
            b')' | b'}' | b']' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    deepest
}

fn parse_here(text: &str, base: Option<&str>) -> Result<Query, SyntaxError> {
    let mut parser = SparqlParser::new();
    if let Some(base) = base {
        parser = parser.with_base_iri(base).map_err(|e| SyntaxError {
            message: e.to_string(),
            line: 1,
            column: 1,
        })?;
    }
    parser
        .parse_query(text)
        .map_err(|e| located(text, e.to_string()))
}

/// spargebra's message names the place as "error at LINE:COLUMN: expected ..."
/// (the furthest any rule got, the column in characters) with what was tried there.
/// Its keywords are read as "any N characters, then compare", so a place where
/// only keywords failed is N characters past where the keyword began: the error
/// is put back at the start of that token.
fn located(text: &str, message: String) -> SyntaxError {
    let place = message.strip_prefix("error at ").and_then(|rest| {
        let (line, rest) = rest.split_once(':')?;
        let (column, detail) = rest.split_once(": ")?;
        Some((
            line.parse::<usize>().ok()?,
            column.parse::<usize>().ok()?,
            detail,
        ))
    });
    let Some((line, column, detail)) = place else {
        return SyntaxError {
            message,
            line: 1,
            column: 1,
        };
    };
    let source_line = text.split('\n').nth(line - 1).unwrap_or("");
    let last_line = text.split('\n').count() == line;
    let tried = Tried::of(detail);
    let mut at = source_line
        .char_indices()
        .nth(column - 1)
        .map_or(source_line.len(), |(i, _)| i);
    if tried.only_keywords() {
        let shortest = tried.keywords.iter().map(|k| k.len()).min().unwrap_or(0);
        at = at.saturating_sub(shortest);
        while at > 0 && !source_line[..at].ends_with(char::is_whitespace) {
            at -= 1;
        }
    }
    while !source_line.is_char_boundary(at) {
        at -= 1;
    }
    let found = found_at(&source_line[at..], last_line);
    SyntaxError {
        message: tried.explain(&found),
        line,
        column: source_line[..at].chars().count() + 1,
    }
}

/// What the text holds at the error: a token, or the end of the line or query.
fn found_at(rest: &str, last_line: bool) -> String {
    let rest = rest.trim_start();
    let token: String = rest
        .chars()
        .take_while(|c| !c.is_whitespace())
        .take(20)
        .collect();
    match (token.is_empty(), last_line) {
        (false, _) => format!("`{token}`"),
        (true, true) => "the end of the query".into(),
        (true, false) => "the end of the line".into(),
    }
}

/// What peg tried at the error's place, by kind.
struct Tried<'a> {
    /// rules' own messages ("IRI parsing failed", an unbound variable)
    reasons: Vec<&'a str>,
    /// quoted tokens: `"{"`, `"."`
    tokens: Vec<&'a str>,
    keywords: Vec<&'a str>,
    /// character classes: `[...]`
    classes: usize,
}

impl<'a> Tried<'a> {
    fn of(detail: &'a str) -> Self {
        let expected = detail
            .strip_prefix("expected one of ")
            .or_else(|| detail.strip_prefix("expected "))
            .unwrap_or(detail);
        let mut tried = Tried {
            reasons: vec![],
            tokens: vec![],
            keywords: vec![],
            classes: 0,
        };
        let (mut depth, mut quoted, mut start) = (0i32, false, 0usize);
        let mut items = Vec::new();
        for (i, c) in expected.char_indices() {
            match c {
                '"' if depth == 0 => quoted = !quoted,
                '[' if !quoted => depth += 1,
                ']' if !quoted => depth -= 1,
                ',' if depth == 0 && !quoted => {
                    items.push(expected[start..i].trim());
                    start = i + 1;
                }
                _ => {}
            }
        }
        items.push(expected[start..].trim());
        for item in items.into_iter().filter(|i| !i.is_empty()) {
            if item == "[_]" {
                // a keyword's characters, read past the end of the text
            } else if item.starts_with('[') {
                tried.classes += 1;
            } else if item.starts_with('"') {
                tried.tokens.push(item);
            } else if item.contains(' ') {
                tried.reasons.push(item);
            } else {
                tried.keywords.push(item);
            }
        }
        tried
    }

    fn only_keywords(&self) -> bool {
        !self.keywords.is_empty()
            && self.tokens.is_empty()
            && self.classes == 0
            && self.reasons.is_empty()
    }

    fn explain(&self, found: &str) -> String {
        if let Some(reason) = self.reasons.first() {
            return if *reason == "IRI parsing failed" {
                "an IRI that is not valid, or relative with no BASE".into()
            } else {
                (*reason).to_owned()
            };
        }
        if self.tokens.is_empty() {
            format!("unexpected {found}")
        } else {
            format!("unexpected {found}; expected {}", self.tokens.join(" or "))
        }
    }
}

/// The algebra as a plain tree, the shape `quanta.sparql.translate` reads.
///
/// Terms: `("iri", s)`, `("literal", lexical, language | None, datatype)`,
/// `("var", name)`, `("bnode", label)`. Patterns, expressions, paths and
/// aggregates: a tag and their parts (see each `match` below).
#[derive(Debug, Clone, PartialEq)]
pub enum Tree {
    None,
    Bool(bool),
    Int(u64),
    Str(String),
    /// A tagged node: tag, parts
    Node(&'static str, Vec<Tree>),
    List(Vec<Tree>),
}

fn node(tag: &'static str, parts: Vec<Tree>) -> Tree {
    Tree::Node(tag, parts)
}

fn s(value: &str) -> Tree {
    Tree::Str(value.to_owned())
}

pub fn query(q: &Query) -> Tree {
    let base = |b: Option<&str>| b.map_or(Tree::None, s);
    match q {
        Query::Select {
            dataset,
            pattern,
            base_iri,
        } => node(
            "select",
            vec![
                self::dataset(dataset),
                graph_pattern(pattern),
                base(base_iri.as_ref().map(|b| b.as_str())),
            ],
        ),
        Query::Construct {
            template,
            dataset,
            pattern,
            base_iri,
        } => node(
            "construct",
            vec![
                Tree::List(template.iter().map(triple).collect()),
                self::dataset(dataset),
                graph_pattern(pattern),
                base(base_iri.as_ref().map(|b| b.as_str())),
            ],
        ),
        Query::Describe {
            dataset,
            pattern,
            base_iri,
        } => node(
            "describe",
            vec![
                self::dataset(dataset),
                graph_pattern(pattern),
                base(base_iri.as_ref().map(|b| b.as_str())),
            ],
        ),
        Query::Ask {
            dataset,
            pattern,
            base_iri,
        } => node(
            "ask",
            vec![
                self::dataset(dataset),
                graph_pattern(pattern),
                base(base_iri.as_ref().map(|b| b.as_str())),
            ],
        ),
    }
}

fn dataset(d: &Option<QueryDataset>) -> Tree {
    match d {
        None => Tree::None,
        Some(d) => node(
            "dataset",
            vec![
                Tree::List(d.default.iter().map(iri).collect()),
                d.named
                    .as_ref()
                    .map_or(Tree::None, |n| Tree::List(n.iter().map(iri).collect())),
            ],
        ),
    }
}

fn iri(n: &NamedNode) -> Tree {
    node("iri", vec![s(n.as_str())])
}

fn variable(v: &Variable) -> Tree {
    node("var", vec![s(v.as_str())])
}

fn literal(l: &Literal) -> Tree {
    node(
        "literal",
        vec![
            s(l.value()),
            l.language().map_or(Tree::None, s),
            s(l.datatype().as_str()),
        ],
    )
}

fn term_pattern(t: &TermPattern) -> Tree {
    match t {
        TermPattern::NamedNode(n) => iri(n),
        TermPattern::BlankNode(b) => node("bnode", vec![s(b.as_str())]),
        TermPattern::Literal(l) => literal(l),
        TermPattern::Variable(v) => variable(v),
        #[allow(unreachable_patterns)]
        _ => node("unsupported", vec![s("RDF-star triple terms")]),
    }
}

fn named_node_pattern(n: &NamedNodePattern) -> Tree {
    match n {
        NamedNodePattern::NamedNode(n) => iri(n),
        NamedNodePattern::Variable(v) => variable(v),
    }
}

fn ground_term(t: &GroundTerm) -> Tree {
    match t {
        GroundTerm::NamedNode(n) => iri(n),
        GroundTerm::Literal(l) => literal(l),
        #[allow(unreachable_patterns)]
        _ => node("unsupported", vec![s("RDF-star triple terms")]),
    }
}

fn triple(t: &TriplePattern) -> Tree {
    Tree::List(vec![
        term_pattern(&t.subject),
        named_node_pattern(&t.predicate),
        term_pattern(&t.object),
    ])
}

fn boxed(tag: &'static str, parts: &[&GraphPattern]) -> Tree {
    node(tag, parts.iter().map(|p| graph_pattern(p)).collect())
}

fn graph_pattern(p: &GraphPattern) -> Tree {
    match p {
        GraphPattern::Bgp { patterns } => node(
            "bgp",
            vec![Tree::List(patterns.iter().map(triple).collect())],
        ),
        GraphPattern::Path {
            subject,
            path,
            object,
        } => node(
            "path",
            vec![
                term_pattern(subject),
                property_path(path),
                term_pattern(object),
            ],
        ),
        GraphPattern::Join { left, right } => boxed("join", &[left, right]),
        GraphPattern::LeftJoin {
            left,
            right,
            expression,
        } => node(
            "leftjoin",
            vec![
                graph_pattern(left),
                graph_pattern(right),
                expression.as_ref().map_or(Tree::None, self::expression),
            ],
        ),
        GraphPattern::Filter { expr, inner } => {
            node("filter", vec![expression(expr), graph_pattern(inner)])
        }
        GraphPattern::Union { left, right } => boxed("union", &[left, right]),
        GraphPattern::Graph { name, inner } => node(
            "graph",
            vec![named_node_pattern(name), graph_pattern(inner)],
        ),
        GraphPattern::Extend {
            inner,
            variable: v,
            expression: e,
        } => node(
            "extend",
            vec![graph_pattern(inner), variable(v), expression(e)],
        ),
        GraphPattern::Minus { left, right } => boxed("minus", &[left, right]),
        GraphPattern::Values {
            variables,
            bindings,
        } => node(
            "values",
            vec![
                Tree::List(variables.iter().map(variable).collect()),
                Tree::List(
                    bindings
                        .iter()
                        .map(|row| {
                            Tree::List(
                                row.iter()
                                    .map(|t| t.as_ref().map_or(Tree::None, ground_term))
                                    .collect(),
                            )
                        })
                        .collect(),
                ),
            ],
        ),
        GraphPattern::OrderBy { inner, expression } => node(
            "orderby",
            vec![
                graph_pattern(inner),
                Tree::List(
                    expression
                        .iter()
                        .map(|o| match o {
                            OrderExpression::Asc(e) => {
                                Tree::List(vec![Tree::Bool(false), self::expression(e)])
                            }
                            OrderExpression::Desc(e) => {
                                Tree::List(vec![Tree::Bool(true), self::expression(e)])
                            }
                        })
                        .collect(),
                ),
            ],
        ),
        GraphPattern::Project { inner, variables } => node(
            "project",
            vec![
                graph_pattern(inner),
                Tree::List(variables.iter().map(variable).collect()),
            ],
        ),
        GraphPattern::Distinct { inner } => boxed("distinct", &[inner]),
        GraphPattern::Reduced { inner } => boxed("reduced", &[inner]),
        GraphPattern::Slice {
            inner,
            start,
            length,
        } => node(
            "slice",
            vec![
                graph_pattern(inner),
                Tree::Int(*start as u64),
                length.map_or(Tree::None, |l| Tree::Int(l as u64)),
            ],
        ),
        GraphPattern::Group {
            inner,
            variables,
            aggregates,
        } => node(
            "group",
            vec![
                graph_pattern(inner),
                Tree::List(variables.iter().map(variable).collect()),
                Tree::List(
                    aggregates
                        .iter()
                        .map(|(v, a)| Tree::List(vec![variable(v), aggregate(a)]))
                        .collect(),
                ),
            ],
        ),
        GraphPattern::Service {
            name,
            inner,
            silent,
        } => node(
            "service",
            vec![
                named_node_pattern(name),
                graph_pattern(inner),
                Tree::Bool(*silent),
                // the pattern as SPARQL text, for the endpoint it is sent to
                s(&spargebra::Query::Select {
                    dataset: None,
                    pattern: (**inner).clone(),
                    base_iri: None,
                }
                .to_string()),
            ],
        ),
        #[allow(unreachable_patterns)]
        _ => node("unsupported", vec![s("LATERAL")]),
    }
}

fn aggregate(a: &AggregateExpression) -> Tree {
    match a {
        AggregateExpression::CountSolutions { distinct } => {
            node("count*", vec![Tree::Bool(*distinct)])
        }
        AggregateExpression::FunctionCall {
            name,
            expr,
            distinct,
        } => {
            let (function, separator) = match name {
                AggregateFunction::Count => (s("Count"), Tree::None),
                AggregateFunction::Sum => (s("Sum"), Tree::None),
                AggregateFunction::Avg => (s("Avg"), Tree::None),
                AggregateFunction::Min => (s("Min"), Tree::None),
                AggregateFunction::Max => (s("Max"), Tree::None),
                AggregateFunction::Sample => (s("Sample"), Tree::None),
                AggregateFunction::GroupConcat { separator } => (
                    s("GroupConcat"),
                    separator.as_ref().map_or(Tree::None, |v| s(v)),
                ),
                AggregateFunction::Custom(n) => (iri(n), Tree::None),
            };
            node(
                "aggregate",
                vec![function, Tree::Bool(*distinct), expression(expr), separator],
            )
        }
    }
}

fn property_path(p: &PropertyPathExpression) -> Tree {
    match p {
        PropertyPathExpression::NamedNode(n) => iri(n),
        PropertyPathExpression::Reverse(p) => node("reverse", vec![property_path(p)]),
        PropertyPathExpression::Sequence(a, b) => {
            node("sequence", vec![property_path(a), property_path(b)])
        }
        PropertyPathExpression::Alternative(a, b) => {
            node("alternative", vec![property_path(a), property_path(b)])
        }
        PropertyPathExpression::ZeroOrMore(p) => node("*", vec![property_path(p)]),
        PropertyPathExpression::OneOrMore(p) => node("+", vec![property_path(p)]),
        PropertyPathExpression::ZeroOrOne(p) => node("?", vec![property_path(p)]),
        PropertyPathExpression::NegatedPropertySet(set) => {
            node("negated", vec![Tree::List(set.iter().map(iri).collect())])
        }
    }
}

fn two(tag: &'static str, a: &Expression, b: &Expression) -> Tree {
    node(tag, vec![expression(a), expression(b)])
}

fn expression(e: &Expression) -> Tree {
    match e {
        Expression::NamedNode(n) => iri(n),
        Expression::Literal(l) => literal(l),
        Expression::Variable(v) => variable(v),
        Expression::Or(a, b) => two("||", a, b),
        Expression::And(a, b) => two("&&", a, b),
        Expression::Equal(a, b) => two("=", a, b),
        Expression::SameTerm(a, b) => two("sameTerm", a, b),
        Expression::Greater(a, b) => two(">", a, b),
        Expression::GreaterOrEqual(a, b) => two(">=", a, b),
        Expression::Less(a, b) => two("<", a, b),
        Expression::LessOrEqual(a, b) => two("<=", a, b),
        Expression::In(a, list) => node(
            "in",
            vec![
                expression(a),
                Tree::List(list.iter().map(expression).collect()),
            ],
        ),
        Expression::Add(a, b) => two("+", a, b),
        Expression::Subtract(a, b) => two("-", a, b),
        Expression::Multiply(a, b) => two("*", a, b),
        Expression::Divide(a, b) => two("/", a, b),
        Expression::UnaryPlus(a) => node("u+", vec![expression(a)]),
        Expression::UnaryMinus(a) => node("u-", vec![expression(a)]),
        Expression::Not(a) => node("!", vec![expression(a)]),
        Expression::Exists(p) => node("exists", vec![graph_pattern(p)]),
        Expression::Bound(v) => node("bound", vec![variable(v)]),
        Expression::If(a, b, c) => node("if", vec![expression(a), expression(b), expression(c)]),
        Expression::Coalesce(list) => node(
            "coalesce",
            vec![Tree::List(list.iter().map(expression).collect())],
        ),
        Expression::FunctionCall(f, args) => node(
            "call",
            vec![
                function(f),
                Tree::List(args.iter().map(expression).collect()),
            ],
        ),
    }
}

/// A builtin by its SPARQL keyword (upper case, as rdflib names them), a custom function by IRI.
fn function(f: &Function) -> Tree {
    let name = match f {
        Function::Str => "STR",
        Function::Lang => "LANG",
        Function::LangMatches => "LANGMATCHES",
        Function::Datatype => "DATATYPE",
        Function::Iri => "IRI",
        Function::BNode => "BNODE",
        Function::Rand => "RAND",
        Function::Abs => "ABS",
        Function::Ceil => "CEIL",
        Function::Floor => "FLOOR",
        Function::Round => "ROUND",
        Function::Concat => "CONCAT",
        Function::SubStr => "SUBSTR",
        Function::StrLen => "STRLEN",
        Function::Replace => "REPLACE",
        Function::UCase => "UCASE",
        Function::LCase => "LCASE",
        Function::EncodeForUri => "ENCODE_FOR_URI",
        Function::Contains => "CONTAINS",
        Function::StrStarts => "STRSTARTS",
        Function::StrEnds => "STRENDS",
        Function::StrBefore => "STRBEFORE",
        Function::StrAfter => "STRAFTER",
        Function::Year => "YEAR",
        Function::Month => "MONTH",
        Function::Day => "DAY",
        Function::Hours => "HOURS",
        Function::Minutes => "MINUTES",
        Function::Seconds => "SECONDS",
        Function::Timezone => "TIMEZONE",
        Function::Tz => "TZ",
        Function::Now => "NOW",
        Function::Uuid => "UUID",
        Function::StrUuid => "STRUUID",
        Function::Md5 => "MD5",
        Function::Sha1 => "SHA1",
        Function::Sha256 => "SHA256",
        Function::Sha384 => "SHA384",
        Function::Sha512 => "SHA512",
        Function::StrLang => "STRLANG",
        Function::StrDt => "STRDT",
        Function::IsIri => "isIRI",
        Function::IsBlank => "isBLANK",
        Function::IsLiteral => "isLITERAL",
        Function::IsNumeric => "isNUMERIC",
        Function::Regex => "REGEX",
        Function::Custom(n) => return iri(n),
        #[allow(unreachable_patterns)]
        _ => "unsupported",
    };
    s(name)
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_text_scan_skips_strings_comments_and_iris() {
        let scan = |t: &str| scan_text(t, 3, "100");
        // brackets inside strings, long strings, comments and IRIs do not count
        let t = r#"SELECT * { ?s ?p "({[" . ?s ?q '''(""")''' # ((((
            ?s <a(b> ?o }"#;
        let found = TextScan {
            deepest: 1,
            operators: 1,
            past: None,
        }; // the `*` of SELECT *
        assert_eq!(scan(t), found);
        // a close before its open goes below 0, as the reference did
        assert_eq!(scan(")(").deepest, 0);
        assert_eq!(scan("{{{{ }}}}").past, Some(Past::Depth(3)));
        assert_eq!(scan("a UNION b optional c != d || e").operators, 4);
        // a number after LIMIT (across a comment) past the largest taken
        let past = scan("LIMIT # n\n 0101").past;
        assert_eq!(past, Some(Past::Count("LIMIT".into(), "0101".into())));
        assert_eq!(scan("LIMIT 100 OFFSET ( 101").past, None);
        // an unterminated long string is read as an empty string, then a quote
        assert_eq!(scan(r#"""" ("#).deepest, 1);
    }

    use super::*;

    #[test]
    fn a_syntax_error_names_its_line_and_character_column() {
        // columns count characters ("é" is two bytes)
        let e = parse("SELECT * {\n ?s ?p \"é\" } LIMIT x", None).unwrap_err();
        assert_eq!((e.line, e.column), (2, 20), "{}", e.message);
        assert_eq!(e.message, "unexpected `x`");
        // only keywords failed there: the place is where the token began
        let e = parse("SELEC * {}", None).unwrap_err();
        assert_eq!(
            (e.line, e.column, e.message.as_str()),
            (1, 1, "unexpected `SELEC`")
        );
    }

    #[test]
    fn a_query_becomes_a_tree() {
        let q = parse("SELECT ?s WHERE { ?s <p> 1 } LIMIT 2", Some("http://x/")).unwrap();
        let Tree::Node("select", parts) = query(&q) else {
            panic!("not a select")
        };
        assert_eq!(parts[2], s("http://x/"));
        let Tree::Node("slice", slice) = &parts[1] else {
            panic!("no slice: {:?}", parts[1])
        };
        assert_eq!(slice[1], Tree::Int(0));
        assert_eq!(slice[2], Tree::Int(2));
    }

    #[test]
    fn deep_nesting_parses_on_a_thread_of_its_own() {
        let depth = 4096;
        let text = format!(
            "SELECT * WHERE {{ {} ?s ?p ?o {} }}",
            "{ ".repeat(depth),
            "} ".repeat(depth)
        );
        assert!(parse(&text, None).is_ok());
    }
}

/// What a pass over a query's text finds before any parser reads it
/// (`quanta.sparql.bounds.check`): the deepest nesting of brackets, the
/// operators (UNION, OPTIONAL, MINUS and the operator signs), and the first
/// limit passed, if any.
#[derive(Debug, PartialEq)]
pub struct TextScan {
    pub deepest: usize,
    pub operators: usize,
    pub past: Option<Past>,
}

#[derive(Debug, PartialEq)]
pub enum Past {
    /// brackets nest deeper than the limit at this character (not byte)
    Depth(usize),
    /// LIMIT or OFFSET (upper case) followed by a number past the largest taken
    Count(String, String),
}

/// The tokens of one pass, tried in this order at each position (the
/// reference's regular expression, `quanta.sparql.bounds` before it came
/// here, tried its alternatives so): what is skipped whole (a comment, a
/// string, an IRI), a bracket, a word, an operator; a character that starts
/// none is passed over.
#[derive(Clone, Copy, PartialEq)]
enum Token {
    Skip,
    Open,
    Close,
    Word,
    Op,
}

/// Python's `str.isspace` (what `\s` matched): Unicode white space and U+001C..U+001F.
fn is_space(c: char) -> bool {
    c.is_whitespace() || ('\u{1c}'..='\u{1f}').contains(&c)
}

/// A character that may go on a word (and, but for `-`, start one).
fn in_word(c: char) -> bool {
    !is_space(c) && !"(){}[]<>\"'#,;=!&|+*/^".contains(c)
}

/// The token at `at` and where it ends, or None.
fn token(text: &[char], at: usize) -> Option<(Token, usize)> {
    let c = text[at];
    let rest = &text[at..];
    let skip = match c {
        '#' => Some(at + rest.iter().position(|&c| c == '\n').unwrap_or(rest.len())),
        '"' | '\'' if rest.starts_with(&[c, c, c]) => {
            long_string(text, at + 3, c).or_else(|| string(text, at + 1, c))
        }
        '"' | '\'' => string(text, at + 1, c),
        '<' => rest[1..]
            .iter()
            .position(|&c| "<>\"{}|^`\\".contains(c) || c <= ' ')
            .filter(|&n| rest[1 + n] == '>')
            .map(|n| at + n + 2),
        _ => None,
    };
    if let Some(end) = skip {
        return Some((Token::Skip, end));
    }
    match c {
        '(' | '{' | '[' => return Some((Token::Open, at + 1)),
        ')' | '}' | ']' => return Some((Token::Close, at + 1)),
        _ => {}
    }
    if in_word(c) && c != '-' {
        let n = rest[1..]
            .iter()
            .position(|&c| !in_word(c))
            .unwrap_or(rest.len() - 1);
        return Some((Token::Word, at + 1 + n));
    }
    let two = rest.get(1).is_some_and(|&d| {
        matches!(
            (c, d),
            ('|', '|') | ('&', '&') | ('!', '=') | ('<', '=') | ('>', '=')
        )
    });
    if two {
        return Some((Token::Op, at + 2));
    }
    "-+*/=<>!".contains(c).then_some((Token::Op, at + 1))
}

/// A string in `quote`s from `at` (after the opening one) to its closing one: no
/// line break, `\` escaping any other character. Where it ends, or None.
fn string(text: &[char], mut at: usize, quote: char) -> Option<usize> {
    while let Some(&c) = text.get(at) {
        match c {
            '\n' => return None,
            '\\' if text.get(at + 1).is_some_and(|&d| d != '\n') => at += 2,
            '\\' => return None,
            c if c == quote => return Some(at + 1),
            _ => at += 1,
        }
    }
    None
}

/// A long string (three `quote`s) from `at` (after the opening ones) to the first three
/// closing ones: `\` escapes any character but a line break. Where it ends, or None.
fn long_string(text: &[char], mut at: usize, quote: char) -> Option<usize> {
    while let Some(&c) = text.get(at) {
        match c {
            '\\' if text.get(at + 1).is_some_and(|&d| d != '\n') => at += 2,
            '\\' => return None,
            c if c == quote && text[at..].starts_with(&[quote, quote, quote]) => {
                return Some(at + 3)
            }
            _ => at += 1,
        }
    }
    None
}

/// One pass over `text` (see `TextScan`); stops at the first limit passed.
pub fn scan_text(text: &str, max_depth: usize, max_integer: &str) -> TextScan {
    let chars: Vec<char> = text.chars().collect();
    // a close before its open takes the depth below 0, as in the reference
    let (mut depth, mut deepest, mut operators) = (0i64, 0usize, 0usize);
    let mut counted: Option<String> = None; // LIMIT or OFFSET just read: its number comes next
    let mut at = 0;
    while at < chars.len() {
        let Some((kind, end)) = token(&chars, at) else {
            at += 1;
            continue;
        };
        let start = std::mem::replace(&mut at, end);
        match kind {
            Token::Open => {
                depth += 1;
                if depth > deepest as i64 {
                    deepest = depth as usize;
                    if deepest > max_depth {
                        return TextScan {
                            deepest,
                            operators,
                            past: Some(Past::Depth(start)),
                        };
                    }
                }
            }
            Token::Close => depth -= 1,
            Token::Word => {
                let word: String = chars[start..end].iter().collect();
                let upper = word.to_uppercase();
                if matches!(upper.as_str(), "UNION" | "OPTIONAL" | "MINUS") {
                    operators += 1;
                }
                if let Some(which) = &counted {
                    if is_decimal(&word) && exceeds(&word, max_integer) {
                        let past = Some(Past::Count(which.clone(), word));
                        return TextScan {
                            deepest,
                            operators,
                            past,
                        };
                    }
                }
                counted = matches!(upper.as_str(), "LIMIT" | "OFFSET").then_some(upper);
                continue;
            }
            Token::Op => operators += 1,
            Token::Skip => continue,
        }
        counted = None;
    }
    TextScan {
        deepest,
        operators,
        past: None,
    }
}

/// `str.isdigit()` of a word, for the ASCII digits a number after LIMIT is made of.
fn is_decimal(word: &str) -> bool {
    !word.is_empty() && word.chars().all(|c| c.is_ascii_digit())
}

/// Whether the digits `word` stand for a number above `max` (digits too).
fn exceeds(word: &str, max: &str) -> bool {
    let word = word.trim_start_matches('0');
    word.len() > max.len() || (word.len() == max.len() && word > max)
}

#[cfg(feature = "python")]
pub mod py {
    //! `quanta.native._core.parse_query`: the parse runs without the GIL.

    use super::{SyntaxError, Tree};
    use pyo3::create_exception;
    use pyo3::exceptions::PyValueError;
    use pyo3::prelude::*;
    use pyo3::types::{PyList, PyTuple};
    use pyo3::IntoPyObjectExt;

    create_exception!(
        _core,
        SparqlSyntaxError,
        PyValueError,
        "A query that is not SPARQL 1.1: args are (message, line, column)."
    );

    /// Adds `parse_query`, `scan_query` and `SparqlSyntaxError` to the module.
    pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
        m.add_function(wrap_pyfunction!(parse_query, m)?)?;
        m.add_function(wrap_pyfunction!(scan_query, m)?)?;
        m.add("SparqlSyntaxError", m.py().get_type::<SparqlSyntaxError>())
    }

    /// `(deepest, operators, past)` of `text` (see `TextScan`): `past` None,
    /// `("depth", character)` or `("count", "LIMIT" or "OFFSET", number)`.
    #[pyfunction]
    fn scan_query<'py>(
        py: Python<'py>,
        text: &str,
        max_depth: usize,
        max_integer: u64,
    ) -> PyResult<(usize, usize, Bound<'py, PyAny>)> {
        let scan = super::scan_text(text, max_depth, &max_integer.to_string());
        let past = match scan.past {
            None => py.None().into_bound(py),
            Some(super::Past::Depth(at)) => ("depth", at).into_bound_py_any(py)?,
            Some(super::Past::Count(which, word)) => {
                ("count", which, word).into_bound_py_any(py)?
            }
        };
        Ok((scan.deepest, scan.operators, past))
    }

    /// The query's algebra as tagged tuples (see `Tree`).
    #[pyfunction]
    #[pyo3(signature = (text, base=None))]
    fn parse_query<'py>(
        py: Python<'py>,
        text: &str,
        base: Option<&str>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let parsed = py.detach(|| super::parse(text, base).map(|q| super::query(&q)));
        match parsed {
            Ok(tree) => to_python(py, &tree),
            Err(SyntaxError {
                message,
                line,
                column,
            }) => Err(SparqlSyntaxError::new_err((message, line, column))),
        }
    }

    fn to_python<'py>(py: Python<'py>, tree: &Tree) -> PyResult<Bound<'py, PyAny>> {
        Ok(match tree {
            Tree::None => py.None().into_bound(py),
            Tree::Bool(b) => b.into_bound_py_any(py)?,
            Tree::Int(i) => i.into_bound_py_any(py)?,
            Tree::Str(s) => s.into_bound_py_any(py)?,
            Tree::Node(tag, parts) => {
                let mut items = Vec::with_capacity(parts.len() + 1);
                items.push(tag.into_bound_py_any(py)?);
                for part in parts {
                    items.push(to_python(py, part)?);
                }
                PyTuple::new(py, items)?.into_any()
            }
            Tree::List(items) => {
                let items = items
                    .iter()
                    .map(|i| to_python(py, i))
                    .collect::<PyResult<Vec<_>>>()?;
                PyList::new(py, items)?.into_any()
            }
        })
    }
}
