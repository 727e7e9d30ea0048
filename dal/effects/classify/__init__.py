"""The check: which programs may run, what class each effect is, what it reads and writes, and why."""
