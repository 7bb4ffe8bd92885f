import sys

from snaketrack.cli import main

sys.exit(main())
