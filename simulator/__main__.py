"""`python -m payroll_sandbox serve` runs the same CLI as `payroll-sandbox`."""

import sys

from .tools.cli import main

sys.exit(main())
