"""Eval: values, builtins, the closure compiler and the step-metered runtime."""
