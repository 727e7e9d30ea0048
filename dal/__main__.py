from dal.cli.main import main

raise SystemExit(main())
