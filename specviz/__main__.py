import sys

from specviz.workshop.cli import main

sys.exit(main())
