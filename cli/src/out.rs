//! Every write to stdout and stderr. A reader that goes away early
//! (`cadre sessions list | head -1`) ends the process quietly, at once,
//! with exit code 0 and no message: nothing it would still print can be
//! read, and the session it ran stays stored, ready to resume. Other write
//! errors (a full disk behind a redirect) are ignored, as `println!` users
//! expect, but never panic.
//!
//! The crate denies `print!` and friends, which panic on a closed pipe;
//! [`outln!`](crate::outln), [`out!`](crate::out), [`errln!`](crate::errln)
//! and [`err!`](crate::err) take their place.

use std::fmt;
use std::io::{ErrorKind, Write};

/// Writes to stdout and flushes, so a closed reader is noticed now.
pub fn stdout(text: fmt::Arguments<'_>) {
    let mut out = std::io::stdout().lock();
    settle(out.write_fmt(text).and_then(|()| out.flush()));
}

/// Writes to stderr (unbuffered).
pub fn stderr(text: fmt::Arguments<'_>) {
    settle(std::io::stderr().lock().write_fmt(text));
}

/// Writes raw text to stdout or stderr.
pub fn text(to_stdout: bool, text: &str) {
    if to_stdout {
        stdout(format_args!("{text}"));
    } else {
        stderr(format_args!("{text}"));
    }
}

fn settle(result: std::io::Result<()>) {
    if let Err(err) = result
        && err.kind() == ErrorKind::BrokenPipe
    {
        closed();
    }
}

/// The reader is gone: stop every command a turn started, and leave.
fn closed() -> ! {
    cadre_runtime::sandbox::kill_live_groups();
    std::process::exit(i32::from(crate::exit::SUCCESS))
}

/// `println!` that ends the process quietly when stdout's reader is gone.
#[macro_export]
macro_rules! outln {
    () => { $crate::out::stdout(format_args!("\n")) };
    ($($arg:tt)*) => { $crate::out::stdout(format_args!("{}\n", format_args!($($arg)*))) };
}

/// `print!` that ends the process quietly when stdout's reader is gone.
#[macro_export]
macro_rules! out {
    ($($arg:tt)*) => { $crate::out::stdout(format_args!($($arg)*)) };
}

/// `eprintln!` that ends the process quietly when stderr's reader is gone.
#[macro_export]
macro_rules! errln {
    () => { $crate::out::stderr(format_args!("\n")) };
    ($($arg:tt)*) => { $crate::out::stderr(format_args!("{}\n", format_args!($($arg)*))) };
}

/// `eprint!` that ends the process quietly when stderr's reader is gone.
#[macro_export]
macro_rules! err {
    ($($arg:tt)*) => { $crate::out::stderr(format_args!($($arg)*)) };
}
