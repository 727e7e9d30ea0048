"""Resolve: names, arity, loop/return placement and unbounded-loop warnings, before anything runs."""

from dal.resolve.resolver import Resolution, resolve

__all__ = ["Resolution", "resolve"]
