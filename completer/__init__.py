"""Offline whole-line code completion engine: bundle loading, per-document KV cache, beam search."""
