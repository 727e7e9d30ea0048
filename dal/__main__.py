"""The `dal` command line (`python -m dal`).

`python -m` puts the current directory first on sys.path, and the current directory is usually the workspace,
where a script may write files: a `tomllib.py` or `shutil.py` there would be imported, by this process, the
operator's, the first time DAL imports that module lazily. So it is dropped before anything else is imported
(the `dal` package itself is found through its own __path__ from here on). `python -P -m dal` (Python 3.11+)
never adds it; a `dal/` folder in the current directory is imported by `python -m dal` itself, before this
file runs: use the `dal` command, or `python -P` (docs/policy.md, "Running DAL")."""
import os
import sys

if not sys.flags.safe_path and sys.path and sys.path[0] in ("", os.getcwd()):
    del sys.path[0]

from dal.cli.entry import main  # noqa: E402

raise SystemExit(main())
