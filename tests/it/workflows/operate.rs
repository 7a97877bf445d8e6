//! Operate delegation: the `workflow` tool.
