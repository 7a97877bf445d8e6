//! Reading a program's arguments against an allow-list of its options.
//!
//! An option is accepted only when it is listed, spelled out exactly: an
//! abbreviation (`--out` for `--output`), a negation (`--no-list`) or a
//! short flag anywhere in a cluster (`-mo`) that is not listed is refused,
//! since the program may read it as one that writes or runs something.

use crate::permission::shell::Word;

/// How a program reads its arguments, and what it accepts.
pub(super) struct Spec {
    /// Short options, written like getopt's optstring: a letter alone takes
    /// no value, `x:` takes one (the rest of the cluster, or the next word),
    /// `x::` takes one only attached (`-Iseconds`).
    pub short: &'static str,
    /// Long options, separated by blanks: `name` takes no value, `name=`
    /// takes one (`--name=v` or `--name v`), `name[=]` takes one only after
    /// `=`, `name==` must have one after `=` (`--name` alone is refused).
    pub long: &'static str,
    /// More long options, in shared lists (git's diff and revision options).
    pub more_long: &'static [&'static str],
    /// `-NUM` is accepted as an option (`head -20`, `git log -5`).
    pub numeric: bool,
    /// Which operands (non-option words) only read.
    pub operands: Operands,
    /// getopt permutes: an option after an operand is still an option. A
    /// builtin stops at the first operand.
    pub permute: bool,
    /// A short option's value is the next word even inside a cluster
    /// (`tree -L 2`, not getopt).
    pub values_from_next_word: bool,
    /// A separate value starting with `-` must also pass as options: for
    /// programs whose value parsing is not getopt's in every case (git), a
    /// word taken for a value might be read as an option.
    pub dash_values_are_options: bool,
}

/// The base every [`Spec`] builds on: GNU getopt, nothing accepted.
pub(super) const GNU: Spec = Spec {
    short: "",
    long: "",
    more_long: &[],
    numeric: false,
    operands: Operands::Any,
    permute: true,
    values_from_next_word: false,
    dash_values_are_options: false,
};

/// Which operands (non-option words) a program only reads.
pub(super) enum Operands {
    /// Any number.
    Any,
    /// At most this many: the next one is an output file (`uniq in out`).
    AtMost(usize),
    /// Only operands starting with this (`date +%s`; `date 0101…` sets the
    /// clock).
    Prefixed(&'static str),
    /// Only when one of these options makes the command list instead of
    /// create (`git branch --list 'feat*'` versus `git branch feat`).
    OnlyWith(&'static [&'static str]),
}

/// How an option takes a value.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Takes {
    Nothing,
    /// Attached, or the next word.
    Value,
    /// Only attached.
    Attached,
    /// Only attached, and required.
    Equals,
}

/// What an accepted argument list holds.
#[derive(Default)]
pub(super) struct Read<'a> {
    /// The operands, in order; a glob the program may expand counts as one.
    pub operands: Vec<&'a Word>,
    /// Each option seen, as `-x` or `--name`.
    pub options: Vec<String>,
    /// Each value given to an option, with the option.
    pub values: Vec<(String, String)>,
}

/// The reason an option is refused.
pub(super) fn unknown_option(label: &str, word: &str) -> String {
    format!(
        "`{label} {word}` is not an option known to be read-only: it may be one that writes, \
         deletes or runs a program"
    )
}

impl Spec {
    fn short_takes(&self, c: char) -> Option<Takes> {
        if c == ':' {
            return None;
        }
        let at = self.short.find(c)?;
        let rest = &self.short[at + c.len_utf8()..];
        Some(if rest.starts_with("::") {
            Takes::Attached
        } else if rest.starts_with(':') {
            Takes::Value
        } else {
            Takes::Nothing
        })
    }

    /// Whether `--name` is listed.
    pub(super) fn lists_long(&self, name: &str) -> bool {
        self.long_takes(name).is_some()
    }

    fn long_takes(&self, name: &str) -> Option<Takes> {
        let lists = std::iter::once(self.long).chain(self.more_long.iter().copied());
        lists
            .flat_map(str::split_ascii_whitespace)
            .find_map(|entry| {
                let (base, takes) = if let Some(base) = entry.strip_suffix("==") {
                    (base, Takes::Equals)
                } else if let Some(base) = entry.strip_suffix("[=]") {
                    (base, Takes::Attached)
                } else if let Some(base) = entry.strip_suffix('=') {
                    (base, Takes::Value)
                } else {
                    (entry, Takes::Nothing)
                };
                (base == name).then_some(takes)
            })
    }

    /// Reads `args` of the program called `label`. Words with `globs` are
    /// operands nobody can read in advance: the caller only lets them
    /// through for programs none of whose options write or run anything.
    pub(super) fn read<'a>(&self, label: &str, args: &'a [Word]) -> Result<Read<'a>, String> {
        let mut read = Read::default();
        let mut only_operands = false;
        let mut i = 0;
        while let Some(word) = args.get(i) {
            i += 1;
            let text = word.text.as_str();
            if word.globs || only_operands || text == "-" || !text.starts_with('-') {
                read.operands.push(word);
                if !self.permute {
                    only_operands = true;
                }
                continue;
            }
            if text == "--" {
                only_operands = true;
                continue;
            }
            if self.numeric && text[1..].chars().all(|c| c.is_ascii_digit()) {
                read.options.push(text.to_string());
                continue;
            }
            let next = args.get(i);
            let used_next = if let Some(long) = text.strip_prefix("--") {
                self.read_long(label, long, next, &mut read)?
            } else {
                self.read_short(label, text, next, &mut read)?
            };
            if used_next {
                i += 1;
            }
        }
        Ok(read)
    }

    /// One `--name[=value]`; whether it took the next word as its value.
    fn read_long(
        &self,
        label: &str,
        long: &str,
        next: Option<&Word>,
        read: &mut Read<'_>,
    ) -> Result<bool, String> {
        let word = format!("--{long}");
        let (name, value) = match long.split_once('=') {
            Some((name, value)) => (name, Some(value)),
            None => (long, None),
        };
        let refused = || unknown_option(label, &word);
        let takes = self.long_takes(name).ok_or_else(refused)?;
        read.options.push(format!("--{name}"));
        match (takes, value) {
            (Takes::Nothing, Some(_)) | (Takes::Equals, None) => Err(refused()),
            (_, Some(value)) => {
                read.values.push((format!("--{name}"), value.to_string()));
                Ok(false)
            }
            (Takes::Value, None) => self.take_next(label, &format!("--{name}"), next, read),
            (Takes::Nothing | Takes::Attached, None) => Ok(false),
        }
    }

    /// One cluster of short options; whether it took the next word.
    fn read_short(
        &self,
        label: &str,
        text: &str,
        next: Option<&Word>,
        read: &mut Read<'_>,
    ) -> Result<bool, String> {
        let cluster = &text[1..];
        let mut used_next = false;
        for (at, c) in cluster.char_indices() {
            let takes = self
                .short_takes(c)
                .ok_or_else(|| unknown_option(label, text))?;
            let option = format!("-{c}");
            read.options.push(option.clone());
            let rest = &cluster[at + c.len_utf8()..];
            match takes {
                Takes::Nothing => {}
                Takes::Value if self.values_from_next_word => {
                    if used_next {
                        return Err(unknown_option(label, text));
                    }
                    used_next = self.take_next(label, &option, next, read)?;
                }
                Takes::Value if rest.is_empty() => {
                    return self.take_next(label, &option, next, read);
                }
                Takes::Value | Takes::Attached | Takes::Equals => {
                    if !rest.is_empty() {
                        read.values.push((option, rest.to_string()));
                    }
                    return Ok(false);
                }
            }
        }
        Ok(used_next)
    }

    /// The next word as the value of `option`.
    fn take_next(
        &self,
        label: &str,
        option: &str,
        next: Option<&Word>,
        read: &mut Read<'_>,
    ) -> Result<bool, String> {
        let Some(value) = next else {
            // The program stops with a usage error.
            return Ok(false);
        };
        if value.globs {
            return Err(format!(
                "'{}', the value of `{label} {option}`, is an unquoted glob",
                value.text
            ));
        }
        if self.dash_values_are_options && value.text.starts_with('-') && value.text != "-" {
            let as_options = std::slice::from_ref(value);
            let mut again = Spec {
                operands: Operands::Any,
                ..*self
            }
            .read(label, as_options)?;
            read.options.append(&mut again.options);
        }
        read.values.push((option.to_string(), value.text.clone()));
        Ok(true)
    }
}

/// Checks the operands `read` found against `operands`.
pub(super) fn check_operands(
    label: &str,
    operands: &Operands,
    read: &Read<'_>,
) -> Result<(), String> {
    match operands {
        Operands::Any => Ok(()),
        Operands::AtMost(n) => match read.operands.get(*n) {
            Some(extra) => Err(format!(
                "`{label}` reads at most {n} operand(s); '{}' would be written or changed",
                extra.text
            )),
            None => Ok(()),
        },
        Operands::Prefixed(prefix) => {
            match read.operands.iter().find(|o| !o.text.starts_with(prefix)) {
                Some(operand) => Err(format!(
                    "`{label} {}`: an operand not starting with '{prefix}' changes something",
                    operand.text
                )),
                None => Ok(()),
            }
        }
        Operands::OnlyWith(listing) => {
            let lists = read.options.iter().any(|o| listing.contains(&o.as_str()));
            match read.operands.first() {
                Some(operand) if !lists => Err(format!(
                    "`{label} {}` creates or changes '{}' unless a listing option ({}) is given",
                    operand.text,
                    operand.text,
                    listing.join(", ")
                )),
                _ => Ok(()),
            }
        }
    }
}
