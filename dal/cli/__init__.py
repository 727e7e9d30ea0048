"""The `dal` command line."""
