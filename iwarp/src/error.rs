//! Errors (placeholder)
