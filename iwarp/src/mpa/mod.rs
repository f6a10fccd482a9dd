//! mpa (placeholder)
