//! Native execution of a whole physical plan: scans, index loop and merge
//! joins, UNION, VALUES, OFFSET/LIMIT, FILTER, BIND and a quantum's tally
//! (partial DISTINCT and COUNT, which the client merges), as a tree of
//! operators (`Node`) pulled a row at a time, as the SaGe papers' preemptable
//! iterators: a step counted per scan opened and per index entry or VALUES
//! row read, a suspension possible between any two steps, and the state saved
//! as a flat list of integers in pre-order (see `save`): the layout of saved
//! plans, format 1 (docs/saved-plan-format.md), which the Python operators
//! used to write, so plans they saved resume here.
//! Rows are handed back in batches. FILTERs compare ids (`Atom`) and
//! evaluate conditions natively (`crate::expr`); what those cannot decide,
//! and expressions with no native evaluation, go to the caller's reference
//! evaluator (`Budget::undecided`).

use crate::expr::{Eval, Expr, Kind, Table, Term, Terms, Val};
use crate::order::{compare, compare_rows, OrderKey};
use crate::store::{Cursor, Store, Triple};
use std::cmp::Ordering;
use std::collections::{HashMap, HashSet};
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// Distinct rows a tally holds before it hands them on (it then goes on
/// tallying afresh): bounds its memory, and the rows a saved plan may carry.
pub const TALLY_ROWS: usize = 16_384;
/// Groups or rows one operator of a plan run whole (an exact `Tally`, a
/// `HashJoin`) may hold: past it the plan stops `unfinished`, and the client
/// runs the query its own way. It bounds the operator's memory (tens of MB)
/// and what its saved state carries (a few MB).
pub const WHOLE_ROWS: usize = 1 << 18;
/// Rows an exact `TopK` may hold (else as `WHOLE_ROWS`): it also bounds the one
/// step no clock reading interrupts, sorting an ORDER BY's rows.
pub const SORTED_ROWS: usize = 1 << 16;
/// Ids a top-k remembers as beaten (its memory's bound; past it, they are decoded again).
const BEATEN_IDS: usize = 1 << 16;
/// Nodes a property path's closure may reach from one start (its memory's and its saved
/// state's bound: past it, the run fails with `Budget::error`).
pub const CLOSURE_NODES: usize = 1 << 21;

/// Why `run` stopped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Status {
    /// the batch is full: call again for more
    Full,
    /// no more rows
    Done,
    /// the quantum expired (before reading the next entry)
    Expired,
}

/// The quantum's budget of steps and how its clock is checked; and who
/// decides what a step cannot (`undecided(step, row)`: the reference
/// evaluator: a condition's truth as 0 or 1, a BIND's term id, 0 for none;
/// an error stops the run as an expiry does, for the caller to raise).
pub struct Budget<'a> {
    pub steps: i64,
    pub check: &'a mut dyn FnMut(&mut i64) -> Result<(), Expired>,
    pub undecided: &'a mut Undecided<'a>,
    /// why an operator stopped the run (a bound passed), for the caller to raise
    pub error: Option<String>,
}

/// Decides a row (`&[i64]`) for step number `usize`.
pub type Undecided<'a> = dyn FnMut(usize, &[i64]) -> Result<i64, Expired> + 'a;

#[derive(Debug)]
pub struct Expired;

impl Budget<'_> {
    #[inline]
    fn step(&mut self) -> Result<(), Expired> {
        self.steps -= 1;
        if self.steps < 0 {
            (self.check)(&mut self.steps)?;
        }
        Ok(())
    }
}

/// The clock of a real quantum: `CHECK_EVERY` steps between two readings, of the
/// wall clock, or of the thread's CPU time (`cpu`: a query a worker runs whole).
pub struct Clock {
    /// on `now`'s scale; None: never
    deadline: Option<Duration>,
    cpu: bool,
    pub every: i64,
    pub overshoot: f64,
}

impl Clock {
    /// A clock whose quantum ends `seconds` from now (never if not finite).
    pub fn new(seconds: Option<f64>, cpu: bool, every: i64) -> Clock {
        let deadline = seconds
            .filter(|s| s.is_finite())
            .map(|s| now(cpu) + Duration::from_secs_f64(s.max(0.0)));
        Clock {
            deadline,
            cpu,
            every,
            overshoot: 0.0,
        }
    }

    pub fn check(&mut self, steps: &mut i64) -> Result<(), Expired> {
        if let Some(deadline) = self.deadline {
            let now = now(self.cpu);
            if now >= deadline {
                self.overshoot = (now - deadline).as_secs_f64();
                *steps = 0;
                return Err(Expired);
            }
        }
        *steps = self.every;
        Ok(())
    }
}

/// The wall time since this process's first reading, or the calling thread's CPU time
/// (Python's `time.thread_time`, the same clock).
fn now(cpu: bool) -> Duration {
    static ORIGIN: OnceLock<Instant> = OnceLock::new();
    if !cpu {
        return ORIGIN.get_or_init(Instant::now).elapsed();
    }
    let mut time = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime only writes the timespec it is given.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut time) };
    Duration::new(time.tv_sec as u64, time.tv_nsec as u32)
}

/// A triple pattern: each position `id << 1` (constant) or `slot << 1 | 1`.
#[derive(Clone, Copy, Debug)]
pub struct Pattern(pub [i64; 3]);

impl Pattern {
    /// How many triples the pattern has under `mu` (its bound variables substituted).
    fn count(&self, store: &Store, mu: &[i64]) -> u64 {
        let [s, p, o] = self.resolve(mu, &mut Vec::new());
        store.estimate(s, p, o)
    }

    /// The pattern under `mu`, and (slot, position) of its free variables.
    fn resolve(&self, mu: &[i64], free: &mut Vec<(usize, usize)>) -> [i64; 3] {
        free.clear();
        let mut values = [0i64; 3];
        for (position, &code) in self.0.iter().enumerate() {
            if code & 1 == 1 {
                let slot = (code >> 1) as usize;
                values[position] = mu[slot];
                if mu[slot] == 0 {
                    free.push((slot, position));
                }
            } else {
                values[position] = code >> 1;
            }
        }
        values
    }
}

/// Whether a pattern position's code is a variable `mu` leaves unbound.
#[inline]
fn free(code: i64, mu: &[i64]) -> bool {
    code & 1 == 1 && mu[(code >> 1) as usize] == 0
}

/// `mu` extended with the free variables' values from `t`; false when a
/// variable repeated in the pattern gets two values.
#[inline]
fn bind(mu: &[i64], t: &Triple, free: &[(usize, usize)], out: &mut [i64]) -> bool {
    out.copy_from_slice(mu);
    for &(slot, position) in free {
        let v = t[position] as i64;
        if out[slot] == 0 {
            out[slot] = v;
        } else if out[slot] != v {
            return false; // a variable repeated in the pattern, two values
        }
    }
    true
}

/// Checks of one pattern `?x p o` (p and o constants) for one `?x` after another, the right
/// side of an index join: after a quarter as many lookups as the data has subjects for `p o`
/// (a ski rental: at most about twice the cheaper way's cost), those subjects are read once
/// into a sorted list, when there are at most `MEMBER_SET`, and each check is a binary search
/// in it (in cache) instead of a lookup of `?x`'s triples scattered over the file (BSBM's
/// business-intelligence Q1 checks a reviewer's country for every review). Not state: a resumed
/// plan counts its lookups again.
enum Members {
    /// lookups made, and when to read the list instead
    Counting {
        lookups: u64,
        until: u64,
    },
    List(Vec<u64>),
    /// not such a pattern, or too many subjects
    Never,
}

const MEMBER_SET: u64 = 1 << 17;
const MEMBER_LOOKUPS_MIN: u64 = 32;

impl Members {
    fn new(pattern: &Pattern) -> Self {
        let [s, p, o] = pattern.0;
        match s & 1 == 1 && p & 1 == 0 && o & 1 == 0 {
            true => Members::Counting {
                lookups: 0,
                until: 0, // set at the first check, from the data
            },
            false => Members::Never,
        }
    }

    /// Whether `(s, p, o)` is in the data, when the list answers (None: look it up).
    fn check(&mut self, store: &Store, s: i64, p: i64, o: i64) -> Option<bool> {
        if s == 0 {
            return None; // ?x unbound: a scan, not a check
        }
        match self {
            Members::List(subjects) => Some(subjects.binary_search(&(s as u64)).is_ok()),
            Members::Never => None,
            Members::Counting { lookups, until } => {
                if *until == 0 {
                    let n = store.estimate(0, p, o);
                    if n > MEMBER_SET {
                        *self = Members::Never;
                        return None;
                    }
                    *until = (n / 4).max(MEMBER_LOOKUPS_MIN);
                }
                *lookups += 1;
                if *lookups < *until {
                    return None;
                }
                let mut cursor = store.search(0, p, o, 0);
                let mut subjects = Vec::new();
                while let Some(t) = store.next(&mut cursor) {
                    subjects.push(t[0]);
                }
                subjects.sort_unstable();
                subjects.dedup();
                *self = Members::List(subjects);
                self.check(store, s, p, o)
            }
        }
    }
}

struct ScanRt {
    pattern: Pattern,
    /// the global ids `[start, end)` the object may take, when the planner
    /// knows them (a FILTER's range over the dictionary's order): with subject
    /// and object free, the scan reads only those objects' triples, object
    /// after object (`Store::search_objects`)
    objects: Option<(i64, i64)>,
    offset: u64,
    opened: bool,
    cursor: Cursor,
    free: Vec<(usize, usize)>,
    members: Members,
}

impl ScanRt {
    fn new(pattern: Pattern, objects: Option<(i64, i64)>) -> Self {
        ScanRt {
            members: Members::new(&pattern),
            pattern,
            objects,
            offset: 0,
            opened: false,
            cursor: Cursor::Empty,
            free: Vec::new(),
        }
    }

    /// The object range the scan reads under `mu`, if it reads one.
    fn range(&self, mu: &[i64]) -> Option<(i64, i64)> {
        let [s, _, o] = self.pattern.0;
        self.objects.filter(|_| free(s, mu) && free(o, mu))
    }

    /// How many entries the scan reads under `mu`.
    fn count(&self, store: &Store, mu: &[i64]) -> u64 {
        match self.range(mu) {
            Some((start, end)) => {
                let [_, p, _] = self.pattern.resolve(mu, &mut Vec::new());
                store.object_range_count(start, end, p).unwrap_or(u64::MAX)
            }
            None => self.pattern.count(store, mu),
        }
    }

    fn next(
        &mut self,
        store: &Store,
        budget: &mut Budget,
        mu: &[i64],
        out: &mut [i64],
    ) -> Result<bool, Expired> {
        if !self.opened {
            budget.step()?; // opening a scan is a step too
            let [s, p, o] = self.pattern.resolve(mu, &mut self.free);
            self.cursor = match self.range(mu) {
                Some((start, end)) => store.search_objects(start, end, p, self.offset),
                None => match self.members.check(store, s, p, o) {
                    Some(true) if self.offset == 0 => Cursor::One([s as u64, p as u64, o as u64]),
                    Some(_) => Cursor::Empty,
                    None => store.search(s, p, o, self.offset),
                },
            };
            self.opened = true;
        }
        loop {
            let Some(t) = store.next(&mut self.cursor) else {
                return Ok(false);
            };
            if budget.step().is_err() {
                self.opened = false; // this entry stays unread: reopen at the offset
                return Err(Expired);
            }
            self.offset += 1;
            if bind(mu, &t, &self.free, out) {
                return Ok(true);
            }
        }
    }
}

/// VALUES: a step per row read (taken before
/// the row, so a suspension leaves it unread); a row joins the input mapping
/// when each cell is UNDEF, unbound there, or equal to it.
struct ValuesRt {
    slots: Vec<usize>,
    cells: Vec<i64>,
    rows: u64,
    position: u64,
}

impl ValuesRt {
    fn next(&mut self, budget: &mut Budget, mu: &[i64], out: &mut [i64]) -> Result<bool, Expired> {
        let width = self.slots.len();
        'rows: while self.position < self.rows {
            budget.step()?;
            let start = self.position as usize * width;
            self.position += 1;
            out.copy_from_slice(mu);
            for (&slot, &value) in self.slots.iter().zip(&self.cells[start..start + width]) {
                if value != 0 {
                    if out[slot] != 0 && out[slot] != value {
                        continue 'rows;
                    }
                    out[slot] = value;
                }
            }
            return Ok(true);
        }
        Ok(false)
    }
}

/// One side of a filter's comparison: a variable slot or a term id.
#[derive(Clone, Copy, Debug)]
pub enum Operand {
    Slot(usize),
    Term(i64),
}

impl Operand {
    /// Its term id in `row` (a slot's value, 0 when unbound), or the term's.
    #[inline]
    fn value(self, row: &[i64]) -> i64 {
        match self {
            Operand::Slot(slot) => row[slot],
            Operand::Term(id) => id,
        }
    }
}

/// `a` and `b` are (`same`) or are not the same term; false when either is
/// unbound (an error in SPARQL, which a FILTER treats as false). The Python
/// side (`split_condition`) only hands over comparisons that ids decide exactly.
#[derive(Clone, Copy, Debug)]
pub struct Atom {
    pub same: bool,
    pub a: Operand,
    pub b: Operand,
}

impl Atom {
    #[inline]
    fn holds(&self, row: &[i64]) -> bool {
        let (a, b) = (self.a.value(row), self.b.value(row));
        a != 0 && b != 0 && ((a == b) == self.same)
    }
}

/// A plan as the Python side describes it (`NativeHdt.pipeline`).
pub enum Spec {
    /// a pattern, and the range of global ids its object may take, if known
    Scan(Pattern, Option<(i64, i64)>),
    /// the slots the rows bind, their cells (`slots.len()` ids a row, 0:
    /// UNDEF), and how many rows
    Values {
        slots: Vec<usize>,
        cells: Vec<i64>,
        rows: u64,
    },
    Union(Vec<Spec>),
    /// an index loop join: `right` runs under each left mapping; or, with a
    /// mode and the left slots `right` runs under, OPTIONAL, (NOT) EXISTS or MINUS
    Join(Box<Spec>, Box<Spec>, Option<(Mode, Vec<usize>)>),
    /// a merge join of a left input sorted on `key` with a scan of `?key p o`
    Merge {
        left: Box<Spec>,
        right: Pattern,
        key: usize,
    },
    Slice {
        input: Box<Spec>,
        offset: u64,
        limit: Option<u64>,
    },
    /// rows must satisfy every atom, then the condition: `Some(expression)`
    /// evaluated natively, `None` decided by the reference for every row
    Filter {
        input: Box<Spec>,
        atoms: Vec<Atom>,
        condition: Option<Option<Expr>>,
    },
    /// BIND(value AS slot), `None`: the reference computes every row's
    Extend {
        input: Box<Spec>,
        slot: usize,
        value: Option<Expr>,
    },
    /// the input's distinct rows over `slots`, each once per quantum, with
    /// how many times it came in `count` (if some), and per row the MIN, MAX
    /// or SAMPLE of other slots (`reduced`: source slot, target slot, which)
    /// `exact`: the whole input's rows, each once, or none (`Whole`): a plan run whole
    Tally {
        input: Box<Spec>,
        slots: Vec<usize>,
        count: Option<usize>,
        reduced: Vec<(usize, usize, Reduce)>,
        exact: bool,
    },
    /// the input's first `k` rows of each quantum in the order of `keys`
    /// (slot, descending); `exact`: of the whole input, or none (`Whole`)
    TopK {
        input: Box<Spec>,
        keys: Vec<(usize, bool)>,
        k: usize,
        exact: bool,
    },
    /// SPARQL's join of two inputs: `right` read whole into a table by the
    /// values of `keys` (slots both sides bind in every row), then each row of
    /// `left` with each compatible row of it. Only in a plan run whole.
    HashJoin {
        left: Box<Spec>,
        right: Box<Spec>,
        keys: Vec<usize>,
    },
    /// `subject path{*,+,?} object` (a slot or a term each, one of them bound
    /// when it runs): `forward` binds slot `to` under `from` (one step of the
    /// path), `backward` the same step planned to bind `from` under `to`
    Closure {
        forward: Box<Spec>,
        backward: Box<Spec>,
        from: usize,
        to: usize,
        subject: Operand,
        object: Operand,
        repeat: Repeat,
    },
}

/// A value a tally keeps per row of its key slots: the least or greatest in
/// ORDER BY's order, the first, or the exact sum of numbers (`Exact`); an exact
/// tally's sums are final (rounded once to their type), and so are its averages
/// (the sum over the count, of a value every row binds).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reduce {
    Min,
    Max,
    Sample,
    Sum,
    Avg,
}

/// The numeric type of a tally's sum: SPARQL's promotion of its addends' types.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord)]
pub enum Summed {
    #[default]
    Integer,
    Float,
    Double,
}

/// Datatypes of a partial sum of floats or doubles handed to the client: its exact value
/// in decimal notation, which the client adds exactly and rounds once
/// (`quanta.sparql.expr_values.EXACT_SUMS`): no sum depends on where quanta end.
pub const EXACT_FLOAT_SUM: &str = "urn:quanta:sum:float";
pub const EXACT_DOUBLE_SUM: &str = "urn:quanta:sum:double";

/// An exact sum of integers, floats and doubles, `m * 2^e`, reduced (`m` odd, or 0 with
/// `e` 0); None when it would need more than 128 bits, or its decimal form would.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Exact {
    m: i128,
    e: i32,
}

impl Exact {
    /// An addend: an integer, or a finite float or double (its exact value), and its type.
    fn addend(term: &Term) -> Option<(Exact, Summed)> {
        if let Some(i) = term.integer() {
            return Some((Exact { m: i as i128, e: 0 }.reduced(), Summed::Integer));
        }
        let (x, double) = term.floating()?;
        let summed = if double {
            Summed::Double
        } else {
            Summed::Float
        };
        Some((Exact::of_double(x)?, summed))
    }

    fn of_double(x: f64) -> Option<Exact> {
        if !x.is_finite() {
            return None;
        }
        let bits = x.to_bits();
        let exponent = ((bits >> 52) & 0x7ff) as i32;
        let fraction = (bits & ((1 << 52) - 1)) as i128;
        let (m, e) = if exponent == 0 {
            (fraction, -1074)
        } else {
            (fraction | 1 << 52, exponent - 1075)
        };
        Some(
            Exact {
                m: if bits >> 63 == 1 { -m } else { m },
                e,
            }
            .reduced(),
        )
    }

    fn reduced(self) -> Exact {
        if self.m == 0 {
            return Exact::default();
        }
        let zeros = self.m.trailing_zeros();
        Exact {
            m: self.m >> zeros,
            e: self.e + zeros as i32,
        }
    }

    fn add(self, other: Exact) -> Option<Exact> {
        let (high, low) = if self.e >= other.e {
            (self, other)
        } else {
            (other, self)
        };
        let shift = u32::try_from(high.e - low.e).ok().filter(|&s| s < 126)?;
        let m = high.m.checked_mul(1i128 << shift)?.checked_add(low.m)?;
        Some(Exact { m, e: low.e }.reduced())
    }

    /// The value as an integer within 64 bits, if it is one.
    fn integer(self) -> Option<i64> {
        let shift = u32::try_from(self.e).ok().filter(|&s| s < 64)?;
        i64::try_from(self.m.checked_mul(1i128 << shift)?).ok()
    }

    /// The magnitude's decimal digits as an integer and how many of them are fractional:
    /// `m * 2^e` for `e >= 0`, else `m * 5^k` over `10^k` for `e = -k`.
    fn digits(self) -> Option<(u128, u32)> {
        let magnitude = self.m.unsigned_abs();
        if self.e >= 0 {
            let shift = u32::try_from(self.e).ok().filter(|&s| s < 128)?;
            return Some((magnitude.checked_mul(1u128.checked_shl(shift)?)?, 0));
        }
        let k = self.e.unsigned_abs();
        Some((magnitude.checked_mul(5u128.checked_pow(k)?)?, k))
    }

    /// The value in decimal notation, every digit exact.
    fn decimal(self) -> Option<String> {
        let sign = if self.m < 0 { "-" } else { "" };
        let (digits, k) = self.digits()?;
        let k = k as usize;
        let digits = format!("{digits:0>width$}", width = k + 1);
        let (whole, fraction) = digits.split_at(digits.len() - k);
        Some(format!(
            "{sign}{whole}.{}",
            if k == 0 { "0" } else { fraction }
        ))
    }

    /// The value over `n` rounded once to the nearest float or double (ties to even), as
    /// the client rounds a sum or an average (`expr_values.read_sum`); None past the
    /// type's normal range (the client's to write).
    fn rounded(self, summed: Summed, n: u64) -> Option<Val> {
        // the type's significand bits and its normal range
        let (bits, lowest, highest) = match summed {
            Summed::Integer => return None,
            Summed::Float => (24, f32::MIN_POSITIVE as f64, f32::MAX as f64),
            Summed::Double => (53, f64::MIN_POSITIVE, f64::MAX),
        };
        let (mantissa, exponent) = if self.m == 0 || n == 0 {
            (0, 0)
        } else {
            // the quotient with at least 63 bits, and whether a remainder was left
            let shift = self.m.unsigned_abs().leading_zeros();
            let scaled = self.m.unsigned_abs() << shift;
            let (q, sticky) = (scaled / n as u128, !scaled.is_multiple_of(n as u128));
            let drop = 128 - q.leading_zeros() - bits;
            let (mut mantissa, rest, half) =
                (q >> drop, q & ((1 << drop) - 1), 1u128 << (drop - 1));
            if rest > half || (rest == half && (sticky || mantissa & 1 == 1)) {
                mantissa += 1;
            }
            (mantissa, self.e - shift as i32 + drop as i32)
        };
        // in two halves: each power of two, and each product, stays in the normal range
        let x = mantissa as f64 * 2f64.powi(exponent / 2) * 2f64.powi(exponent - exponent / 2);
        let x = if self.m < 0 { -x } else { x };
        if x != 0.0 && !(lowest..=highest).contains(&x.abs()) {
            return None;
        }
        Some(if summed == Summed::Float {
            Val::Float(x)
        } else {
            Val::Double(x)
        })
    }

    /// The sum as the term the client reads: an xsd:integer, or its exact decimal value
    /// typed as a partial sum of floats or doubles.
    fn value(self, summed: Summed) -> Option<Val> {
        let datatype = match summed {
            Summed::Integer => return self.integer().map(Val::Int),
            Summed::Float => EXACT_FLOAT_SUM,
            Summed::Double => EXACT_DOUBLE_SUM,
        };
        Some(Val::Typed(
            self.decimal()?.into(),
            datatype.into(),
            Kind::Other,
        ))
    }
}

/// A closure's operator: `*`, `+` or `?`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Repeat {
    ZeroOrMore,
    OneOrMore,
    ZeroOrOne,
}

/// One operator of the running tree. Its fields are its state (what a saved
/// plan holds) and what a running generator would hold (an open
/// scan's cursor, a merge join's group), which `restart` drops.
enum Node {
    Scan(ScanRt),
    Values(ValuesRt),
    Union {
        branches: Vec<Node>,
        active: usize,
    },
    Join(Box<IndexJoin>),
    Merge(Box<MergeJoin>),
    Slice(Box<Slice>),
    Filter {
        input: Box<Node>,
        atoms: Vec<Atom>,
        /// (number for the reference, native expression if any)
        condition: Option<(usize, Option<Expr>)>,
    },
    Extend {
        input: Box<Node>,
        slot: usize,
        number: usize,
        value: Option<Expr>,
    },
    Tally(Box<Tally>),
    TopK(Box<TopK>),
    Closure(Box<Closure>),
    Hash(Box<HashJoin>),
}

/// A property path's closure from its bound end (the subject's, else the
/// object's, backward), breadth first over one step of the path: each node
/// reached comes once (SPARQL's closures have set semantics), bound to the
/// other end, or, when that end is bound too, the mapping once if it is
/// reached. A zero-length path reaches the start itself: a constant always, a
/// node of the graph (a subject or object id) otherwise. State: the phase,
/// the nodes reached in the order found (the start, which the input mapping
/// gives again, left out), how many of them were expanded, whether one is
/// being expanded, whether the start was reached again (`+`), then the
/// step's state.
struct Closure {
    forward: Node,
    backward: Node,
    from: usize,
    to: usize,
    subject: Operand,
    object: Operand,
    repeat: Repeat,
    phase: Phase,
    /// the start, then the nodes reached in the order found (the queue: from `head` on)
    order: Vec<i64>,
    head: usize,
    expanding: bool,
    start_reached: bool,
    // rebuilt from the state and the input mapping
    seen: HashSet<i64, BuildHasherDefault<IdHasher>>,
    /// `order` is missing its start (a loaded state): the input mapping gives it
    restored: bool,
    under: Vec<i64>,
    row: Vec<i64>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    Start = 0,
    ZeroLength = 1,
    Expand = 2,
    Done = 3,
}

impl Closure {
    /// Whether the run goes from the subject (else from the object, backward), and its start.
    fn start(&self, mu: &[i64]) -> (bool, i64) {
        match self.subject.value(mu) {
            0 => (false, self.object.value(mu)),
            s => (true, s),
        }
    }

    /// `out`: `mu` with the other end bound to `node`; false when that end is
    /// bound to another node (or when it is already handed on: then done).
    fn reached(&mut self, node: i64, forward: bool, mu: &[i64], out: &mut [i64]) -> bool {
        let end = if forward { self.object } else { self.subject };
        let target = end.value(mu);
        if target != 0 {
            if target != node {
                return false;
            }
            self.phase = Phase::Done; // the mapping once
            out.copy_from_slice(mu);
            return true;
        }
        out.copy_from_slice(mu);
        if let Operand::Slot(slot) = end {
            out[slot] = node;
        }
        true
    }

    fn next(&mut self, cx: &mut Cx, mu: &[i64], out: &mut [i64]) -> Result<bool, Expired> {
        let (forward, start) = self.start(mu);
        if self.restored {
            self.order.insert(0, start);
            self.seen = self.order.iter().copied().collect();
            self.restored = false;
            if self.expanding {
                self.aim(forward);
            }
        }
        loop {
            match self.phase {
                Phase::Start => {
                    cx.budget.step()?;
                    self.order.clear();
                    self.seen.clear();
                    self.head = 0;
                    self.expanding = false;
                    self.start_reached = false;
                    if start == 0 {
                        self.phase = Phase::Done; // the planner binds an end first
                        continue;
                    }
                    self.order.push(start);
                    self.seen.insert(start);
                    self.phase = match self.repeat {
                        Repeat::OneOrMore => Phase::Expand,
                        _ => Phase::ZeroLength,
                    };
                }
                Phase::ZeroLength => {
                    self.phase = Phase::Expand;
                    let own = if forward { self.subject } else { self.object };
                    let in_graph = 0 < start && start as u64 <= cx.store.nb_terms;
                    if (matches!(own, Operand::Term(_)) || in_graph)
                        && self.reached(start, forward, mu, out)
                    {
                        return Ok(true);
                    }
                }
                Phase::Expand => {
                    if let Some(found) = self.expand(cx, forward, mu, out)? {
                        return Ok(found);
                    }
                }
                Phase::Done => return Ok(false),
            }
        }
    }

    /// The next node the step reaches, bound into `out` (Some(true)); Some(false) when none is left.
    fn expand(
        &mut self,
        cx: &mut Cx,
        forward: bool,
        mu: &[i64],
        out: &mut [i64],
    ) -> Result<Option<bool>, Expired> {
        let far = if forward { self.to } else { self.from };
        loop {
            if !self.expanding {
                let depth_one = self.repeat == Repeat::ZeroOrOne && self.head >= 1;
                if self.order[0] < 0 || self.head >= self.order.len() || depth_one {
                    self.phase = Phase::Done; // (a term outside the data has no step)
                    return Ok(Some(false));
                }
                self.aim(forward);
                let step = if forward {
                    &mut self.forward
                } else {
                    &mut self.backward
                };
                step.reset();
                self.expanding = true;
            }
            loop {
                let step = if forward {
                    &mut self.forward
                } else {
                    &mut self.backward
                };
                if !step.next(cx, &self.under, &mut self.row)? {
                    break;
                }
                let node = self.row[far];
                let new = if node == self.order[0] {
                    let again = !self.start_reached;
                    self.start_reached = true;
                    again && self.repeat == Repeat::OneOrMore // `*` and `?` gave it already
                } else if self.seen.insert(node) {
                    if self.order.len() >= CLOSURE_NODES {
                        cx.budget.error = Some(format!(
                            "a property path reaches more than {CLOSURE_NODES} nodes from one start"
                        ));
                        return Err(Expired);
                    }
                    self.order.push(node);
                    true
                } else {
                    false
                };
                if new && self.reached(node, forward, mu, out) {
                    return Ok(Some(true));
                }
            }
            self.expanding = false;
            self.head += 1;
        }
    }

    /// The step's input: the node expanded, at the step's near end.
    fn aim(&mut self, forward: bool) {
        self.under.fill(0);
        self.under[if forward { self.from } else { self.to }] = self.order[self.head];
    }

    fn reset(&mut self) {
        self.phase = Phase::Start;
        self.restored = false;
        self.expanding = false;
        self.forward.reset();
        self.backward.reset();
    }

    fn step(&self, mu: &[i64]) -> &Node {
        if self.start(mu).0 {
            &self.forward
        } else {
            &self.backward
        }
    }

    fn save(&self, out: &mut Vec<i64>, foreign: &mut Vec<usize>) {
        out.push(self.phase as i64);
        out.push(self.head as i64);
        out.push(self.expanding as i64);
        out.push(self.start_reached as i64);
        let found = if self.restored {
            &self.order[..]
        } else {
            self.order.get(1..).unwrap_or(&[])
        };
        out.push(found.len() as i64); // only the data's nodes: never a foreign id
        out.extend_from_slice(found);
        self.forward.save(out, foreign);
        self.backward.save(out, foreign);
    }

    fn load(&mut self, r: &mut Reader) -> Result<(), String> {
        self.phase = match r.count(Some(3))? {
            0 => Phase::Start,
            1 => Phase::ZeroLength,
            2 => Phase::Expand,
            _ => Phase::Done,
        };
        let n_head = r.count(None)?;
        self.expanding = r.count(Some(1))? == 1;
        self.start_reached = r.count(Some(1))? == 1;
        let n = r.count(Some(CLOSURE_NODES as u64))?;
        if n_head > n + 1 {
            return Err("closure: more nodes expanded than reached".into());
        }
        self.head = n_head as usize;
        self.order.clear();
        for _ in 0..n {
            let v = r.next()?;
            if v <= 0 {
                return Err("closure: a reached node outside the data".into());
            }
            self.order.push(v);
        }
        self.restored = self.phase != Phase::Start;
        self.forward.load(r)?;
        self.backward.load(r)
    }
}

/// The rows a partial-answer operator (`TopK`, `Tally`) hands on before it
/// reads its input again, and whether its input's quantum ended while it
/// gathered them: hand them on, then expire. The rows not handed on yet are
/// state (saved, loaded); `expired` is not (a new quantum starts afresh).
struct HandOn<T> {
    rows: Vec<T>,
    next: usize,
    expired: bool,
}

impl<T> HandOn<T> {
    fn new() -> Self {
        HandOn {
            rows: Vec::new(),
            next: 0,
            expired: false,
        }
    }

    /// The next row to hand on; None once every one was (and the quantum
    /// goes on), Expired once every one was and it had ended.
    fn next(&mut self) -> Result<Option<&T>, Expired> {
        if self.next < self.rows.len() {
            self.next += 1;
            return Ok(Some(&self.rows[self.next - 1]));
        }
        self.rows.clear();
        self.next = 0;
        if std::mem::take(&mut self.expired) {
            return Err(Expired);
        }
        Ok(None)
    }

    /// The rows still to hand on (what a saved plan holds).
    fn left(&self) -> &[T] {
        &self.rows[self.next..]
    }

    /// Hand on `rows` from the start (a loaded state), nothing pending.
    fn load(&mut self, rows: Vec<T>) {
        self.rows = rows;
        self.next = 0;
        self.expired = false;
    }
}

/// A quantum's ORDER BY ... LIMIT k: the input's rows ordered by `keys`,
/// of which it keeps the first `k` while the quantum lasts and hands them on
/// when it ends (or the input does), for the client to merge with the other
/// quanta's (partial answers, like `Tally`). A row whose key this side cannot
/// order exactly as the client does (`crate::order`) is handed on at once.
/// Only at a plan's root. State: the rows still to hand on (`[n]`, then n
/// mappings), then the input's.
struct TopK {
    input: Node,
    slots: Vec<usize>,
    descending: Vec<bool>,
    k: usize,
    /// the whole input's first k rows or none (a plan run whole); `done` once handed on
    exact: bool,
    done: bool,
    /// the rows kept, in order: (key, row)
    kept: Vec<(Vec<OrderKey>, Vec<i64>)>,
    /// ids of the first key found after the last kept row's, while `kept` is
    /// full: the last row only moves up, so their rows never enter (a
    /// repeated id is not decoded again)
    beaten: HashSet<i64, BuildHasherDefault<IdHasher>>,
    out: HandOn<Vec<i64>>,
    row: Vec<i64>,
    /// the kept rows' keys are to be placed again (a loaded state holds the rows alone)
    rekey: bool,
}

impl TopK {
    fn next(&mut self, cx: &mut Cx, mu: &[i64], out: &mut [i64]) -> Result<bool, Expired> {
        if std::mem::take(&mut self.rekey) {
            for i in 0..self.kept.len() {
                self.kept[i].0 = match self.key_of(cx, &self.kept[i].1) {
                    Some(key) => key,
                    None => return Err(unfinished(cx, "a value the workers cannot order")),
                };
            }
        }
        loop {
            if let Some(row) = self.out.next()? {
                out.copy_from_slice(row);
                return Ok(true);
            }
            if self.done {
                return Ok(false);
            }
            match self.input.next(cx, mu, &mut self.row) {
                Ok(true) if self.exact => match self.key(cx) {
                    Some(key) => self.keep_all(cx, key)?,
                    None => return Err(unfinished(cx, "a value the workers cannot order")),
                },
                Ok(true) if self.beaten.contains(&self.row[self.slots[0]]) => {}
                Ok(true) => match self.key(cx) {
                    Some(key) => self.keep(key),
                    None => {
                        out.copy_from_slice(&self.row); // the client orders it
                        return Ok(true);
                    }
                },
                Err(Expired) if self.exact || self.kept.is_empty() => return Err(Expired),
                Ok(false) if self.kept.is_empty() && !self.exact => return Ok(false),
                end => {
                    self.out.expired = end.is_err();
                    if self.exact {
                        self.first_k();
                        self.done = true;
                    }
                    self.out
                        .rows
                        .extend(self.kept.drain(..).map(|(_, row)| row));
                    self.beaten.clear();
                }
            }
        }
    }

    /// The row's key, None when a term has no exact place here (`place`).
    fn key(&self, cx: &mut Cx) -> Option<Vec<OrderKey>> {
        self.key_of(cx, &self.row)
    }

    fn key_of(&self, cx: &mut Cx, row: &[i64]) -> Option<Vec<OrderKey>> {
        self.slots
            .iter()
            .map(|&slot| match row[slot] {
                0 => Some(OrderKey::Unbound),
                id => place(&*cx.terms.get(cx.store, cx.table, id).ok()?, self.exact),
            })
            .collect()
    }

    /// An exact top-k keeps every row, sorted down to the first k each time it holds 2k.
    fn keep_all(&mut self, cx: &mut Cx, key: Vec<OrderKey>) -> Result<(), Expired> {
        self.kept.push((key, self.row.clone()));
        if self.kept.len() >= self.k.saturating_mul(2) {
            self.first_k();
        }
        if self.kept.len() > SORTED_ROWS {
            return Err(unfinished(
                cx,
                "more rows to order than a plan run whole holds",
            ));
        }
        Ok(())
    }

    /// The kept rows sorted (ties in the order they came) and cut to k.
    fn first_k(&mut self) {
        let desc = &self.descending;
        self.kept.sort_by(|(a, _), (b, _)| compare_rows(a, b, desc));
        self.kept.truncate(self.k);
    }

    /// Keep the row if it is among the first k (after the kept rows it ties with).
    fn keep(&mut self, key: Vec<OrderKey>) {
        let desc = &self.descending;
        if self.kept.len() == self.k {
            match self.kept.last() {
                Some((last, _)) if compare_rows(&key, last, desc).is_lt() => {
                    self.kept.pop();
                }
                Some((last, _)) => {
                    if compare_rows(&key[..1], &last[..1], desc).is_gt()
                        && self.beaten.len() < BEATEN_IDS
                    {
                        self.beaten.insert(self.row[self.slots[0]]);
                    }
                    return;
                }
                None => return,
            }
        }
        let at = self
            .kept
            .partition_point(|(kept, _)| compare_rows(kept, &key, desc).is_le());
        self.kept.insert(at, (key, self.row.clone()));
    }
}

/// A term's place in ORDER BY's order where this side places it as the client does
/// (`OrderKey`), and, in a plan run whole (`exact`: no client orders its rows after
/// it), floats too, by their value (SPARQL's promotion to a double), and dates and
/// dateTimes by their instant (where the client's order puts a tie, SPARQL leaves
/// it to the implementation).
fn place(term: &Term, exact: bool) -> Option<OrderKey> {
    term.order_key().or_else(|| {
        exact
            .then(|| {
                term.floating()
                    .map(|(x, _)| OrderKey::double(x))
                    .or_else(|| term.instant().map(|i| OrderKey::Time(i.nanos())))
            })
            .flatten()
    })
}

/// Stops a plan run whole that cannot finish on the worker (`why`, which the
/// caller raises): the client then runs the query its own way.
fn unfinished(cx: &mut Cx, why: &str) -> Expired {
    cx.budget.error = Some(format!("unfinished: {why}"));
    Expired
}

/// FxHash's mixing (rustc's): term ids are integers of the data, which a
/// query chooses among but cannot forge, so the hash needs no random key.
/// With SipHash (and a key allocated per row) a tally of watdiv-10m's 10.9 M
/// triples took 455 ms by predicate and 614 ms by subject, 338 and 404 here.
#[derive(Default)]
struct IdHasher(u64);

impl Hasher for IdHasher {
    fn write(&mut self, bytes: &[u8]) {
        for chunk in bytes.chunks(8) {
            let mut word = [0u8; 8];
            word[..chunk.len()].copy_from_slice(chunk);
            self.mix(u64::from_le_bytes(word));
        }
    }

    fn write_usize(&mut self, n: usize) {
        self.mix(n as u64);
    }

    fn finish(&self) -> u64 {
        self.0
    }
}

impl IdHasher {
    #[inline]
    fn mix(&mut self, word: u64) {
        self.0 = (self.0.rotate_left(5) ^ word).wrapping_mul(0x517c_c1b7_2722_0a95);
    }
}

/// A quantum's DISTINCT, or GROUP BY of variables with COUNT(*): the input's
/// rows projected on `slots`, tallied in a table until the input ends, its
/// quantum does or the table holds `TALLY_ROWS`; then handed on, each
/// distinct row once with its count (the quantum's share of a partial
/// aggregate, as *Processing SPARQL Aggregate Queries with Web Preemption*
/// ships them: the client adds the counts of a row that comes again). Only
/// at a plan's root. State: the rows still to hand on (`[n]`, then n times
/// the slots' values and the count), then the input's.
struct Tally {
    input: Node,
    slots: Vec<usize>,
    count: Option<usize>,
    reduced: Vec<(usize, usize, Reduce)>,
    /// the whole input's groups or none (a plan run whole); `done` once handed on
    exact: bool,
    done: bool,
    /// each distinct row: its place in first-seen order, its count, its reduced values
    table: HashMap<Vec<i64>, Tallied, BuildHasherDefault<IdHasher>>,
    key: Vec<i64>,
    /// rows to hand on: (key, count, reduced values)
    out: HandOn<(Vec<i64>, u64, Vec<i64>)>,
    row: Vec<i64>,
    /// the current row's reduced values to keep (`reduce`; None: the kept one stays)
    pending: Vec<Option<Kept>>,
    /// the kept MIN and MAX terms are to be placed again (a loaded state holds their ids alone)
    rekey: bool,
}

struct Tallied {
    place: usize,
    count: u64,
    /// per reduced slot, what is kept
    kept: Vec<Kept>,
}

/// What a tally keeps of a row for one reduced slot.
#[derive(Clone, Debug)]
enum Kept {
    /// MIN, MAX, SAMPLE: the term (0: none yet) and its place in ORDER BY's order
    Term(i64, Option<OrderKey>),
    /// SUM: the exact total and its type (minted as a term when the row is handed on)
    Sum(Exact, Summed),
}

impl Kept {
    fn start(how: Reduce) -> Kept {
        match how {
            Reduce::Sum | Reduce::Avg => Kept::Sum(Exact::default(), Summed::Integer),
            _ => Kept::Term(0, None),
        }
    }
}

impl Tally {
    fn next(&mut self, cx: &mut Cx, mu: &[i64], out: &mut [i64]) -> Result<bool, Expired> {
        loop {
            if let Some((key, n, reduced)) = self.out.next()? {
                out.copy_from_slice(mu);
                for (&slot, &v) in self.slots.iter().zip(key) {
                    out[slot] = v;
                }
                for (&(_, target, _), &v) in self.reduced.iter().zip(reduced) {
                    out[target] = v;
                }
                if let Some(slot) = self.count {
                    // 0 (unbound) only without a term table, which a plan always has
                    out[slot] = cx
                        .terms
                        .mint_value(cx.store, cx.table, &Val::Int(*n as i64))
                        .unwrap_or(0);
                }
                return Ok(true);
            }
            if !self.fill(cx, mu)? {
                return Ok(false);
            }
        }
    }

    /// Tally input rows until the table is full, the input ends or expires;
    /// false when the input is done and nothing is left to hand on.
    fn fill(&mut self, cx: &mut Cx, mu: &[i64]) -> Result<bool, Expired> {
        if self.done {
            return Ok(false);
        }
        if std::mem::take(&mut self.rekey) {
            self.place_kept(cx)?;
        }
        if self.count_only(cx, mu)? {
            self.done = self.exact;
            return Ok(true);
        }
        if let Some(p) = self.by_subject(mu) {
            return self.fill_by_subject(cx, p);
        }
        let mut done = false;
        // rows handed on as they are count too: what a saved plan holds stays bounded
        while self.table.len() + self.out.rows.len() < self.bound() {
            match self.input.next(cx, mu, &mut self.row) {
                Ok(true) => {
                    self.key.clear();
                    self.key.extend(self.slots.iter().map(|&s| self.row[s]));
                    if !self.reduced.is_empty() && !self.reduce(cx) {
                        if self.exact {
                            return Err(unfinished(cx, "a value the workers cannot order or add"));
                        }
                        // a value this side cannot place as the client does: the row goes on as it is
                        let values = self.reduced.iter().map(|&(s, _, _)| self.row[s]).collect();
                        self.out.rows.push((self.key.clone(), 1, values));
                        continue;
                    }
                    if let Some(entry) = self.table.get_mut(self.key.as_slice()) {
                        entry.count += 1;
                    } else {
                        let group = self.group(1);
                        self.table.insert(self.key.clone(), group);
                    }
                    if !self.reduced.is_empty() {
                        let entry = self
                            .table
                            .get_mut(self.key.as_slice())
                            .expect("just counted");
                        for (kept, new) in entry.kept.iter_mut().zip(self.pending.drain(..)) {
                            if let Some(new) = new {
                                *kept = new;
                            }
                        }
                    }
                }
                Ok(false) => {
                    done = true;
                    break;
                }
                Err(Expired) => {
                    if self.table.is_empty() || self.exact {
                        return Err(Expired);
                    }
                    self.out.expired = true;
                    break;
                }
            }
        }
        self.finish(cx, done)
    }

    /// The places of the kept MIN and MAX terms, which a loaded table lacks.
    fn place_kept(&mut self, cx: &mut Cx) -> Result<(), Expired> {
        let exact = self.exact;
        for entry in self.table.values_mut() {
            for kept in &mut entry.kept {
                if let Kept::Term(id, key @ None) = kept {
                    if *id != 0 {
                        let term = cx.terms.get(cx.store, cx.table, *id).ok();
                        *key = term.and_then(|t| place(&t, exact));
                        if key.is_none() {
                            return Err(unfinished(cx, "a value the workers cannot order"));
                        }
                    }
                }
            }
        }
        Ok(())
    }

    /// The table of an exact tally (`done`, `[n]`, then per group in first-seen order its
    /// key, count and kept values: a term's id, a sum's `[mantissa high, low, exponent,
    /// type]`), as saved plans hold it.
    fn save_table(&self, out: &mut Vec<i64>, foreign: &mut Vec<usize>) {
        out.push(self.done as i64);
        out.push(self.table.len() as i64);
        let mut groups: Vec<_> = self.table.iter().collect();
        groups.sort_unstable_by_key(|(_, entry)| entry.place);
        for (key, entry) in groups {
            key.iter().for_each(|&v| save_id(v, out, foreign));
            out.push(entry.count as i64);
            for kept in &entry.kept {
                match kept {
                    Kept::Term(id, _) => save_id(*id, out, foreign),
                    Kept::Sum(total, summed) => {
                        out.push((total.m >> 64) as i64);
                        out.push(total.m as i64);
                        out.push(total.e as i64);
                        out.push(*summed as i64);
                    }
                }
            }
        }
    }

    fn load_table(&mut self, r: &mut Reader) -> Result<(), String> {
        self.done = r.count(Some(1))? == 1;
        let n = r.count(Some(WHOLE_ROWS as u64))?;
        self.table.clear();
        for place in 0..n as usize {
            let key = (0..self.slots.len())
                .map(|_| r.id())
                .collect::<Result<Vec<_>, _>>()?;
            let count = r.count(None)?;
            let mut kept = Vec::with_capacity(self.reduced.len());
            for &(_, _, how) in &self.reduced {
                kept.push(match how {
                    Reduce::Sum | Reduce::Avg => {
                        let (high, low) = (r.next()?, r.next()?);
                        let e = i32::try_from(r.next()?).map_err(|e| e.to_string())?;
                        let summed = match r.count(Some(2))? {
                            0 => Summed::Integer,
                            1 => Summed::Float,
                            _ => Summed::Double,
                        };
                        let m = ((high as i128) << 64) | (low as u64 as i128);
                        Kept::Sum(Exact { m, e }, summed)
                    }
                    _ => Kept::Term(r.id()?, None),
                });
            }
            if self
                .table
                .insert(key, Tallied { place, count, kept })
                .is_some()
            {
                return Err("tally: a group saved twice".into());
            }
        }
        self.rekey = true;
        Ok(())
    }

    /// A new group of the table, next in first-seen order, counted `count` times,
    /// nothing reduced yet.
    fn group(&self, count: u64) -> Tallied {
        let kept = self
            .reduced
            .iter()
            .map(|&(_, _, how)| Kept::start(how))
            .collect();
        Tallied {
            place: self.table.len(),
            count,
            kept,
        }
    }

    /// The most rows it holds: a quantum's, or a whole plan's.
    fn bound(&self) -> usize {
        if self.exact {
            WHOLE_ROWS
        } else {
            TALLY_ROWS
        }
    }

    /// Hand the table on (`done`: the input ended); an exact tally only once its input
    /// ended, with the one group of no keys even when empty (COUNT(*) is then 0).
    fn finish(&mut self, cx: &mut Cx, done: bool) -> Result<bool, Expired> {
        if self.exact {
            if !done {
                return Err(unfinished(cx, "more groups than a plan run whole holds"));
            }
            self.done = true;
            if self.slots.is_empty() && self.table.is_empty() {
                let group = self.group(0);
                self.table.insert(Vec::new(), group);
            }
        }
        self.hand_on(cx)?;
        Ok(!(done && self.out.rows.is_empty()))
    }

    /// The table's rows to hand on, first seen first, the reduced values as terms (an
    /// exact tally's sums and averages final, or the plan unfinished).
    fn hand_on(&mut self, cx: &mut Cx) -> Result<(), Expired> {
        let mut rows: Vec<_> = self.table.drain().collect();
        rows.sort_unstable_by_key(|(_, entry)| entry.place); // first seen, first handed on
        for (key, entry) in rows {
            let mut kept = Vec::with_capacity(entry.kept.len());
            for (value, &(_, _, how)) in entry.kept.into_iter().zip(&self.reduced) {
                kept.push(match value {
                    Kept::Sum(total, summed) if self.exact => {
                        let value = match (how, summed) {
                            (Reduce::Avg, _) if entry.count == 0 => Some(Val::Int(0)),
                            (Reduce::Avg, Summed::Integer) => None, // a decimal: the client's
                            (Reduce::Avg, _) => total.rounded(summed, entry.count),
                            (_, Summed::Integer) => total.integer().map(Val::Int),
                            _ => total.rounded(summed, 1),
                        };
                        let id =
                            value.and_then(|v| cx.terms.mint_value(cx.store, cx.table, &v).ok());
                        id.ok_or_else(|| {
                            unfinished(cx, "a sum or an average the workers cannot write")
                        })?
                    }
                    // 0 (unbound) only without a term table, which a plan always has
                    Kept::Sum(total, summed) => total
                        .value(summed)
                        .and_then(|v| cx.terms.mint_value(cx.store, cx.table, &v).ok())
                        .unwrap_or(0),
                    Kept::Term(id, _) => id,
                });
            }
            self.out.rows.push((key, entry.count, kept));
        }
        Ok(())
    }

    /// The predicate of a tally by the subject of its one pattern `?s p ?o`
    /// (COUNT(*) or DISTINCT, nothing reduced, both variables free): counted
    /// from the predicate index, a step per subject (`fill_by_subject`).
    fn by_subject(&self, mu: &[i64]) -> Option<i64> {
        let Node::Scan(scan) = &self.input else {
            return None;
        };
        if scan.objects.is_some() {
            return None;
        }
        let [s, p, o] = scan.pattern.0;
        let keyed = self.slots.len() == 1 && self.slots[0] == (s >> 1) as usize;
        (keyed && self.reduced.is_empty() && free(s, mu) && free(o, mu) && s != o && p & 1 == 0)
            .then_some(p >> 1)
    }

    /// `fill` for a tally by subject: each subject of predicate `p` from the
    /// scan's offset on with its number of triples, the offset moved past them.
    fn fill_by_subject(&mut self, cx: &mut Cx, p: i64) -> Result<bool, Expired> {
        let bound = self.bound();
        let Node::Scan(scan) = &mut self.input else {
            return Ok(false);
        };
        let mut done = false;
        while self.table.len() + self.out.rows.len() < bound {
            let Some((subject, n)) = cx.store.predicate_subject_run(p, scan.offset) else {
                done = true;
                break;
            };
            if cx.budget.step().is_err() {
                if self.table.is_empty() || self.exact {
                    return Err(Expired);
                }
                self.out.expired = true;
                break;
            }
            scan.offset += n;
            let place = self.table.len();
            self.table
                .entry(vec![subject as i64])
                .or_insert(Tallied {
                    place,
                    count: 0,
                    kept: Vec::new(),
                })
                .count += n;
        }
        self.finish(cx, done)
    }

    /// Decide the row's reduced values against its row's kept ones (`pending`: Some(new
    /// value and its key) to keep, None to leave); false when one cannot be placed here as
    /// the client orders it (a decimal, a date..., or a tie of a computed term): the row is
    /// then not tallied.
    fn reduce(&mut self, cx: &mut Cx) -> bool {
        self.pending.clear();
        let entry = self.table.get(self.key.as_slice());
        for (i, &(source, _, how)) in self.reduced.iter().enumerate() {
            let id = self.row[source];
            let start = Kept::start(how);
            let (kept, kept_key) = match entry.map_or(&start, |e| &e.kept[i]) {
                &Kept::Sum(total, summed) => {
                    // a number is added exactly (while its total can be written); anything else is the client's
                    let term = (id != 0).then(|| cx.terms.get(cx.store, cx.table, id).ok());
                    let exact = self.exact; // a final sum is rounded, a partial one written whole
                    let added =
                        term.flatten()
                            .and_then(|t| Exact::addend(&t))
                            .and_then(|(v, kind)| {
                                let summed = kind.max(summed);
                                let total = total.add(v)?;
                                let written = if summed == Summed::Integer {
                                    total.integer().is_some()
                                } else {
                                    exact || total.digits().is_some()
                                };
                                written.then_some(Kept::Sum(total, summed))
                            });
                    match added {
                        Some(kept) => self.pending.push(Some(kept)),
                        None => return false,
                    }
                    continue;
                }
                Kept::Term(kept, key) => (*kept, key.as_ref()),
            };
            if id == 0 || id == kept || (how == Reduce::Sample && kept != 0) {
                self.pending.push(None); // unbound is no value; the same term changes nothing
                continue;
            }
            if how == Reduce::Sample {
                self.pending.push(Some(Kept::Term(id, None)));
                continue;
            }
            let Some(key) = cx
                .terms
                .get(cx.store, cx.table, id)
                .ok()
                .and_then(|t| place(&t, self.exact))
            else {
                return false;
            };
            let order = match kept_key {
                None => {
                    self.pending.push(Some(Kept::Term(id, Some(key)))); // nothing kept yet: this one
                    continue;
                }
                Some(k) => match compare(&key, k) {
                    // the same place, other terms: the client's last resort, their strings
                    Ordering::Equal if id > 0 && kept > 0 => {
                        let (mut a, mut b) = (Vec::new(), Vec::new());
                        if cx.store.extract_into(id as u64, &mut a).is_err()
                            || cx.store.extract_into(kept as u64, &mut b).is_err()
                        {
                            return false;
                        }
                        a.cmp(&b)
                    }
                    Ordering::Equal => return false,
                    order => order,
                },
            };
            let better = if how == Reduce::Min {
                order.is_lt()
            } else {
                order.is_gt()
            };
            self.pending
                .push(better.then_some(Kept::Term(id, Some(key))));
        }
        true
    }

    /// COUNT(*) of one triple pattern, no key: HDT's exact count of what is
    /// left of the scan, in one step (a pattern with a repeated variable
    /// counts triples that do not match it: scanned).
    fn count_only(&mut self, cx: &mut Cx, mu: &[i64]) -> Result<bool, Expired> {
        let Node::Scan(scan) = &mut self.input else {
            return Ok(false);
        };
        let mut codes: Vec<i64> = scan
            .pattern
            .0
            .iter()
            .copied()
            .filter(|c| c & 1 == 1)
            .collect();
        let variables = codes.len();
        codes.sort_unstable();
        codes.dedup();
        if !self.slots.is_empty()
            || !self.reduced.is_empty()
            || codes.len() != variables
            || scan.objects.is_some()
        {
            return Ok(false);
        }
        let total = scan.pattern.count(cx.store, mu);
        if scan.offset >= total {
            return Ok(false); // read whole: done
        }
        cx.budget.step()?;
        let left = total - scan.offset;
        scan.offset = total;
        self.out.rows.push((Vec::new(), left, Vec::new()));
        Ok(true)
    }
}

/// SPARQL's join of two inputs, for a plan run whole: `right` read whole into
/// a table by its values of `keys` (rows missing one of them apart, tried
/// with every left row), then each row of `left` with each compatible row of
/// it (every slot both bind equal). A step per pair tried. State: the right rows
/// read, the left row being joined and how far (`save`), then the inputs' states.
struct HashJoin {
    left: Node,
    right: Node,
    keys: Vec<usize>,
    built: bool,
    /// the right rows, and those of each key's values (indices into `rows`)
    rows: Vec<Vec<i64>>,
    table: HashMap<Vec<i64>, Vec<usize>, BuildHasherDefault<IdHasher>>,
    loose: Vec<usize>,
    /// the left row being joined, and the right rows it is tried with
    current: Vec<i64>,
    tried: Vec<usize>,
    at: usize,
    row: Vec<i64>,
    key: Vec<i64>,
}

impl HashJoin {
    fn next(&mut self, cx: &mut Cx, mu: &[i64], out: &mut [i64]) -> Result<bool, Expired> {
        if !self.built {
            self.build(cx, mu)?;
        }
        loop {
            while let Some(&index) = self.tried.get(self.at) {
                cx.budget.step()?; // before moving on: a quantum that ends here tries the row again
                self.at += 1;
                let right = &self.rows[index];
                let compatible = self
                    .current
                    .iter()
                    .zip(right)
                    .all(|(&a, &b)| a == 0 || b == 0 || a == b);
                if compatible {
                    for ((cell, &a), &b) in out.iter_mut().zip(&self.current).zip(right) {
                        *cell = if a != 0 { a } else { b };
                    }
                    return Ok(true);
                }
            }
            if !self.left.next(cx, mu, &mut self.current)? {
                return Ok(false);
            }
            self.find_rows();
        }
    }

    /// The right rows the current left row is tried with, from the first.
    fn find_rows(&mut self) {
        self.key.clear();
        self.key.extend(self.keys.iter().map(|&s| self.current[s]));
        self.tried.clear();
        self.at = 0;
        if self.key.contains(&0) {
            self.tried.extend(0..self.rows.len()); // a key unbound: every row may fit
        } else {
            if let Some(found) = self.table.get(self.key.as_slice()) {
                self.tried.extend_from_slice(found);
            }
            self.tried.extend_from_slice(&self.loose);
        }
    }

    /// Add `row` to the table.
    fn index(&mut self, row: Vec<i64>) {
        let index = self.rows.len();
        self.key.clear();
        self.key.extend(self.keys.iter().map(|&s| row[s]));
        if self.key.contains(&0) {
            self.loose.push(index);
        } else {
            self.table.entry(self.key.clone()).or_default().push(index);
        }
        self.rows.push(row);
    }

    /// `[built, n, c, c slots]` and the n right rows read, each its values of those slots (the
    /// slots any row binds), then `[the left row being joined or -1, how many right rows it
    /// was tried with]`, then the left's and the right's states.
    fn save(&self, out: &mut Vec<i64>, foreign: &mut Vec<usize>) {
        out.push(self.built as i64);
        out.push(self.rows.len() as i64);
        let slots: Vec<usize> = (0..self.row.len())
            .filter(|&s| self.rows.iter().any(|row| row[s] != 0))
            .collect();
        out.push(slots.len() as i64);
        out.extend(slots.iter().map(|&s| s as i64));
        for row in &self.rows {
            slots.iter().for_each(|&s| save_id(row[s], out, foreign));
        }
        let joining = self.at < self.tried.len();
        save_mapping(joining, &self.current, out, foreign);
        out.push(if joining { self.at as i64 } else { 0 });
        self.left.save(out, foreign);
        self.right.save(out, foreign);
    }

    fn load(&mut self, r: &mut Reader) -> Result<(), String> {
        self.reset();
        self.built = r.count(Some(1))? == 1;
        let n = r.count(Some(WHOLE_ROWS as u64))?;
        let width = self.row.len();
        let c = r.count(Some(width as u64))? as usize;
        let mut slots = Vec::with_capacity(c);
        for _ in 0..c {
            let slot = r.count(Some(width as u64 - 1))? as usize;
            if slots.last().is_some_and(|&last| last >= slot) {
                return Err("hash join: slots out of order".into());
            }
            slots.push(slot);
        }
        for _ in 0..n {
            let mut row = vec![0; width];
            for &s in &slots {
                row[s] = r.id()?;
            }
            self.index(row);
        }
        if r.mapping(&mut self.current)? {
            self.find_rows();
        }
        self.at = r.count(Some(self.tried.len() as u64))? as usize;
        self.left.load(r)?;
        self.right.load(r)
    }

    /// Read `right` whole into the table.
    fn build(&mut self, cx: &mut Cx, mu: &[i64]) -> Result<(), Expired> {
        while self.right.next(cx, mu, &mut self.row)? {
            if self.rows.len() == WHOLE_ROWS {
                return Err(unfinished(
                    cx,
                    "a join side larger than a plan run whole holds",
                ));
            }
            self.index(self.row.clone());
        }
        self.built = true;
        Ok(())
    }

    fn reset(&mut self) {
        self.left.reset();
        self.right.reset();
        self.built = false;
        self.rows.clear();
        self.table.clear();
        self.loose.clear();
        self.tried.clear();
        self.at = 0;
    }
}

/// OFFSET/LIMIT. State: the rows still to skip, and to hand on (None: no limit).
struct Slice {
    input: Node,
    offset: u64,
    limit: Option<u64>,
    skip: u64,
    remaining: Option<u64>,
}

/// For each mapping of `left`, `right` under its bindings. State: the left
/// mapping `right` runs for, (with a `Restricted` right side) whether it is
/// decided, the left's state, the right's.
struct IndexJoin {
    left: Node,
    right: Node,
    current: Vec<i64>,
    has_current: bool,
    left_row: Vec<i64>,
    /// inside a run of `right` (a restarted join is, when it has a mapping)
    in_right: bool,
    restricted: Option<Restricted>,
}

/// What an index join whose right side runs under part of the left mapping gives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// OPTIONAL { right }: each left mapping with each compatible row of
    /// `right`, or alone when there is none
    Optional,
    /// FILTER EXISTS { right }: the left mappings `right` gives a row for
    Exists,
    /// FILTER NOT EXISTS { right }: the others
    NotExists,
    /// MINUS { right } (every slot it shares with the left side bound by each of
    /// its rows): as NOT EXISTS, but a left mapping that binds none of them stays
    Minus,
}

/// The right side of an OPTIONAL, (NOT) EXISTS or MINUS runs under the bindings
/// of some left slots only: the left side's own variables (OPTIONAL, EXISTS:
/// those of the pattern the filter is on), or the ones it shares (MINUS). An
/// OPTIONAL's rows are then checked against the other bindings (made by an
/// outer join): under those too, a row of `right` that disagrees with them
/// would hide the left mapping alone, which the left join gives before the
/// outer join drops the row that disagrees.
struct Restricted {
    mode: Mode,
    /// per slot, whether `right` runs under its binding
    left: Vec<bool>,
    /// the current left mapping restricted to those slots: what `right` runs under
    under: Vec<i64>,
    /// whether the current left mapping is decided: OPTIONAL, `right` gave a
    /// row for it (or it came alone); the others, it was handed on or dropped
    matched: bool,
}

impl Restricted {
    fn restrict(&mut self, current: &[i64]) {
        for ((under, &value), &own) in self.under.iter_mut().zip(current).zip(&self.left) {
            *under = if own { value } else { 0 };
        }
    }

    /// A row of `right` with the other bindings of `current` added; false when it
    /// disagrees with one.
    fn complete(&self, current: &[i64], out: &mut [i64]) -> bool {
        for ((cell, &value), &own) in out.iter_mut().zip(current).zip(&self.left) {
            if own || value == 0 {
                continue;
            }
            if *cell == 0 {
                *cell = value;
            } else if *cell != value {
                return false;
            }
        }
        true
    }
}

/// Joins a left input sorted on `key` with a scan of `?key p o`, sorted on
/// the subject too, reading each input once; the right scan's offset marks
/// the start of the current key group, which is buffered. State: the left
/// mapping being joined, how many rows of the group it was joined with, the
/// group's start, then the left's state.
struct MergeJoin {
    left: Node,
    key: usize,
    right: Pattern,
    right_offset: u64,
    current: Vec<i64>,
    has_current: bool,
    group_position: u64,
    left_row: Vec<i64>,
    // what the running generator holds, rebuilt at every restart
    started: bool,
    finished: bool,
    pending: bool,
    cursor: Cursor,
    free: Vec<(usize, usize)>,
    group: Vec<Triple>,
    group_key: u64,
    lookahead: Option<Triple>,
}

/// What `next` needs besides the node: the store, the budget, the
/// conditions' caches, and the plan's term table.
struct Cx<'c, 'b> {
    store: &'c Store,
    budget: &'c mut Budget<'b>,
    terms: &'c mut Terms,
    table: &'c mut dyn Table,
    undecided: &'c mut u64,
}

/// A saved state read value by value (`Tree::load`).
struct Reader<'a> {
    values: &'a [i64],
    at: usize,
    width: usize,
    /// this plan's id for an id a saved mapping holds (terms outside the dictionary)
    restore: &'a mut dyn FnMut(i64) -> Result<i64, String>,
}

impl Reader<'_> {
    fn next(&mut self) -> Result<i64, String> {
        let v = *self
            .values
            .get(self.at)
            .ok_or("state shorter than the plan")?;
        self.at += 1;
        Ok(v)
    }

    /// A non-negative count, at most `limit`.
    fn count(&mut self, limit: Option<u64>) -> Result<u64, String> {
        let v = self.next()?;
        match u64::try_from(v) {
            Ok(c) if limit.is_none_or(|l| c <= l) => Ok(c),
            _ => Err(format!("saved position {v} out of range")),
        }
    }

    /// A term id (this plan's, for one outside the dictionary).
    fn id(&mut self) -> Result<i64, String> {
        let v = self.next()?;
        if v < 0 {
            (self.restore)(v)
        } else {
            Ok(v)
        }
    }

    /// `n` mappings, none of them missing, of `width` slots.
    fn mappings(&mut self, n: u64, width: usize) -> Result<Vec<Vec<i64>>, String> {
        let mut rows = Vec::with_capacity(n.min(WHOLE_ROWS as u64) as usize);
        for _ in 0..n {
            let mut row = vec![0; width];
            if !self.mapping(&mut row)? {
                return Err("a saved row that is none".into());
            }
            rows.push(row);
        }
        Ok(rows)
    }

    /// `[n, v1..vn]` (trailing unbound slots dropped) or `[-1]` for none.
    fn mapping(&mut self, current: &mut [i64]) -> Result<bool, String> {
        current.fill(0);
        let n = self.next()?;
        if n < 0 {
            return Ok(false);
        }
        if n as usize > self.width {
            return Err("saved mapping is wider than the plan".into());
        }
        for cell in current.iter_mut().take(n as usize) {
            let v = self.next()?;
            *cell = if v < 0 { (self.restore)(v)? } else { v };
        }
        Ok(true)
    }
}

fn clamp(value: f64) -> f64 {
    value.clamp(0.0, 1.0)
}

/// `position` items read of `count`, the last one `inner` done (None: wholly).
fn position(position: u64, count: u64, inner: Option<f64>) -> f64 {
    if count == 0 {
        return 1.0; // nothing to read: done
    }
    let done = match inner {
        Some(inner) if position > 0 => (position - 1) as f64 + clamp(inner),
        _ => position as f64,
    };
    clamp(done / count as f64)
}

/// The next number for a condition or BIND.
fn take_number(numbers: &mut usize) -> usize {
    *numbers += 1;
    *numbers - 1
}

/// A term id; records where it is when negative (a term outside the dictionary,
/// renumbered by the caller).
fn save_id(v: i64, out: &mut Vec<i64>, foreign: &mut Vec<usize>) {
    if v < 0 {
        foreign.push(out.len());
    }
    out.push(v);
}

/// `[n, v1..vn]` without trailing unbound slots, or `[-1]`; records where
/// the negative ids are (terms outside the dictionary, renumbered by the caller).
fn save_mapping(has: bool, current: &[i64], out: &mut Vec<i64>, foreign: &mut Vec<usize>) {
    if !has {
        out.push(-1);
        return;
    }
    let n = current.iter().rposition(|&v| v != 0).map_or(0, |i| i + 1);
    out.push(n as i64);
    for &v in &current[..n] {
        if v < 0 {
            foreign.push(out.len());
        }
        out.push(v);
    }
}

impl Node {
    fn build(spec: Spec, width: usize, terms: &mut Terms, numbers: &mut usize) -> Node {
        match spec {
            Spec::Scan(pattern, objects) => Node::Scan(ScanRt::new(pattern, objects)),
            Spec::Values { slots, cells, rows } => Node::Values(ValuesRt {
                slots,
                cells,
                rows,
                position: 0,
            }),
            Spec::Union(branches) => Node::Union {
                branches: branches
                    .into_iter()
                    .map(|b| Node::build(b, width, terms, numbers))
                    .collect(),
                active: 0,
            },
            Spec::Join(left, right, restricted) => {
                let left = Node::build(*left, width, terms, numbers);
                let right = Node::build(*right, width, terms, numbers);
                let restricted = restricted.map(|(mode, slots)| {
                    let mut left = vec![false; width];
                    slots.into_iter().for_each(|s| left[s] = true);
                    Restricted {
                        mode,
                        left,
                        under: vec![0; width],
                        matched: false,
                    }
                });
                Node::Join(Box::new(IndexJoin {
                    left,
                    right,
                    current: vec![0; width],
                    has_current: false,
                    left_row: vec![0; width],
                    in_right: false,
                    restricted,
                }))
            }
            Spec::Merge { left, right, key } => Node::Merge(Box::new(MergeJoin {
                left: Node::build(*left, width, terms, numbers),
                key,
                right,
                right_offset: 0,
                current: vec![0; width],
                has_current: false,
                group_position: 0,
                left_row: vec![0; width],
                started: false,
                finished: false,
                pending: false,
                cursor: Cursor::Empty,
                free: Vec::new(),
                group: Vec::new(),
                group_key: 0,
                lookahead: None,
            })),
            Spec::Slice {
                input,
                offset,
                limit,
            } => Node::Slice(Box::new(Slice {
                input: Node::build(*input, width, terms, numbers),
                offset,
                limit,
                skip: offset,
                remaining: limit,
            })),
            Spec::Filter {
                input,
                atoms,
                condition,
            } => {
                let input = Box::new(Node::build(*input, width, terms, numbers));
                let condition =
                    condition.map(|c| (take_number(numbers), c.map(|e| e.memoized(terms))));
                Node::Filter {
                    input,
                    atoms,
                    condition,
                }
            }
            Spec::Extend { input, slot, value } => {
                let input = Box::new(Node::build(*input, width, terms, numbers));
                Node::Extend {
                    input,
                    slot,
                    number: take_number(numbers),
                    value,
                }
            }
            Spec::TopK {
                input,
                keys,
                k,
                exact,
            } => Node::TopK(Box::new(TopK {
                input: Node::build(*input, width, terms, numbers),
                slots: keys.iter().map(|&(slot, _)| slot).collect(),
                descending: keys.iter().map(|&(_, desc)| desc).collect(),
                k,
                exact,
                done: false,
                kept: Vec::new(),
                beaten: HashSet::default(),
                out: HandOn::new(),
                row: vec![0; width],
                rekey: false,
            })),
            Spec::Closure {
                forward,
                backward,
                from,
                to,
                subject,
                object,
                repeat,
            } => Node::Closure(Box::new(Closure {
                forward: Node::build(*forward, width, terms, numbers),
                backward: Node::build(*backward, width, terms, numbers),
                from,
                to,
                subject,
                object,
                repeat,
                phase: Phase::Start,
                order: Vec::new(),
                head: 0,
                expanding: false,
                start_reached: false,
                seen: HashSet::default(),
                restored: false,
                under: vec![0; width],
                row: vec![0; width],
            })),
            Spec::HashJoin { left, right, keys } => Node::Hash(Box::new(HashJoin {
                left: Node::build(*left, width, terms, numbers),
                right: Node::build(*right, width, terms, numbers),
                keys,
                built: false,
                rows: Vec::new(),
                table: HashMap::default(),
                loose: Vec::new(),
                current: vec![0; width],
                tried: Vec::new(),
                at: 0,
                row: vec![0; width],
                key: Vec::new(),
            })),
            Spec::Tally {
                input,
                slots,
                count,
                reduced,
                exact,
            } => Node::Tally(Box::new(Tally {
                input: Node::build(*input, width, terms, numbers),
                slots,
                count,
                reduced,
                exact,
                done: false,
                table: HashMap::default(),
                key: Vec::new(),
                out: HandOn::new(),
                row: vec![0; width],
                pending: Vec::new(),
                rekey: false,
            })),
        }
    }

    /// The next row extending `mu` into `out`; false when there is none.
    fn next(&mut self, cx: &mut Cx, mu: &[i64], out: &mut [i64]) -> Result<bool, Expired> {
        match self {
            Node::Scan(scan) => scan.next(cx.store, cx.budget, mu, out),
            Node::Values(values) => values.next(cx.budget, mu, out),
            Node::Union { branches, active } => {
                while let Some(branch) = branches.get_mut(*active) {
                    if branch.next(cx, mu, out)? {
                        return Ok(true);
                    }
                    *active += 1;
                }
                Ok(false)
            }
            Node::Join(join) => join.next(cx, mu, out),
            Node::Merge(join) => join.next(cx, mu, out),
            Node::Slice(slice) => loop {
                // checked before pulling, so no input row is lost
                if slice.remaining == Some(0) || !slice.input.next(cx, mu, out)? {
                    return Ok(false);
                }
                if slice.skip > 0 {
                    slice.skip -= 1;
                    continue;
                }
                if let Some(r) = &mut slice.remaining {
                    *r -= 1;
                }
                return Ok(true);
            },
            Node::Filter {
                input,
                atoms,
                condition,
            } => loop {
                if !input.next(cx, mu, out)? {
                    return Ok(false);
                }
                if !atoms.iter().all(|atom| atom.holds(out)) {
                    continue;
                }
                let Some((number, expr)) = condition else {
                    return Ok(true);
                };
                // natively (an error is false), or None: the reference decides
                let decided = expr.as_ref().and_then(|e| {
                    (Eval {
                        store: cx.store,
                        terms: cx.terms,
                        table: cx.table,
                        row: out,
                    })
                    .test(e)
                    .ok()
                });
                let holds = match decided {
                    Some(holds) => holds,
                    None => {
                        *cx.undecided += 1;
                        (cx.budget.undecided)(*number, out)? != 0
                    }
                };
                if holds {
                    return Ok(true);
                }
            },
            Node::Extend {
                input,
                slot,
                number,
                value,
            } => loop {
                if !input.next(cx, mu, out)? {
                    return Ok(false);
                }
                let native = value.as_ref().and_then(|e| {
                    (Eval {
                        store: cx.store,
                        terms: cx.terms,
                        table: cx.table,
                        row: out,
                    })
                    .id(e)
                    .ok()
                });
                let id = match native {
                    Some(id) => id,
                    None => {
                        *cx.undecided += 1;
                        (cx.budget.undecided)(*number, out)?
                    }
                };
                // an error leaves the slot unbound; a slot the input mapping
                // binds keeps the row only when equal (the join's compatibility)
                if id == 0 || out[*slot] == 0 {
                    if id != 0 {
                        out[*slot] = id;
                    }
                    return Ok(true);
                }
                if out[*slot] == id {
                    return Ok(true);
                }
            },
            Node::Tally(tally) => tally.next(cx, mu, out),
            Node::TopK(top) => top.next(cx, mu, out),
            Node::Closure(closure) => closure.next(cx, mu, out),
            Node::Hash(join) => join.next(cx, mu, out),
        }
    }

    /// Back to the initial state (to run again for another input mapping).
    fn reset(&mut self) {
        match self {
            Node::Scan(scan) => {
                scan.offset = 0;
                scan.opened = false;
            }
            Node::Values(values) => values.position = 0,
            Node::Union { branches, active } => {
                *active = 0;
                branches.iter_mut().for_each(Node::reset);
            }
            Node::Join(join) => {
                join.left.reset();
                join.right.reset();
                join.has_current = false;
                join.current.fill(0);
                join.in_right = false;
                if let Some(restricted) = &mut join.restricted {
                    restricted.matched = false;
                    restricted.under.fill(0);
                }
            }
            Node::Merge(join) => {
                join.left.reset();
                join.right_offset = 0;
                join.has_current = false;
                join.current.fill(0);
                join.group_position = 0;
                join.restart();
            }
            Node::Slice(slice) => {
                slice.input.reset();
                slice.skip = slice.offset;
                slice.remaining = slice.limit;
            }
            Node::Filter { input, .. } | Node::Extend { input, .. } => input.reset(),
            Node::Tally(tally) => {
                tally.input.reset();
                tally.table.clear();
                tally.out.load(Vec::new());
                tally.done = false;
            }
            Node::TopK(top) => {
                top.input.reset();
                top.kept.clear();
                top.beaten.clear();
                top.out.load(Vec::new());
                top.done = false;
            }
            Node::Closure(closure) => closure.reset(),
            Node::Hash(join) => join.reset(),
        }
    }

    /// Run again from the state as a new generator would: every scan reopens
    /// at its offset (counting its opening step), a merge join reads its
    /// current group again.
    fn restart(&mut self) {
        match self {
            Node::Scan(scan) => scan.opened = false,
            Node::Values(_) => {}
            Node::Union { branches, .. } => branches.iter_mut().for_each(Node::restart),
            Node::Join(join) => {
                join.left.restart();
                join.right.restart();
                join.in_right = join.has_current;
                if let Some(restricted) = &mut join.restricted {
                    restricted.restrict(&join.current);
                }
            }
            Node::Merge(join) => {
                join.left.restart();
                join.restart();
            }
            Node::Slice(slice) => slice.input.restart(),
            Node::Filter { input, .. } | Node::Extend { input, .. } => input.restart(),
            Node::Tally(tally) => {
                tally.input.restart();
                tally.out.expired = false; // the rows left to hand on are state: kept
            }
            Node::TopK(top) => {
                top.input.restart();
                top.out.expired = false;
            }
            Node::Closure(closure) => {
                closure.forward.restart();
                closure.backward.restart();
            }
            Node::Hash(join) => {
                join.left.restart();
                join.right.restart();
            }
        }
    }

    /// The state in pre-order, as saved plans hold it: a scan
    /// `[offset]`, VALUES `[position]`, a UNION `[active branch, branches..]`,
    /// an index join `[mapping, left.., right..]`, a merge join `[mapping,
    /// group position, right offset, left..]`, a slice `[to skip, 1 + rows
    /// remaining (0: no limit), input..]`, FILTER and BIND their input's.
    /// `foreign`: the positions of mapping cells holding negative ids.
    fn save(&self, out: &mut Vec<i64>, foreign: &mut Vec<usize>) {
        match self {
            Node::Scan(scan) => out.push(scan.offset as i64),
            Node::Values(values) => out.push(values.position as i64),
            Node::Union { branches, active } => {
                out.push(*active as i64);
                branches.iter().for_each(|b| b.save(out, foreign));
            }
            Node::Join(join) => {
                save_mapping(join.has_current, &join.current, out, foreign);
                if let Some(restricted) = &join.restricted {
                    out.push(restricted.matched as i64);
                }
                join.left.save(out, foreign);
                join.right.save(out, foreign);
            }
            Node::Merge(join) => {
                save_mapping(join.has_current, &join.current, out, foreign);
                out.push(join.group_position as i64);
                out.push(join.right_offset as i64);
                join.left.save(out, foreign);
            }
            Node::Slice(slice) => {
                out.push(slice.skip as i64);
                out.push(slice.remaining.map_or(0, |r| r as i64 + 1));
                slice.input.save(out, foreign);
            }
            Node::Filter { input, .. } | Node::Extend { input, .. } => input.save(out, foreign),
            Node::Tally(tally) => {
                let left = tally.out.left();
                out.push(left.len() as i64);
                for (key, n, reduced) in left {
                    key.iter().for_each(|&v| save_id(v, out, foreign));
                    out.push(*n as i64);
                    reduced.iter().for_each(|&v| save_id(v, out, foreign));
                }
                if tally.exact {
                    tally.save_table(out, foreign);
                }
                tally.input.save(out, foreign);
            }
            Node::TopK(top) => {
                // a partial top-k hands its rows on before a quantum ends: only an exact one keeps any
                let left = top.out.left();
                out.push(left.len() as i64);
                for row in left {
                    save_mapping(true, row, out, foreign);
                }
                if top.exact {
                    out.push(top.done as i64);
                    out.push(top.kept.len() as i64);
                    for (_, row) in &top.kept {
                        save_mapping(true, row, out, foreign);
                    }
                }
                top.input.save(out, foreign);
            }
            Node::Closure(closure) => closure.save(out, foreign),
            Node::Hash(join) => join.save(out, foreign),
        }
    }

    /// How much of this operator's run under `mu` is done, 0..1, from its
    /// state (see `quanta.engine.progress` for the model). `inner`: how far
    /// the consumer has got with the last row handed to it (None: it holds
    /// none; what was handed is done).
    fn fraction(&self, store: &Store, mu: &[i64], inner: Option<f64>) -> f64 {
        match self {
            Node::Scan(scan) => position(scan.offset, scan.count(store, mu), inner),
            Node::Values(values) => position(values.position, values.rows, inner),
            Node::Union { branches, active } => {
                let Some(running) = branches.get(*active) else {
                    return 1.0;
                };
                let weights: Vec<u64> = branches.iter().map(|b| b.weight(store, mu)).collect();
                let total: u64 = weights.iter().sum();
                let running = running.fraction(store, mu, inner);
                if total == 0 {
                    // nothing to weigh by: branches count alike
                    return clamp((*active as f64 + running) / branches.len() as f64);
                }
                let done: u64 = weights[..*active].iter().sum();
                clamp((done as f64 + weights[*active] as f64 * running) / total as f64)
            }
            Node::Join(join) => {
                let rest = join
                    .has_current
                    .then(|| join.right.fraction(store, &join.current, inner));
                join.left.fraction(store, mu, rest)
            }
            Node::Merge(join) => {
                // the right group of the current left row: rows joined over the group's size
                let rest = join.has_current.then(|| {
                    let mut keyed = vec![0; join.current.len()];
                    keyed[join.key] = join.current[join.key];
                    let size = join.right.count(store, &keyed);
                    position(join.group_position, size, inner)
                });
                join.left.fraction(store, mu, rest)
            }
            Node::Slice(slice) => {
                let structural = slice.input.fraction(store, mu, inner);
                let Some(limit) = slice.limit else {
                    return structural;
                };
                let total = slice.offset + limit;
                if total == 0 {
                    return 1.0;
                }
                let pulled = (slice.offset - slice.skip) + (limit - slice.remaining.unwrap_or(0));
                structural.max(clamp(pulled as f64 / total as f64))
            }
            Node::Filter { input, .. } | Node::Extend { input, .. } => {
                input.fraction(store, mu, inner)
            }
            Node::Tally(tally) => tally.input.fraction(store, mu, None),
            Node::TopK(top) => top.input.fraction(store, mu, None),
            Node::Hash(join) if join.built => join.left.fraction(store, mu, None),
            Node::Hash(join) => join.right.fraction(store, mu, None) / 2.0,
            // the nodes expanded of those found so far (more may come: a guess)
            Node::Closure(closure) => match closure.phase {
                Phase::Start => 0.0,
                Phase::Done => 1.0,
                _ => {
                    let step = closure.step(mu).fraction(store, &closure.under, None);
                    let found = closure.order.len().max(1) as f64;
                    clamp(
                        (closure.head as f64 + if closure.expanding { step } else { 0.0 }) / found,
                    )
                }
            },
        }
    }

    /// What this operator reads first under `mu`: its driving scan's count (a
    /// UNION's: its branches'), a VALUES's rows.
    fn weight(&self, store: &Store, mu: &[i64]) -> u64 {
        match self {
            Node::Scan(scan) => scan.count(store, mu),
            Node::Values(values) => values.rows,
            Node::Union { branches, .. } => branches.iter().map(|b| b.weight(store, mu)).sum(),
            Node::Join(join) => join.left.weight(store, mu),
            Node::Merge(join) => join.left.weight(store, mu),
            Node::Slice(slice) => slice.input.weight(store, mu),
            Node::Filter { input, .. } | Node::Extend { input, .. } => input.weight(store, mu),
            Node::Tally(tally) => tally.input.weight(store, mu),
            Node::TopK(top) => top.input.weight(store, mu),
            Node::Closure(_) => 1,
            Node::Hash(join) => join.right.weight(store, mu) + join.left.weight(store, mu),
        }
    }

    /// Read the state `save` writes, checked (a count past its range, a mapping
    /// wider than the plan: an error).
    fn load(&mut self, r: &mut Reader) -> Result<(), String> {
        match self {
            Node::Scan(scan) => scan.offset = r.count(None)?,
            Node::Values(values) => values.position = r.count(Some(values.rows))?,
            Node::Union { branches, active } => {
                *active = r.count(Some(branches.len() as u64))? as usize;
                for branch in branches {
                    branch.load(r)?;
                }
            }
            Node::Join(join) => {
                join.has_current = r.mapping(&mut join.current)?;
                if let Some(restricted) = &mut join.restricted {
                    restricted.matched = r.count(Some(1))? == 1;
                    restricted.restrict(&join.current);
                }
                join.left.load(r)?;
                join.right.load(r)?;
            }
            Node::Merge(join) => {
                join.has_current = r.mapping(&mut join.current)?;
                join.group_position = r.count(None)?;
                join.right_offset = r.count(None)?;
                join.left.load(r)?;
            }
            Node::Slice(slice) => {
                slice.skip = r.count(Some(slice.offset))?;
                let saved = r.count(slice.limit.map(|l| l + 1))?;
                slice.remaining = match slice.limit {
                    None => None,
                    Some(_) if saved == 0 => {
                        return Err("slice: no remaining count for a limit".into())
                    }
                    Some(_) => Some(saved - 1),
                };
                slice.input.load(r)?;
            }
            Node::Filter { input, .. } | Node::Extend { input, .. } => input.load(r)?,
            Node::Tally(tally) => {
                let n = r.count(Some(tally.bound() as u64))?;
                let mut rows = Vec::with_capacity(n as usize);
                for _ in 0..n {
                    let key = (0..tally.slots.len())
                        .map(|_| r.id())
                        .collect::<Result<Vec<_>, _>>()?;
                    let count = r.count(None)?;
                    if count == 0 && !tally.exact {
                        // (an exact COUNT(*) over no row is 0)
                        return Err("tally: a row counted 0 times".into());
                    }
                    let reduced = (0..tally.reduced.len())
                        .map(|_| r.id())
                        .collect::<Result<Vec<_>, _>>()?;
                    rows.push((key, count, reduced));
                }
                tally.out.load(rows);
                if tally.exact {
                    tally.load_table(r)?;
                }
                tally.input.load(r)?;
            }
            Node::Closure(closure) => closure.load(r)?,
            Node::TopK(top) => {
                let n = r.count(Some(top.k as u64))?;
                top.kept.clear();
                top.beaten.clear();
                let rows = r.mappings(n, top.row.len())?;
                top.out.load(rows);
                if top.exact {
                    top.done = r.count(Some(1))? == 1;
                    let n = r.count(Some(SORTED_ROWS as u64 + 1))?;
                    let kept = r.mappings(n, top.row.len())?;
                    top.kept = kept.into_iter().map(|row| (Vec::new(), row)).collect();
                    top.rekey = true;
                }
                top.input.load(r)?;
            }
            Node::Hash(join) => join.load(r)?,
        }
        Ok(())
    }
}

impl IndexJoin {
    fn next(&mut self, cx: &mut Cx, mu: &[i64], out: &mut [i64]) -> Result<bool, Expired> {
        loop {
            if self.in_right {
                let Some(restricted) = &mut self.restricted else {
                    if self.right.next(cx, &self.current, out)? {
                        return Ok(true);
                    }
                    self.in_right = false;
                    continue;
                };
                if restricted.mode == Mode::Optional {
                    while self.right.next(cx, &restricted.under, out)? {
                        restricted.matched = true;
                        if restricted.complete(&self.current, out) {
                            return Ok(true);
                        }
                    }
                    self.in_right = false;
                    if !restricted.matched {
                        restricted.matched = true; // handed on: not again after a restart
                        out.copy_from_slice(&self.current);
                        return Ok(true);
                    }
                    continue;
                }
                // a filter: whether `right` gives a row decides (its row in `out` is scratch)
                let keep = if restricted.matched {
                    false // decided before a restart: handed on or dropped then
                } else if restricted.mode == Mode::Minus && restricted.under.iter().all(|&v| v == 0)
                {
                    true // no shared variable bound: nothing to remove it
                } else {
                    let found = self.right.next(cx, &restricted.under, out)?;
                    found == (restricted.mode == Mode::Exists)
                };
                restricted.matched = true;
                self.in_right = false;
                if keep {
                    out.copy_from_slice(&self.current);
                    return Ok(true);
                }
            }
            // the next left mapping (current keeps the old one until then)
            let found = self.left.next(cx, mu, &mut self.left_row)?;
            if !take_left(
                found,
                &self.left_row,
                &mut self.current,
                &mut self.has_current,
            ) {
                return Ok(false);
            }
            if let Some(restricted) = &mut self.restricted {
                restricted.matched = false;
                restricted.restrict(&self.current);
            }
            self.right.reset();
            self.in_right = true;
        }
    }
}

impl MergeJoin {
    fn restart(&mut self) {
        self.started = false;
        self.finished = false;
        self.pending = false;
        self.group.clear();
        self.lookahead = None;
    }

    /// Move to the next group of equal subjects; false when the right side is done.
    fn next_group(&mut self, budget: &mut Budget, store: &Store) -> Result<bool, Expired> {
        self.right_offset += self.group.len() as u64;
        self.group.clear();
        let Some(first) = self.lookahead else {
            return Ok(false);
        };
        self.group_key = first[0];
        while let Some(t) = self.lookahead {
            if t[0] != self.group_key {
                break;
            }
            budget.step()?;
            self.group.push(t);
            self.lookahead = store.next(&mut self.cursor);
        }
        Ok(true)
    }

    fn next(&mut self, cx: &mut Cx, mu: &[i64], out: &mut [i64]) -> Result<bool, Expired> {
        if self.finished {
            return Ok(false);
        }
        if !self.started {
            // the right side resolved under no bindings: its key is free
            let zero = vec![0i64; mu.len()];
            let [s, p, o] = self.right.resolve(&zero, &mut self.free);
            let key = self.key;
            self.free.retain(|&(slot, _)| slot != key); // the key comes from the left mapping
            self.cursor = cx.store.search(s, p, o, self.right_offset);
            self.lookahead = cx.store.next(&mut self.cursor);
            self.group.clear();
            self.started = true;
            if !self.next_group(cx.budget, cx.store)? {
                self.finished = true;
                return Ok(false);
            }
            self.pending = self.has_current; // resumed in the middle of a left mapping
        }
        loop {
            if !self.pending {
                let found = self.left.next(cx, mu, &mut self.left_row)?;
                if !take_left(
                    found,
                    &self.left_row,
                    &mut self.current,
                    &mut self.has_current,
                ) {
                    self.finished = true;
                    return Ok(false);
                }
                self.group_position = 0;
                self.pending = true;
            }
            let wanted = self.current[self.key] as u64;
            while self.group_key < wanted {
                if !self.next_group(cx.budget, cx.store)? {
                    self.has_current = false;
                    self.current.fill(0);
                    self.finished = true;
                    return Ok(false);
                }
            }
            if self.group_key == wanted && (self.group_position as usize) < self.group.len() {
                let t = self.group[self.group_position as usize];
                self.group_position += 1;
                if bind(&self.current, &t, &self.free, out) {
                    return Ok(true);
                }
                continue; // a triple the left mapping rules out (a slot an outer join bound)
            }
            self.pending = false;
        }
    }
}

/// A plan running natively: its operator tree, and what its conditions keep
/// between rows.
pub struct Tree {
    width: usize,
    root: Node,
    /// rows a condition or BIND handed to `Budget::undecided`
    pub undecided: u64,
    terms: Terms,
    out: Vec<i64>,
    /// the plan's input mapping: every slot unbound
    unbound: Vec<i64>,
}

impl Tree {
    /// Conditions and BINDs are numbered in the order `spec` lists them
    /// (pre-order, an operator's input first), for `Budget::undecided`.
    pub fn new(width: usize, spec: Spec) -> Self {
        let mut terms = Terms::default();
        let root = Node::build(spec, width, &mut terms, &mut 0);
        Tree {
            width,
            root,
            undecided: 0,
            terms,
            out: vec![0; width],
            unbound: vec![0; width],
        }
    }

    pub fn width(&self) -> usize {
        self.width
    }

    /// Free what the conditions keep between rows (decoded terms, memoized tests).
    pub fn trim(&mut self) {
        self.terms.clear();
    }

    /// Continue from the state as a new run would (see `Node::restart`).
    pub fn restart(&mut self) {
        self.root.restart();
    }

    /// The state in the saved plans' layout (`Node::save`), and the
    /// positions of the mapping cells that hold negative ids.
    pub fn save(&self) -> (Vec<i64>, Vec<usize>) {
        let mut out = Vec::with_capacity(16);
        let mut foreign = Vec::new();
        self.root.save(&mut out, &mut foreign);
        (out, foreign)
    }

    /// Load a state in that layout, the whole of `values`; `restore` maps a
    /// negative id a mapping holds. Then `restart`.
    pub fn load(
        &mut self,
        values: &[i64],
        restore: &mut dyn FnMut(i64) -> Result<i64, String>,
    ) -> Result<(), String> {
        let mut reader = Reader {
            values,
            at: 0,
            width: self.width,
            restore,
        };
        self.root.load(&mut reader)?;
        if reader.at != values.len() {
            return Err("state longer than the plan".into());
        }
        self.root.restart();
        Ok(())
    }

    /// The estimated fraction of the plan done, 0..1, from its state.
    pub fn progress(&self, store: &Store) -> f64 {
        clamp(self.root.fraction(store, &vec![0; self.width], None))
    }

    /// Up to `max_rows` rows (each `width` values, appended to `rows`),
    /// stopping right after the last one. `table`: the plan's term table,
    /// which holds the terms outside the dictionary (`crate::expr::Table`).
    pub fn run(
        &mut self,
        store: &Store,
        table: &mut dyn Table,
        budget: &mut Budget,
        max_rows: usize,
        rows: &mut Vec<i64>,
    ) -> (Status, usize) {
        let Tree {
            root,
            undecided,
            terms,
            out,
            unbound,
            ..
        } = self;
        let mut cx = Cx {
            store,
            budget,
            terms,
            table,
            undecided,
        };
        let mut produced = 0;
        let status = loop {
            if produced >= max_rows {
                break Status::Full;
            }
            match root.next(&mut cx, unbound, out) {
                Ok(true) => {
                    rows.extend_from_slice(out);
                    produced += 1;
                }
                Ok(false) => break Status::Done,
                Err(Expired) => break Status::Expired,
            }
        };
        (status, produced)
    }
}

/// A join's current left mapping once the next one was searched for: `left_row`
/// if `found`, else none (all unbound). Returns `found`.
fn take_left(found: bool, left_row: &[i64], current: &mut [i64], has_current: &mut bool) -> bool {
    if found {
        current.copy_from_slice(left_row);
    } else {
        current.fill(0);
    }
    *has_current = found;
    found
}

#[cfg(test)]
mod tests {
    use super::Exact;

    fn sum(values: &[f64]) -> Option<Exact> {
        values.iter().try_fold(Exact::default(), |total, &x| {
            total.add(Exact::of_double(x)?)
        })
    }

    #[test]
    fn sums_are_exact_and_written_with_every_digit() {
        let tenth = f64::from(0.1f32); // 13421773 / 2^27
        let total = sum(&[tenth, tenth, -3.0]).expect("fits");
        assert_eq!(
            total.decimal().as_deref(),
            Some("-2.79999999701976776123046875")
        );
        assert_eq!(
            sum(&[2.5, 0.5]).and_then(Exact::decimal).as_deref(),
            Some("3.0")
        );
        assert_eq!(
            sum(&[1024.0, -1024.0]).and_then(Exact::decimal).as_deref(),
            Some("0.0")
        );
        assert_eq!(
            sum(&[-0.25]).and_then(Exact::decimal).as_deref(),
            Some("-0.25")
        );
        assert_eq!(sum(&[3.0, 5.0]).and_then(Exact::integer), Some(8));
    }

    #[test]
    fn sums_past_128_bits_are_refused() {
        assert!(sum(&[1e300]).is_none()); // 2^996: no u128 holds its digits
        assert!(sum(&[1e20, 1e-20]).is_none());
        assert!(Exact::of_double(f64::NAN).is_none() && Exact::of_double(f64::INFINITY).is_none());
    }
}
