//! Brace expansion (`{a,b}`, `{1..3}`), as bash does it before any other
//! expansion: which braces expand, and the words they make.
//!
//! Only plain characters (unquoted, unescaped, not from an expansion) can
//! open, separate or close a brace expansion. A `{` expands when its
//! matching `}` closes a list with a comma at its own level, or a sequence
//! `x..y[..step]`; other braces are plain text, though braces inside them
//! may expand (`{a{b,c}}` is `{ab} {ac}`). Everything here is one pass to
//! find the braces and one bounded pass to list the words.

/// At most this many words are listed; a larger expansion is "too large".
const MAX_FIELDS: usize = 1024;
/// At most this many characters, all words together.
const MAX_CHARS: usize = 64 * 1024;
/// At most this many expansions inside one another.
const MAX_NESTING: usize = 64;
/// The longest inside of a sequence expression looked at (`{-100..100..5}`
/// is 13).
const MAX_SEQUENCE: usize = 48;

/// A `{…}` that expands.
enum Group {
    /// `{a,b}`: where each alternative starts and ends (exclusive).
    List(Vec<(usize, usize)>),
    /// `{1..3}`, `{a..e}`: the words, already listed.
    Sequence(Vec<String>),
}

/// The brace expansion of a word whose characters are `text`, where
/// `plain[i]` says whether `text[i]` is a plain character. `None` when no
/// brace expands; `Some(None)` when one does but the words are too many to
/// list; else the words, in bash's order.
pub(super) fn expand(text: &[char], plain: &[bool]) -> Option<Option<Vec<String>>> {
    let groups = find_groups(text, plain);
    if groups.iter().all(Option::is_none) {
        return None;
    }
    let reader = Reader {
        text,
        groups: &groups,
    };
    Some(reader.words(0, text.len(), 0))
}

/// For each index of `text`, the expanding group that opens there, with the
/// index of its closing brace.
fn find_groups(text: &[char], plain: &[bool]) -> Vec<Option<(usize, Group)>> {
    let mut groups: Vec<Option<(usize, Group)>> = Vec::new();
    groups.resize_with(text.len(), || None);
    // Open braces, each with the commas at its own level.
    let mut open: Vec<(usize, Vec<usize>)> = Vec::new();
    for (i, &c) in text.iter().enumerate() {
        if !plain[i] {
            continue;
        }
        match c {
            '{' => open.push((i, Vec::new())),
            ',' => {
                if let Some((_, commas)) = open.last_mut() {
                    commas.push(i);
                }
            }
            '}' => {
                let Some((start, commas)) = open.pop() else {
                    continue;
                };
                let group = if commas.is_empty() {
                    // A sequence is short; looking only at short insides
                    // keeps nested braces linear.
                    let inside = start + 1..i;
                    let short = inside.len() <= MAX_SEQUENCE;
                    match (short && plain[inside.clone()].iter().all(|p| *p))
                        .then(|| sequence(&text[inside]))
                        .flatten()
                    {
                        Some(words) => Group::Sequence(words),
                        None => continue,
                    }
                } else {
                    let mut bounds = Vec::with_capacity(commas.len() + 1);
                    let mut from = start + 1;
                    for comma in commas {
                        bounds.push((from, comma));
                        from = comma + 1;
                    }
                    bounds.push((from, i));
                    Group::List(bounds)
                };
                groups[start] = Some((i, group));
            }
            _ => {}
        }
    }
    groups
}

/// A sequence expression `x..y` or `x..y..step` of integers or of single
/// letters, listed; `None` when `inside` is not one (or is too long).
fn sequence(inside: &[char]) -> Option<Vec<String>> {
    let text: String = inside.iter().collect();
    let parts: Vec<&str> = text.split("..").collect();
    let (lhs, rhs, step) = match parts.as_slice() {
        [lhs, rhs] => (*lhs, *rhs, 1i64),
        [lhs, rhs, step] => (*lhs, *rhs, step.parse::<i64>().ok()?.checked_abs()?.max(1)),
        _ => return None,
    };
    if let (Ok(a), Ok(b)) = (lhs.parse::<i64>(), rhs.parse::<i64>()) {
        let count = (a.abs_diff(b) / step.unsigned_abs()).checked_add(1)?;
        if count > MAX_FIELDS as u64 {
            return None;
        }
        let padded = |s: &str| {
            let digits = s.trim_start_matches('-');
            digits.len() > 1 && digits.starts_with('0')
        };
        let width = if padded(lhs) || padded(rhs) {
            lhs.len().max(rhs.len())
        } else {
            0
        };
        let step = if a <= b { step } else { -step };
        let mut words = Vec::new();
        let mut n = a;
        for _ in 0..count {
            words.push(format!("{n:0width$}"));
            n += step;
        }
        return Some(words);
    }
    let (mut l, mut r) = (lhs.chars(), rhs.chars());
    match (l.next(), l.next(), r.next(), r.next()) {
        (Some(a), None, Some(b), None) if a.is_ascii_alphabetic() && b.is_ascii_alphabetic() => {
            let (a, b) = (a as u8, b as u8);
            let step = usize::try_from(step).ok()?;
            let range: Vec<u8> = if a <= b {
                (a..=b).step_by(step).collect()
            } else {
                (b..=a).rev().step_by(step).collect()
            };
            Some(
                range
                    .into_iter()
                    .map(|c| char::from(c).to_string())
                    .collect(),
            )
        }
        _ => None,
    }
}

struct Reader<'a> {
    text: &'a [char],
    groups: &'a [Option<(usize, Group)>],
}

impl Reader<'_> {
    /// The words `text[from..to]` makes, or `None` when too many.
    fn words(&self, from: usize, to: usize, nesting: usize) -> Option<Vec<String>> {
        if nesting > MAX_NESTING {
            return None;
        }
        let mut out = vec![String::new()];
        let mut i = from;
        while i < to {
            let Some((close, group)) = &self.groups[i] else {
                for word in &mut out {
                    word.push(self.text[i]);
                }
                if out.len() * out.first().map_or(0, String::len) > MAX_CHARS {
                    return None;
                }
                i += 1;
                continue;
            };
            let choices = match group {
                Group::Sequence(words) => words.clone(),
                Group::List(bounds) => {
                    let mut choices = Vec::new();
                    for &(a, b) in bounds {
                        choices.extend(self.words(a, b, nesting + 1)?);
                        if choices.len() > MAX_FIELDS {
                            return None;
                        }
                    }
                    choices
                }
            };
            let mut next = Vec::with_capacity(out.len() * choices.len());
            let mut chars = 0;
            for word in &out {
                for choice in &choices {
                    let joined = format!("{word}{choice}");
                    chars += joined.len();
                    next.push(joined);
                }
                if next.len() > MAX_FIELDS || chars > MAX_CHARS {
                    return None;
                }
            }
            out = next;
            i = close + 1;
        }
        Some(out)
    }
}
