"""The wall: what a program may see and do, enforced by the operating system (bubblewrap, seccomp, limits)."""
