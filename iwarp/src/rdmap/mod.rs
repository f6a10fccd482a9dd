//! rdmap (placeholder)
