"""The hosted flow's script modules: flow.js (routes/sdk.py) imports them from /sdk/, so the
page's Content-Security-Policy (script-src 'self') lets them load."""

from __future__ import annotations

from ..operations import serve_file

# static/<name> -> what it holds (static/flow.js says how they fit together).
FLOW_MODULES = {
    "flow-state.js": "what one run of the flow knows",
    "flow-api.js": "its messages to the parent page and its calls to the sandbox",
    "flow-ui.js": "its words, elements, screen frame and logos",
    "flow-company.js": "its screens for finding the company",
    "flow-signin.js": "its sign-in screens",
    "flow-progress.js": "its progress and last screens",
    "flow-deeplink.js": "the screens of the deeplink steps",
    "flow-autopilot.js": "the autopilot that plays a bound user's steps",
}

for _name, _what in FLOW_MODULES.items():
    serve_file(f"/sdk/{_name}", f"The hosted flow's script module: {_what}",
               "application/javascript")
