"""The module customers import (`from payroll_sandbox.testing import Sandbox, ...`): the
customer kit's test clients and receivers, as `payroll_sandbox.kit.testing` has them."""

from .kit.testing import *  # noqa: F401,F403
from .kit.testing import __all__  # noqa: F401
