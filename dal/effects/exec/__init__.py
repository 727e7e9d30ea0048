"""Running a checked plan: DAL's own executor, its redirections, and the entry points run_effect/execute_checked."""
