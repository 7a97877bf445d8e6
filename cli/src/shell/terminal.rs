//! The shell's terminal: a thread reading lines with rustyline (line
//! editing, history in `<data dir>/shell_history`), and a thread printing
//! above the prompt, so output keeps flowing while the person types.
//!
//! rustyline blocks, so the reader runs on its own thread and hands each
//! input over with a [`Reply`] port; it reads the next line only once the
//! shell has answered, and stops when told to, so the terminal is never
//! left in raw mode. Printing goes through rustyline's external printer,
//! which redraws the prompt and the half-typed line under what it prints; it
//! can only print whole lines, so streamed text is held until its line ends.

use std::path::{Path, PathBuf};
use std::sync::mpsc as std_mpsc;
use std::thread::JoinHandle;

use rustyline::error::{ReadlineError, Signal};
use rustyline::{
    Cmd, ConditionalEventHandler, Config, DefaultEditor, Event, EventContext, EventHandler,
    ExternalPrinter, KeyCode, KeyEvent, Modifiers, Movement, RepeatCount,
};
use tokio::sync::{mpsc, oneshot};

use super::controller::Input;
use crate::render::{Piece, Stream};

/// The prompt.
const PROMPT: &str = "cadre> ";

/// Lines kept in the history file.
const HISTORY_SIZE: usize = 1000;

/// What the reader does after an input.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Next {
    /// Read another line.
    Read,
    /// Stop reading: save the history and restore the terminal.
    Stop,
    /// An Esc cancelled nothing: clear the line being typed.
    ClearLine,
}

/// Where the reader waits for the shell's [`Next`].
pub type Reply = oneshot::Sender<Next>;

/// A printer that can be moved to the printing thread.
type Printer = Box<dyn ExternalPrinter + Send>;

/// The terminal: inputs in, text out.
pub struct Terminal {
    inputs: mpsc::UnboundedReceiver<(Input, Reply)>,
    /// Whether the reader still reads (it has not been told to stop).
    reading: bool,
    reader: Option<JoinHandle<()>>,
    lines: Option<std_mpsc::Sender<Piece>>,
    printer: Option<JoinHandle<()>>,
    /// Streamed text whose line has not ended yet.
    partial: WholeLines,
}

impl Terminal {
    /// Starts the reader and the printer.
    pub async fn start(history: PathBuf) -> Self {
        let (inputs_tx, inputs) = mpsc::unbounded_channel();
        let (printer_tx, printer_rx) = oneshot::channel();
        let reader = std::thread::Builder::new()
            .name("shell-reader".into())
            .spawn(move || read_lines(&history, printer_tx, &inputs_tx))
            .ok();
        // No reader thread, or a terminal rustyline cannot drive: print plainly.
        let printer = printer_rx.await.ok().flatten();
        let (lines_tx, lines_rx) = std_mpsc::channel();
        let printer = std::thread::Builder::new()
            .name("shell-printer".into())
            .spawn(move || print_lines(printer, &lines_rx))
            .ok();
        Self {
            inputs,
            reading: reader.is_some(),
            reader,
            lines: Some(lines_tx),
            printer,
            partial: WholeLines::default(),
        }
    }

    /// The next input; `None` if the reader ended on its own, then never
    /// again (nor after it was told to stop). Cancel-safe.
    pub async fn next(&mut self) -> Option<(Input, Reply)> {
        if !self.reading {
            return std::future::pending().await;
        }
        let next = self.inputs.recv().await;
        if next.is_none() {
            self.reading = false;
        }
        next
    }

    /// Whether the reader still reads.
    pub fn reading(&self) -> bool {
        self.reading
    }

    /// Answers an input: read on, or stop.
    pub fn answer(&mut self, reply: Reply, next: Next) {
        if next == Next::Stop {
            self.reading = false;
        }
        // A reader that is gone needs no answer.
        let _ = reply.send(next);
    }

    /// Shows a piece of text; streamed text waits for the end of its line.
    /// Control characters are made visible first: what a file, a command,
    /// the model or an MCP server wrote never drives the terminal.
    pub fn show(&mut self, mut piece: Piece) {
        if let std::borrow::Cow::Owned(text) = crate::printable::printable(&piece.text) {
            piece.text = text;
        }
        for line in self.partial.push(piece) {
            self.send(line);
        }
    }

    /// Shows `line` as if it had been typed at the prompt.
    pub fn echo(&mut self, line: &str) {
        self.show(Piece {
            stream: Stream::Err,
            text: format!("{PROMPT}{line}\n"),
        });
    }

    fn send(&mut self, piece: Piece) {
        if let Some(lines) = &self.lines {
            let _ = lines.send(piece);
        }
    }

    /// Prints what is left and waits for the reader (which must have been
    /// told to stop) and the printer to finish.
    pub fn finish(mut self) {
        if let Some(rest) = self.partial.end() {
            self.send(rest);
        }
        if let Some(reader) = self.reader.take() {
            let _ = reader.join();
        }
        // With the reader gone, rustyline's printer writes straight to the
        // terminal; closing the channel ends the printing thread.
        self.lines = None;
        if let Some(printer) = self.printer.take() {
            let _ = printer.join();
        }
    }
}

/// Cuts pieces of text into whole lines, holding back a line that has not
/// ended yet: the external printer ends every print with a newline.
#[derive(Debug, Default)]
struct WholeLines {
    partial: Option<Piece>,
}

impl WholeLines {
    /// The whole lines that `piece` completes, as one piece per stream.
    fn push(&mut self, piece: Piece) -> Vec<Piece> {
        let mut ready = Vec::new();
        let mut piece = match self.partial.take() {
            Some(mut partial) if partial.stream == piece.stream => {
                partial.text.push_str(&piece.text);
                partial
            }
            Some(partial) => {
                // Something else interrupts a streamed line: end it first.
                ready.push(ended(partial));
                piece
            }
            None => piece,
        };
        match piece.text.rfind('\n') {
            Some(end) if end + 1 == piece.text.len() => ready.push(piece),
            Some(end) => {
                let rest = piece.text.split_off(end + 1);
                self.partial = Some(Piece {
                    stream: piece.stream,
                    text: rest,
                });
                ready.push(piece);
            }
            None => self.partial = Some(piece),
        }
        ready
    }

    /// The line held back, ended.
    fn end(&mut self) -> Option<Piece> {
        self.partial.take().map(ended)
    }
}

fn ended(mut piece: Piece) -> Piece {
    piece.text.push('\n');
    piece
}

/// The reader thread: reads until told to stop or the shell is gone.
fn read_lines(
    history: &Path,
    printer: oneshot::Sender<Option<Printer>>,
    inputs: &mpsc::UnboundedSender<(Input, Reply)>,
) {
    // A lone Esc is Esc after a short wait, not a Meta prefix that eats the
    // next key.
    let config = Config::builder().max_history_size(HISTORY_SIZE).map(|b| {
        b.auto_add_history(true)
            .keyseq_timeout(Some(ESC_WAIT_MS))
            .build()
    });
    let editor = config.and_then(DefaultEditor::with_config);
    let mut editor = match editor {
        Ok(editor) => editor,
        Err(err) => {
            tracing::warn!(%err, "line editing is not available");
            let _ = printer.send(None);
            return;
        }
    };
    // A missing history file is a first run.
    let _ = editor.load_history(history);
    editor.bind_sequence(
        KeyEvent(KeyCode::Esc, Modifiers::NONE),
        EventHandler::Conditional(Box::new(Escape {
            inputs: inputs.clone(),
        })),
    );
    let external = editor
        .create_external_printer()
        .ok()
        .map(|p| Box::new(p) as Printer);
    let _ = printer.send(external);
    loop {
        let input = match editor.readline(PROMPT) {
            Ok(line) => Input::Line(line),
            Err(ReadlineError::Interrupted) => Input::Interrupt,
            // A SIGINT from outside while rustyline holds the handler.
            #[cfg(unix)]
            Err(ReadlineError::Signal(Signal::Interrupt)) => Input::Interrupt,
            Err(ReadlineError::Signal(Signal::Resize)) => continue,
            Err(ReadlineError::Eof) => Input::Eof,
            Err(err) => {
                tracing::warn!(%err, "reading the terminal failed");
                Input::Eof
            }
        };
        let (reply, next) = oneshot::channel();
        if inputs.send((input, reply)).is_err() {
            break;
        }
        match next.blocking_recv() {
            Ok(Next::Read | Next::ClearLine) => {}
            Ok(Next::Stop) | Err(_) => break,
        }
    }
    if let Err(err) = editor.save_history(history) {
        tracing::warn!(%err, path = %history.display(), "the shell history could not be saved");
    }
}

/// How long a lone Esc waits for the rest of an escape sequence (an arrow
/// key's bytes arrive together), in milliseconds.
const ESC_WAIT_MS: u16 = 30;

/// Esc while a line is being read: asks the shell (the cancel stack) and
/// clears the line when nothing was cancelled.
struct Escape {
    inputs: mpsc::UnboundedSender<(Input, Reply)>,
}

impl ConditionalEventHandler for Escape {
    fn handle(&self, _: &Event, _: RepeatCount, _: bool, _: &EventContext) -> Option<Cmd> {
        let (reply, next) = oneshot::channel();
        if self.inputs.send((Input::Escape, reply)).is_err() {
            return Some(Cmd::Noop);
        }
        Some(match next.blocking_recv() {
            Ok(Next::ClearLine) => Cmd::Kill(Movement::WholeBuffer),
            Ok(Next::Read) => Cmd::Noop,
            // The shell is leaving: end this read, so the reader stops
            // instead of waiting for a line nobody will take.
            Ok(Next::Stop) | Err(_) => Cmd::Interrupt,
        })
    }
}

/// The printing thread: prints each piece above the prompt, or plainly.
fn print_lines(mut printer: Option<Printer>, lines: &std_mpsc::Receiver<Piece>) {
    for piece in lines {
        if let Some(external) = &mut printer {
            // The text is kept for the fallback should the printer fail.
            if external.print(piece.text.clone()).is_ok() {
                continue;
            }
            printer = None;
        }
        crate::out::text(piece.stream == Stream::Out, &piece.text);
    }
}

#[cfg(test)]
mod tests;
