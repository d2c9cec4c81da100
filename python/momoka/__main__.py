from momoka.cli import main

raise SystemExit(main())
