"""The installed `dal` command, driven as a user drives it: a subprocess in a fresh folder (issue 15's tests)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

DAL = Path(sys.executable).with_name("dal")  # the venv's installed entry point, not `python -m dal`


class Shell:
    """Run the installed `dal` in one folder, as a person at a terminal would (colour off, no DAL_STORE)."""

    def __init__(self, cwd: Path) -> None:
        self.cwd = cwd

    def __call__(self, *args: str, input: str | None = None, env: dict[str, str] | None = None,
                 timeout: float = 60) -> subprocess.CompletedProcess[str]:
        full = {k: v for k, v in os.environ.items() if k not in ("DAL_STORE", "FORCE_COLOR")}
        full["NO_COLOR"] = "1"
        full.update(env or {})
        return subprocess.run([str(DAL), *args], cwd=self.cwd, capture_output=True, text=True, input=input,
                              env=full, timeout=timeout)

    def sh(self, command: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
        """A shell pipeline with `dal` meaning the installed command (for `dal run x | head -2`)."""
        full = {k: v for k, v in os.environ.items() if k not in ("DAL_STORE", "FORCE_COLOR")}
        full.update(NO_COLOR="1", PATH=f"{DAL.parent}:{full.get('PATH', '')}")
        return subprocess.run(["bash", "-o", "pipefail", "-c", command], cwd=self.cwd, capture_output=True,
                              text=True, env=full, timeout=timeout)

    def write(self, name: str, text: str) -> Path:
        path = self.cwd / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        return path
