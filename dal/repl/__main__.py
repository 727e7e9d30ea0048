"""`python -m dal.repl`: the REPL without the main CLI (its flags are those of `dal repl`)."""

from dal.cli.repl_cmd import main

raise SystemExit(main())
