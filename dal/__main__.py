"""The `dal` command line."""
from dal.cli.entry import main

raise SystemExit(main())
