"""The console tests' fixtures: see console_helpers.py."""

from console_helpers import browser, console, workspace  # noqa: F401  pytest finds fixtures by name here
