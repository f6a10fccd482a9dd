//! STags (placeholder)
