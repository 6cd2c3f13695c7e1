"""`payroll-sandbox check-handler`: judge a customer's webhook handler the way the real
service will treat it (spec: Events, Delivery; Limits).

A sandbox makes realistic events: every type by the trigger, and real tasks run through
their scenarios. By default it is an in-process one (in_process.py: manual clock, a fresh
random seed per run, so no `ce-id` repeats between runs); with `sandbox_url` (`--url`) it
is a running server (remote.py), in a temporary tenant deleted at the end, so the events
carry that server's service profile, companies and scenarios. Both are an `EventSource`
(sources.py); the suite (checks.py) is the same. The checker sends the events itself
(delivering.py), as the dispatcher sends an attempt, because some checks need what the
sandbox never sends on its own: a wrong signature, none at all, a future event type,
extra fields.

`check_handler(url, secret=..., events=..., state_url=..., products=..., sandbox_url=...)`
(run.py) runs the fixed suite and returns a `Report` (report.py); the CLI prints it
(`Report.text()`, or `Report.to_dict()` as JSON) and exits 0 only when no check failed.
The pytest plugin can call the same function (or `check_handler_async` from a running
event loop).
"""

from .arguments import CheckerError, default_secret
from .checks import (BURST, CHECKS, DUPLICATE_DELIVERY, EVERY_EVENT_TYPE, EXTRA_FIELDS,
                     MISSING_SIGNATURE, NO_REDIRECT, OUT_OF_ORDER, STATE_URL, UNKNOWN_EVENT_TYPE,
                     WRONG_SIGNATURE)
from .report import FAIL, PASS, SKIP, CheckResult, Delivery, Report
from .run import check_handler, check_handler_async

__all__ = ["BURST", "CHECKS", "DUPLICATE_DELIVERY", "EVERY_EVENT_TYPE", "EXTRA_FIELDS", "FAIL",
           "MISSING_SIGNATURE", "NO_REDIRECT", "OUT_OF_ORDER", "PASS", "SKIP", "STATE_URL",
           "UNKNOWN_EVENT_TYPE", "WRONG_SIGNATURE", "CheckResult", "CheckerError", "Delivery",
           "Report", "check_handler", "check_handler_async", "default_secret"]
