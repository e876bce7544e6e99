import sys

from fwkernels.cli import main

sys.exit(main())
