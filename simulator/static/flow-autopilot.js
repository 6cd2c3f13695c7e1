/* The autopilot: when the control plane bound one to the flow's user (PUT
 * /_sandbox/users/{identifier}/autopilot), the page plays the user's steps itself, on the
 * page's own controls, as a user would: search for the company and pick it, sign in,
 * answer the second factor, choose the split, and on the last screen press Done (or
 * Close). Each action waits `pause` seconds of the tenant's clock (GET /sdk/autopilot says
 * where it is), so on the manual clock the control plane's advance moves the screens on.
 * Nothing here runs for a user without an autopilot. */

import { api } from "./flow-api.js";
import { MESSAGES, app, config, state } from "./flow-state.js";
import { t } from "./flow-ui.js";

var LOOK_MS = 50;          // how often it looks for what a screen is waiting for
var CLOCK_MS = 100;        // how often it reads the tenant's clock while pausing
var GIVE_UP_MS = 15000;    // a control that never comes: the autopilot stops there

var plan = null;
var companyName = "";
var turn = 0;              // the screens drawn so far: an action is for the screen it saw

/* The user's autopilot, if any; a language of its own is the flow's from now on. */
export function load() {
  return api("GET", "/sdk/autopilot").then(function (json) {
    plan = json.data.autopilot;
    companyName = json.data.companyName || "";
    if (!plan) { return; }
    if (json.data.messages) {
      Object.assign(MESSAGES, { words: {} }, json.data.messages);  // reasons, errors, fallback, words
      config.language = plan.language;
      speak(plan.language);
    }
    state.onScreen = play;
  }).catch(function () { plan = null; });
}

/* flow.html's own words, as the sandbox wrote them for the configuration's language. */
function speak(language) {
  document.documentElement.setAttribute("lang", language);
  document.querySelector(".modal").setAttribute("aria-label", t("Connect your payroll"));
  document.querySelector(".sandbox-badge").textContent = t("Sandbox");
  var foot = document.getElementById("foot");
  foot.lastChild.textContent = t("Secure connection · payroll-sandbox");
}

function play(name) {
  var mine = ++turn;
  var step = STEPS[name];
  if (!step) { return; }
  pause(function () {
    if (mine !== turn) { return; }  // the screen changed meanwhile (the flow went on)
    step(mine);
  });
}

/* `then` after plan.pause seconds of the tenant's clock. */
function pause(then) {
  if (!plan.pause) { return then(); }
  var start = null;
  (function tick() {
    api("GET", "/sdk/autopilot").then(function (json) {
      if (start === null) { start = json.data.now; }
      if (json.data.now - start >= plan.pause) { return then(); }
      setTimeout(tick, CLOCK_MS);
    }).catch(function () { setTimeout(tick, CLOCK_MS * 5); });
  })();
}

/* `then(node)` once `find()` gives a node, while the screen is still `mine`. */
function when(mine, find, then) {
  var until = Date.now() + GIVE_UP_MS;
  (function look() {
    if (mine !== turn) { return; }
    var node = find();
    if (node) { return then(node); }
    if (Date.now() < until) { setTimeout(look, LOOK_MS); }
  })();
}

function byTestId(id) { return app.querySelector("[data-testid='" + id + "']"); }

function type(input, value) {
  input.value = value;
  input.dispatchEvent(new Event("input", { bubbles: true }));
}

/* Out of the flow by its close button, confirming the exit prompt when one asks. */
function leaveFlow() {
  var closer = document.querySelector("[data-testid='close']");
  if (!closer) { return; }
  closer.click();
  // The exit prompt opens at once (unless the host asked for the exit-prompt handoff).
  var confirm = document.querySelector("[data-testid='exit-confirm']");
  if (confirm) { confirm.click(); }
}

var STEPS = {
  welcome: function () { byTestId("continue").click(); },
  account: function () { app.querySelector(".actions button").click(); },
  search: function (mine) {
    var input = byTestId("search");
    type(input, companyName);
    when(mine, function () {
      return app.querySelector("[data-testid='results'] [data-company='" + plan.company + "']") ||
        app.querySelector("[data-testid='results'] .empty");
    }, function (found) {
      if (found.getAttribute("data-company")) { return found.click(); }
      // Not among what the search finds (a configured search that leaves it out): the
      // user cannot pick it, so the flow ends as theirs would.
      leaveFlow();
    });
  },
  login: function (mine) {
    type(byTestId("username"), plan.username);
    type(byTestId("password"), plan.password);
    byTestId("submit").click();
    // A refused sign-in stays on this screen with its message: the user gives up.
    when(mine, function () {
      var error = byTestId("login-error");
      return error && error.textContent && !byTestId("submit").disabled ? error : null;
    }, function () { leaveFlow(); });
  },
  "mfa-code": mfa,
  "security-question": mfa,
  "direct-deposit-setup": function () {
    var split = plan.distribution || { type: "total" };
    var kind = byTestId("distribution-type");
    var offered = Array.prototype.map.call(kind.options, function (o) { return o.value; });
    kind.value = offered.indexOf(split.type) >= 0 ? split.type : offered[0];
    kind.dispatchEvent(new Event("change", { bubbles: true }));
    if (split.amount !== undefined) { type(byTestId("distribution-amount"), String(split.amount)); }
    byTestId("continue").click();
  },
  "generate-deposit-pdf": function () { byTestId("deposit-pdf").click(); leaveFlow(); },
  "manual-fallback": leaveFlow,
  unavailable: function () {
    var buttons = app.querySelectorAll(".actions button");
    buttons[buttons.length - 1].click();  // Close: the reason goes to the host
  },
  error: function () { byTestId("done").click(); },
  done: function () { byTestId("done").click(); }  // Done after a success, else Close
};

function mfa() {
  type(byTestId("mfa-answer"), plan.mfa);
  byTestId("mfa-submit").click();
}
