import sys

from specviz.periphery.cli import main

sys.exit(main())
