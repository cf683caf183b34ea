//! ORDER BY's order over terms, as the client orders them
//! (`quanta.client.ops.order.term_key`): unbound < blank nodes < IRIs <
//! literals; among literals, numbers (NaN first, then by value) before
//! strings (by lexical form, then language tag). A term this side cannot
//! place exactly as the client does (a decimal, a float, an integer past
//! 2^53, a boolean, a date, another datatype) has no key here: a top-k hands
//! its row on, and the client orders it. A plan run whole also places floats
//! and dates (`exec::place`), after strings, by their instant (booleans, which
//! the client puts between them, have no key there either).

use std::cmp::Ordering;

/// One term's place in the order.
#[derive(Clone, Debug)]
pub enum OrderKey {
    Unbound,
    Blank(Box<str>),
    Iri(Box<str>),
    NaN,
    /// an integer within 2^53 or a double (never NaN): compared by value
    Number(f64),
    Text(Box<str>, Box<str>),
    /// an xsd:dateTime's or xsd:date's instant in nanoseconds (`temporal::Instant::nanos`)
    Time(i128),
}

impl OrderKey {
    fn class(&self) -> u8 {
        match self {
            OrderKey::Unbound => 0,
            OrderKey::Blank(_) => 1,
            OrderKey::Iri(_) => 2,
            OrderKey::NaN => 3,
            OrderKey::Number(_) => 4,
            OrderKey::Text(..) => 5,
            OrderKey::Time(_) => 6,
        }
    }

    /// An integer's key: exact as a double within 2^53 (the client compares
    /// integers and doubles exactly; past it a double could not tell them apart).
    pub fn integer(i: i64) -> Option<OrderKey> {
        (i.unsigned_abs() <= 1 << 53).then_some(OrderKey::Number(i as f64))
    }

    pub fn double(x: f64) -> OrderKey {
        if x.is_nan() {
            OrderKey::NaN
        } else {
            OrderKey::Number(x)
        }
    }
}

/// Keys of the same terms compare equal; ties are the client's to break
/// (SPARQL leaves them to the implementation).
pub fn compare(a: &OrderKey, b: &OrderKey) -> Ordering {
    match (a, b) {
        (OrderKey::Blank(x), OrderKey::Blank(y)) | (OrderKey::Iri(x), OrderKey::Iri(y)) => x.cmp(y),
        (OrderKey::Number(x), OrderKey::Number(y)) => x.partial_cmp(y).unwrap_or(Ordering::Equal),
        (OrderKey::Text(x, l), OrderKey::Text(y, m)) => x.cmp(y).then_with(|| l.cmp(m)),
        (OrderKey::Time(x), OrderKey::Time(y)) => x.cmp(y),
        _ => a.class().cmp(&b.class()),
    }
}

/// Rows' keys in ORDER BY's order: component by component, `descending`
/// ones reversed.
pub fn compare_rows(a: &[OrderKey], b: &[OrderKey], descending: &[bool]) -> Ordering {
    for ((x, y), &desc) in a.iter().zip(b).zip(descending) {
        let order = compare(x, y);
        if order != Ordering::Equal {
            return if desc { order.reverse() } else { order };
        }
    }
    Ordering::Equal
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classes_then_values() {
        let ordered = [
            OrderKey::Unbound,
            OrderKey::Blank("b".into()),
            OrderKey::Iri("http://a".into()),
            OrderKey::Iri("http://b".into()),
            OrderKey::NaN,
            OrderKey::double(f64::NEG_INFINITY),
            OrderKey::integer(-3).unwrap(),
            OrderKey::double(2.5),
            OrderKey::integer(3).unwrap(),
            OrderKey::Text("a".into(), "".into()),
            OrderKey::Text("a".into(), "en".into()),
            OrderKey::Text("é".into(), "".into()),
            OrderKey::Time(-1),
            OrderKey::Time(0),
        ];
        for (i, a) in ordered.iter().enumerate() {
            for (j, b) in ordered.iter().enumerate() {
                assert_eq!(compare(a, b), i.cmp(&j), "{a:?} against {b:?}");
            }
        }
        assert!(OrderKey::integer(1 << 54).is_none());
        assert!(compare(&OrderKey::integer(2).unwrap(), &OrderKey::double(2.0)).is_eq());
    }

    #[test]
    fn descending_components_reverse() {
        let (a, b) = (
            [OrderKey::integer(1).unwrap(), OrderKey::Iri("x".into())],
            [OrderKey::integer(1).unwrap(), OrderKey::Iri("y".into())],
        );
        assert!(compare_rows(&a, &b, &[false, false]).is_lt());
        assert!(compare_rows(&a, &b, &[false, true]).is_gt());
    }
}
