//! What a step answers and what is handed forward: JSON answers parsed
//! (a fenced ```json block accepted) and checked against the step's
//! schema; outputs injected into templates capped, the larger ones
//! referenced by the file they are stored in under the run.

use std::path::Path;

use serde_json::Value;

/// Outputs larger than this are written to a file under the run, so a cap
/// can point to them.
pub const FILE_THRESHOLD: usize = 1024;

/// The file an instance's output is stored in when it is larger than
/// [`FILE_THRESHOLD`]: `<outputs dir>/<step>-<index>.txt`.
pub fn output_file(dir: &Path, step: &str, index: usize) -> std::path::PathBuf {
    dir.join(format!("{step}-{index}.txt"))
}

/// Why a step's answer was not accepted as its output. The attempt fails
/// with this as its reason; another attempt may answer better, so each is
/// as retryable as the step's `retries` allow.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum OutputError {
    /// A JSON step's answer is not JSON, whole or in a fenced block (the
    /// parser's complaint about the whole text, when it had one).
    /// Retryable: the model may answer in JSON next time.
    #[error("the answer is not JSON{}", .0.as_ref().map(|e| format!(" ({e})")).unwrap_or_default())]
    NotJson(Option<String>),
    /// The step's `output_schema` is not a valid JSON Schema. Not
    /// retryable: the workflow must change.
    #[error("the schema is invalid: {0}")]
    BadSchema(String),
    /// The answer does not match `output_schema`: up to five mismatches,
    /// each with where it is. Retryable: the model may answer better.
    #[error("the answer does not match output_schema: {}", .0.join("; "))]
    Mismatch(Vec<String>),
}

/// The JSON value of an answer: the whole text, or else the first fenced
/// code block in it.
pub fn parse_json(text: &str) -> Result<Value, OutputError> {
    let whole = serde_json::from_str::<Value>(text.trim());
    if let Ok(value) = whole {
        return Ok(value);
    }
    if let Some(start) = text.find("```") {
        let after = &text[start + 3..];
        let body_start = after.find('\n').map_or(after.len(), |i| i + 1);
        let body = &after[body_start..];
        if let Some(end) = body.find("```")
            && let Ok(value) = serde_json::from_str::<Value>(body[..end].trim())
        {
            return Ok(value);
        }
    }
    Err(OutputError::NotJson(whole.err().map(|e| e.to_string())))
}

/// Checks a value against a JSON Schema; the error lists what does not match.
pub fn check_schema(schema: &Value, value: &Value) -> Result<(), OutputError> {
    let validator =
        jsonschema::validator_for(schema).map_err(|e| OutputError::BadSchema(e.to_string()))?;
    let problems: Vec<String> = validator
        .iter_errors(value)
        .take(5)
        .map(|e| {
            let at = e.instance_path().to_string();
            if at.is_empty() {
                e.to_string()
            } else {
                format!("{e} at {at}")
            }
        })
        .collect();
    if problems.is_empty() {
        Ok(())
    } else {
        Err(OutputError::Mismatch(problems))
    }
}

/// One output as injected: whole when it fits `cap`, else its head and
/// where the whole of it is.
pub fn capped(output: &str, cap: usize, file: &Path, name: &str) -> String {
    if output.len() <= cap {
        return output.to_string();
    }
    let mut cut = cap.min(output.len());
    while !output.is_char_boundary(cut) {
        cut -= 1;
    }
    format!(
        "{}…\n[cadre: the output of {name} is {} bytes; the whole of it is in {}]",
        &output[..cut],
        output.len(),
        file.display()
    )
}

/// One element of a fan-out's outputs.
#[derive(Debug, Clone)]
pub struct Element<'a> {
    /// The instance's name (`review[3]`).
    pub name: String,
    /// Its output as text.
    pub text: &'a str,
    /// Its output as JSON, for a JSON step.
    pub json: Option<&'a Value>,
    /// Where it is stored when large.
    pub file: std::path::PathBuf,
}

/// A fan-out's outputs as a JSON array in item order; when the array is
/// larger than `cap`, the largest elements are replaced by a note naming
/// their file until it fits (or nothing large is left).
pub fn capped_array(elements: &[Element<'_>], cap: usize) -> String {
    let mut values: Vec<Value> = elements
        .iter()
        .map(|e| match e.json {
            Some(v) => v.clone(),
            None => Value::String(e.text.to_string()),
        })
        .collect();
    let render = |values: &[Value]| Value::Array(values.to_vec()).to_string();
    let mut text = render(&values);
    if text.len() <= cap {
        return text;
    }
    let mut order: Vec<usize> = (0..elements.len())
        .filter(|&i| elements[i].text.len() > FILE_THRESHOLD)
        .collect();
    order.sort_by_key(|&i| std::cmp::Reverse(elements[i].text.len()));
    for i in order {
        let e = &elements[i];
        values[i] = Value::String(format!(
            "[cadre: the output of {} is {} bytes; the whole of it is in {}]",
            e.name,
            e.text.len(),
            e.file.display()
        ));
        text = render(&values);
        if text.len() <= cap {
            break;
        }
    }
    text
}
