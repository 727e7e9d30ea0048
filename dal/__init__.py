"""DAL: a small language for agent tool loops.

The runtime counts every step against a budget, checks every shell effect against a policy,
and leaves a durable receipt at every loop exit and at every run's end.
"""

__version__ = "0.1.0"
