import sys

from sandbox.engine.worker import main

sys.exit(main())
