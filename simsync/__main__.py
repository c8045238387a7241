from simsync.cli import main

raise SystemExit(main())
