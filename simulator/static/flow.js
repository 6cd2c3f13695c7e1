/* The hosted flow of the payroll-sandbox client SDK.
 *
 * 1. Ask the parent page for the public token (<prefix>-request-public-token) and accept
 *    only the answer carrying this page's handshake id (#hId=...).
 * 2. POST /sdk/session: the sandbox checks the token matches the configuration, resolves
 *    the deeplink (invalid-company-id) and says whether the configured tasks can start at
 *    the deeplinked company (`refusal`: maintenance per product, disabled). A company the
 *    user picks is checked the same way (POST /sdk/company).
 * 3. Screens: welcome, company search (popular employers and payroll providers before the
 *    user types, POST /sdk/popular), login, MFA (code or security question), progress,
 *    done, plus the deeplink steps account, direct-deposit-setup, manual-fallback,
 *    generate-deposit-pdf and add-card. Logos are the sandbox's (GET /sdk/logo/{id}.svg).
 *    Logging in starts a real task; the page follows it on GET /task/{id} and its progress
 *    steps are the task's own state (queued, processing, authenticated, final), never a
 *    timer. The user ends the flow on the last screen: onFinish({taskId, handoff}) after a
 *    completed task, onClose({reason}) otherwise.
 * 4. Leaving before the task resolved (close button, page gone) is told to the sandbox
 *    (POST /sdk/leave): the task's events then carry user.connected false.
 *
 * The user reads plain sentences only (boot.messages, from the sandbox); reason and
 * error codes go to onClose and onInteraction payloads.
 *
 * ES modules (flow.html loads this one; each is served from /sdk/): this one starts the
 * flow and picks its first screen; flow-state.js holds what the run knows, flow-api.js
 * talks to the parent page and the sandbox, flow-ui.js draws; the screens are
 * flow-company.js, flow-signin.js, flow-progress.js and flow-deeplink.js.
 */

import { api, interaction, leave, send } from "./flow-api.js";
import { load as loadAutopilot } from "./flow-autopilot.js";
import { addCard, account, depositPdf, depositSetup, manualFallback } from "./flow-deeplink.js";
import { chooseAnother, chooseCompany, fail, openCompany, search, unavailable,
         welcome } from "./flow-company.js";
import { progress } from "./flow-progress.js";
import { login, resume } from "./flow-signin.js";
import { PREFIX, boot, config, hId, nav, remember, screens, state } from "./flow-state.js";
import { icon } from "./flow-ui.js";

Object.assign(screens, {
  search: search, chooseCompany: chooseCompany, openCompany: openCompany,
  unavailable: unavailable, chooseAnother: chooseAnother, fail: fail, login: login,
  progress: progress, addCard: addCard, manualFallback: manualFallback,
  depositPdf: depositPdf, depositSetup: depositSetup
});

window.addEventListener("message", function (event) {
  var message = event.data || {};
  if (event.source !== window.parent || message.event !== "sdk-" + PREFIX + "-public-token") { return; }
  var payload = message.payload || {};
  if (!hId || payload.handshakeId !== hId || state.token) { return; }
  state.token = payload.publicToken;
  state.parentOrigin = event.origin;
  loadAutopilot().then(start);
});

window.addEventListener("pagehide", function () { leave(); });

// -- start -------------------------------------------------------------------------------

function start() {
  api("POST", "/sdk/session", { config: config }).then(function (json) {
    var session = state.session = json.data;
    var company = session.company;
    var step = session.step;
    state.refusal = session.refusal;
    interaction("Initialized", { step: step });
    if (session.linkedAccount) {
      if (!session.refusal && session.linkedAccount.credentialsRequired === false) {
        return resume(company);
      }
      return openCompany(company, session.refusal, "login-company", { locked: true });
    }
    switch (step) {
      case "login-company":
        // A back button returns to company search unless the user is locked to the company.
        if (nav.showBackButton !== false) { remember(function () { search(false); }); }
        return openCompany(company, session.refusal, step,
                           { locked: nav.showBackButton === false });
      case "search-payroll": return search(true);
      case "welcome": return welcome();
      case "account": return account();
      case "direct-deposit-setup":
      case "manual-fallback":
      case "generate-deposit-pdf":
        // Spec: only login-company requires companyId; without one the user picks first.
        if (company) { return openCompany(company, session.refusal, step); }
        state.target = step;
        return search(false);
      case "add-card": return addCard(company);
      default: return search(false);
    }
  }).catch(function (error) { fail(error.code || "unknown"); });
}

/* A modal keeps the keyboard: Tab from the last control goes back to the first (and
 * Shift+Tab the other way), never out to the page behind the flow. */
document.addEventListener("keydown", function (event) {
  if (event.key !== "Tab") { return; }
  var controls = Array.prototype.filter.call(
    document.querySelectorAll(".modal button, .modal input, .modal select, .modal a[href], .modal summary"),
    function (node) { return !node.disabled && node.getClientRects().length > 0; });
  if (!controls.length) { return; }
  var active = document.activeElement;
  // From a heading (focused when a screen opens): the browser's order, unless no
  // control follows (or precedes) it.
  var beyond = function (position) {
    return controls.some(function (node) { return active.compareDocumentPosition(node) & position; });
  };
  if (!event.shiftKey && !beyond(Node.DOCUMENT_POSITION_FOLLOWING)) {
    event.preventDefault();
    controls[0].focus();
  } else if (event.shiftKey && !beyond(Node.DOCUMENT_POSITION_PRECEDING)) {
    event.preventDefault();
    controls[controls.length - 1].focus();
  }
});

// The configuration's look: theme.dark (real-service-facts 12).
if (config.theme && config.theme.dark) { document.documentElement.setAttribute("data-theme", "dark"); }

document.getElementById("foot").insertBefore(icon("lock"), document.getElementById("foot").firstChild);
if (boot.error) {
  fail(boot.error.code);
} else {
  send("request-public-token");
}
