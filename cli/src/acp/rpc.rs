//! JSON-RPC 2.0 as the Agent Client Protocol frames it: one JSON object per
//! line on stdin and stdout. Parsing and printing only; no I/O.

use serde_json::{Value, json};

/// The request is not JSON.
pub const PARSE_ERROR: i64 = -32700;
/// JSON, but not a request, a notification or a response.
pub const INVALID_REQUEST: i64 = -32600;
/// No such method.
pub const METHOD_NOT_FOUND: i64 = -32601;
/// The method's parameters are wrong.
pub const INVALID_PARAMS: i64 = -32602;
/// cadre could not do it.
pub const INTERNAL_ERROR: i64 = -32603;
/// ACP: the agent needs `authenticate` first.
pub const AUTH_REQUIRED: i64 = -32000;
/// ACP: no such session (or file).
pub const RESOURCE_NOT_FOUND: i64 = -32002;

/// A message from the client.
#[derive(Debug, Clone, PartialEq)]
pub enum Incoming {
    /// A call the client waits on.
    Request {
        /// Its id, echoed in the answer (a number or a string).
        id: Value,
        /// The method.
        method: String,
        /// Its parameters (`null` when absent).
        params: Value,
    },
    /// A call nobody answers (`session/cancel`).
    Notification {
        /// The method.
        method: String,
        /// Its parameters.
        params: Value,
    },
    /// The client's answer to one of cadre's requests.
    Response {
        /// The id cadre gave it.
        id: Value,
        /// The result, or the client's error.
        outcome: Result<Value, RpcError>,
    },
}

/// A JSON-RPC error object.
#[derive(Debug, Clone, PartialEq)]
pub struct RpcError {
    /// One of the codes above.
    pub code: i64,
    /// For people.
    pub message: String,
}

impl RpcError {
    /// An error with `code` and `message`.
    pub fn new(code: i64, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
        }
    }

    /// Wrong parameters.
    pub fn params(message: impl Into<String>) -> Self {
        Self::new(INVALID_PARAMS, message)
    }

    /// cadre failed.
    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(INTERNAL_ERROR, message)
    }

    fn to_json(&self) -> Value {
        json!({"code": self.code, "message": self.message})
    }
}

/// Reads one line. An error carries what to answer (with a `null` id).
pub fn parse(line: &str) -> Result<Incoming, RpcError> {
    let value: Value = serde_json::from_str(line)
        .map_err(|e| RpcError::new(PARSE_ERROR, format!("not JSON: {e}")))?;
    let Value::Object(mut object) = value else {
        return Err(RpcError::new(INVALID_REQUEST, "a message is a JSON object"));
    };
    let params = object.remove("params").unwrap_or(Value::Null);
    let id = object.remove("id");
    match (object.remove("method"), id) {
        (Some(Value::String(method)), Some(id)) => Ok(Incoming::Request { id, method, params }),
        (Some(Value::String(method)), None) => Ok(Incoming::Notification { method, params }),
        (Some(_), _) => Err(RpcError::new(INVALID_REQUEST, "'method' is a string")),
        (None, Some(id)) => {
            let outcome = match (object.remove("result"), object.remove("error")) {
                (_, Some(error)) => Err(RpcError::new(
                    error["code"].as_i64().unwrap_or(INTERNAL_ERROR),
                    error["message"].as_str().unwrap_or("the client failed"),
                )),
                (Some(result), None) => Ok(result),
                (None, None) => Ok(Value::Null),
            };
            Ok(Incoming::Response { id, outcome })
        }
        (None, None) => Err(RpcError::new(
            INVALID_REQUEST,
            "neither a request nor a response",
        )),
    }
}

/// The answer to request `id`.
pub fn result(id: &Value, result: Value) -> String {
    json!({"jsonrpc": "2.0", "id": id, "result": result}).to_string()
}

/// The error answer to request `id`.
pub fn error(id: &Value, error: &RpcError) -> String {
    json!({"jsonrpc": "2.0", "id": id, "error": error.to_json()}).to_string()
}

/// cadre's own request to the client.
pub fn request(id: &str, method: &str, params: Value) -> String {
    json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}).to_string()
}

/// A notification to the client.
pub fn notification(method: &str, params: Value) -> String {
    json!({"jsonrpc": "2.0", "method": method, "params": params}).to_string()
}
