//! Language-model family: sampling, config and bad-file errors (no model download needed).
