//! The registry (T2): tools in a stable order, each with its compiled schema.

use std::collections::HashMap;
use std::sync::Arc;

use super::definition::{Tool, ToolDefinition};

/// Why a tool could not be registered.
#[derive(Debug, thiserror::Error)]
pub enum RegistryError {
    /// Two tools with one name; the second is refused. Not retryable.
    #[error("a tool named '{0}' is already registered")]
    Duplicate(String),
    /// The tool's input schema is not a valid JSON Schema. Not retryable.
    #[error("tool '{name}' has an invalid input schema: {message}")]
    BadSchema {
        /// The tool.
        name: String,
        /// What the schema compiler said.
        message: String,
    },
}

pub(super) struct Registered {
    pub tool: Arc<dyn Tool>,
    pub validator: jsonschema::Validator,
}

/// Tools by name, in registration order.
#[derive(Default)]
pub struct ToolRegistry {
    tools: Vec<Registered>,
    by_name: HashMap<String, usize>,
}

impl std::fmt::Debug for ToolRegistry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.by_name.keys()).finish()
    }
}

impl ToolRegistry {
    /// An empty registry.
    pub fn new() -> Self {
        Self::default()
    }

    /// A registry holding the built-in tools.
    pub fn with_builtins() -> Self {
        Self::with_builtins_bounded(super::FileLimits::default())
    }

    /// A registry holding the built-in tools, the file and search tools
    /// bounded by `limits`.
    pub fn with_builtins_bounded(limits: super::FileLimits) -> Self {
        let mut registry = Self::new();
        for tool in super::builtin_tools_with(limits) {
            // The built-ins have distinct names and valid schemas; the unit
            // tests prove it, so a failure here is a programming error.
            if let Err(err) = registry.register(tool) {
                tracing::error!(%err, "built-in tool refused");
            }
        }
        registry
    }

    /// Adds a tool at the end of the order. Refuses a duplicate name or a
    /// schema that does not compile.
    pub fn register(&mut self, tool: Arc<dyn Tool>) -> Result<(), RegistryError> {
        let definition = tool.definition();
        let name = definition.name.clone();
        if self.by_name.contains_key(&name) {
            return Err(RegistryError::Duplicate(name));
        }
        let validator = jsonschema::validator_for(&definition.input_schema).map_err(|err| {
            RegistryError::BadSchema {
                name: name.clone(),
                message: err.to_string(),
            }
        })?;
        self.by_name.insert(name, self.tools.len());
        self.tools.push(Registered { tool, validator });
        Ok(())
    }

    /// The tool with this name.
    pub fn get(&self, name: &str) -> Option<&Arc<dyn Tool>> {
        self.entry(name).map(|entry| &entry.tool)
    }

    pub(super) fn entry(&self, name: &str) -> Option<&Registered> {
        self.by_name.get(name).map(|&i| &self.tools[i])
    }

    /// Every tool, in registration order.
    pub fn tools(&self) -> impl Iterator<Item = &Arc<dyn Tool>> {
        self.tools.iter().map(|entry| &entry.tool)
    }

    /// Every definition, in registration order.
    pub fn definitions(&self) -> impl Iterator<Item = &ToolDefinition> {
        self.tools.iter().map(|entry| entry.tool.definition())
    }

    /// The definitions an allow-list admits, in registration order; system
    /// tools are always kept. `None` admits everything.
    pub fn allowed<'a>(
        &'a self,
        allow: Option<&'a [String]>,
    ) -> impl Iterator<Item = &'a ToolDefinition> + 'a {
        self.definitions().filter(move |def| admits(allow, def))
    }

    /// The number of tools.
    pub fn len(&self) -> usize {
        self.tools.len()
    }

    /// Whether no tool is registered.
    pub fn is_empty(&self) -> bool {
        self.tools.is_empty()
    }
}

/// Whether an allow-list admits a definition: system tools always pass.
pub(super) fn admits(allow: Option<&[String]>, def: &ToolDefinition) -> bool {
    def.system || allow.is_none_or(|names| names.iter().any(|n| n == &def.name))
}
