"""`python -m dal.repl`: the REPL without the main CLI (its flags are those of `dal repl`)."""

from dal.repl.main import main

raise SystemExit(main())
