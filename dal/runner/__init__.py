"""Runner: one run of a script end to end — policy, effects and their journal, receipts, the store."""
