"""What every stage uses: spans and source lines, the error types, plain records, digests, JSON text,
file-system helpers, the big stack, the collector pause and process identity. Nothing here imports
another DAL package (docs/architecture.md)."""
