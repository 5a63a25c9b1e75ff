from podstate.cli import main

raise SystemExit(main())
