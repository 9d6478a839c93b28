from agentix.cli import main

raise SystemExit(main())
