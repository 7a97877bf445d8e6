//! Reading the verifier's answer (G5). The contract (stated in the
//! verifier's prompt): each gap on a line `GAP: …`, and as the last line
//! `VERDICT: PASS`, `VERDICT: FAIL` or `VERDICT: PARTIAL`. Anything else is
//! no verdict, and the goal pauses rather than guessing.

/// What the verifier decided.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// The objective is met.
    Pass,
    /// It is not: these gaps remain.
    Fail(Vec<String>),
    /// Partly met.
    Partial(Vec<String>),
    /// The answer did not end with a verdict line.
    Unparseable,
    /// The verifier could not run or crashed.
    Unavailable(String),
}

impl Verdict {
    /// The name on the wire.
    pub fn as_str(&self) -> &'static str {
        match self {
            Verdict::Pass => "pass",
            Verdict::Fail(_) => "fail",
            Verdict::Partial(_) => "partial",
            Verdict::Unparseable => "unparseable",
            Verdict::Unavailable(_) => "unavailable",
        }
    }

    /// The gaps it lists.
    pub fn gaps(&self) -> &[String] {
        match self {
            Verdict::Fail(gaps) | Verdict::Partial(gaps) => gaps,
            Verdict::Pass | Verdict::Unparseable | Verdict::Unavailable(_) => &[],
        }
    }
}

/// Strips what models wrap lines in: markdown emphasis, headings, quotes,
/// list bullets.
fn bare(line: &str) -> &str {
    line.trim()
        .trim_start_matches(['-', '•', ' '])
        .trim_matches(|c: char| matches!(c, '*' | '_' | '`' | '#' | '>'))
        .trim()
}

fn after_label<'a>(line: &'a str, label: &str) -> Option<&'a str> {
    let head = line.get(..label.len())?;
    head.eq_ignore_ascii_case(label)
        .then(|| line[label.len()..].trim())
}

/// Reads an answer: its last non-empty line must be the verdict.
pub fn parse_verdict(answer: &str) -> Verdict {
    let Some(last) = answer.lines().map(bare).rfind(|l| !l.is_empty()) else {
        return Verdict::Unparseable;
    };
    let Some(word) = after_label(last, "VERDICT:") else {
        return Verdict::Unparseable;
    };
    let word = word
        .split(|c: char| !c.is_ascii_alphabetic())
        .next()
        .unwrap_or_default()
        .to_ascii_uppercase();
    let gaps = || -> Vec<String> {
        answer
            .lines()
            .map(bare)
            .filter_map(|l| after_label(l, "GAP:"))
            .filter(|g| !g.is_empty())
            .map(str::to_string)
            .collect()
    };
    match word.as_str() {
        "PASS" => Verdict::Pass,
        "FAIL" => {
            let gaps = gaps();
            if gaps.is_empty() {
                Verdict::Fail(vec![
                    "the verifier found the objective unmet but listed no gaps".into(),
                ])
            } else {
                Verdict::Fail(gaps)
            }
        }
        "PARTIAL" => Verdict::Partial(gaps()),
        _ => Verdict::Unparseable,
    }
}
