/* The flow's two channels: the parent page (postMessage; after the handshake, to the
 * parent's origin only) and the sandbox's API (fetch with the user's public token), and
 * the bodies the flow sends it. */

import { PREFIX, config, hId, operations, state } from "./flow-state.js";

var LEAVE_WAIT_MS = 1500;
// The most messages one POST /sdk/callbacks carries, and the largest body sent with
// keepalive (a browser refuses keepalive bodies past 64 KiB in flight).
var LEDGER_BATCH = 100;
var KEEPALIVE_BYTES = 60000;

// -- talking to the parent ---------------------------------------------------------------

export function send(event, payload) {
  payload = payload || {};
  if (event !== "request-public-token") { record(event, payload); }
  tell(event, payload);
}
function tell(event, payload) {
  // Before the handshake nothing secret is sent, so any parent may hear the request.
  window.parent.postMessage({ event: PREFIX + "-" + event, payload: payload },
                            state.parentOrigin || "*");
}
/* `promise`, or LEAVE_WAIT_MS if it takes longer: the flow never hangs on the sandbox. */
function atMost(promise) {
  var waited = new Promise(function (resolve) { setTimeout(resolve, LEAVE_WAIT_MS); });
  return Promise.race([promise, waited]);
}
function headers() {
  return { "content-type": "application/json", "x-public-token": state.token || "" };
}

/* The ledger of what the flow told the host (GET /_sandbox/sdk/callbacks): each message
 * is sent to the sandbox too, in order (one request at a time, what waits goes in the
 * next), once the handshake gave the flow its token. */
var ledger = { waiting: [], sending: null };
function record(event, payload) {
  if (!state.token) { return; }
  ledger.waiting.push({ event: event, payload: JSON.parse(JSON.stringify(payload)) });
  recorded();
}
/* Resolves once every message recorded so far reached the sandbox (or failed to). */
export function recorded() {
  if (ledger.sending) { return ledger.sending; }
  if (!ledger.waiting.length) { return Promise.resolve(); }
  var body = JSON.stringify({ flow: hId || "none", messages: ledger.waiting.splice(0, LEDGER_BATCH) });
  ledger.sending = fetch("/sdk/callbacks", {
    method: "POST", keepalive: body.length < KEEPALIVE_BYTES, headers: headers(), body: body
  }).catch(function () {}).then(function () {
    ledger.sending = null;
    return recorded();
  });
  return ledger.sending;
}
/* An interaction as the SDK reports it (real-service-facts 14): its name and value, with
 * the flow's language, customer and products. */
export function interaction(name, value) {
  var payload = { name: name, value: value || {}, language: config.language || "en" };
  var products = operations();
  if (products.length) { payload.product = products[0]; }
  if (products.length > 1) { payload.additionalProduct = products[1]; }
  if (config.customer && config.customer.name) { payload.customer = config.customer.name; }
  if (state.company) { payload.company = state.company.name; }
  send("interaction", payload);
}

/* Whether the host page shows this view itself (config.handoff, real-service-facts 13). */
export function handsOff(view) { return (config.handoff || []).indexOf(view) >= 0; }

/* The flow's end (real-service-facts 14): finish {taskId, handoff, data} or close
 * {reason, taskId?, handoff?, data}; `extra` adds taskId, handoff or data. */
function end(event, payload, extra) {
  if (state.ended) { return; }
  state.ended = true;
  var data = { tasks: state.tasks || [] };
  var message = Object.assign(payload, { data: data }, extra || {});
  // The host removes the flow when it hears the end: the ledger has it first.
  record(event, message);
  atMost(recorded()).then(function () { tell(event, message); });
}
export function finish(taskId, extra) {
  // The SDK removes the flow on finish, as the real one does (transact.js).
  end("finish", { taskId: taskId, handoff: null }, extra);
}
export function close(reason, extra) {
  end("close", { reason: reason }, extra);
}

// -- the sandbox API ---------------------------------------------------------------------

export function api(method, path, body) {
  return fetch(path, {
    method: method, headers: headers(),
    body: body === undefined ? undefined : JSON.stringify(body)
  }).catch(function () {
    var error = new Error("network");
    error.code = "network";
    throw error;
  }).then(function (response) {
    return response.json().catch(function () { return {}; }).then(function (json) {
      if (!response.ok) {
        var error = new Error((json.error && json.error.message) || response.statusText);
        error.code = (json.error && json.error.code) || "unknown";
        error.status = response.status;
        throw error;
      }
      return json;
    });
  });
}

/* The user left before the task resolved: tell the sandbox once. keepalive lets the
 * request outlive the page (pagehide, the iframe removed). `quiet`: the flow handed the
 * rest to the host page (no "Left Flow" interaction: the user did not close it). */
export function leave(quiet) {
  if (!state.pendingTask || state.left) { return Promise.resolve(); }
  state.left = true;
  if (!quiet) { interaction("Left Flow", { taskId: state.pendingTask }); }
  return fetch("/sdk/leave", {
    method: "POST", keepalive: true, headers: headers(),
    body: JSON.stringify({ taskId: state.pendingTask })
  }).catch(function () {});
}

/* The flow ends while its task runs: the sandbox hears first (for a moment at most) that
 * the user will not see the final outcome, so the task's events say user.connected false
 * (spec: User object), whichever way it ended (a close, a handoff). */
function afterLeaving(then, quiet) { atMost(leave(quiet)).then(then); }

export function closeDuringTask(extra) {
  // The real SDK's reason for a flow closed while its task runs: task-pending.
  afterLeaving(function () {
    close("task-pending", Object.assign({ taskId: state.pendingTask }, extra || {}));
  });
}

/* The authentication-success handoff (real-service-facts 13): the host shows its own
 * success view, the flow finishes at sign-in while the task runs. */
export function finishAtSignIn(taskId) {
  afterLeaving(function () {
    state.pendingTask = null;
    finish(taskId, { handoff: "authentication-success" });
  }, true);
}

// -- what the flow sends -----------------------------------------------------------------

export function searchFilters(payrollOnly) {
  var body = {};
  if (config.scope) { body.scopes = [config.scope]; }
  if (payrollOnly) { body.tags = ["payroll-provider"]; }
  // The configuration's enforced search (real-service-facts 12: `search`).
  var enforced = config.search || {};
  if (enforced.tags && enforced.tags.length) { body.tags = (body.tags || []).concat(enforced.tags); }
  if (enforced.excludedTags && enforced.excludedTags.length) { body.excludedTags = enforced.excludedTags; }
  var products = operations();
  if (products.length === 1) { body.product = products[0]; }
  else if (products.length > 1) { body.products = products; }
  return body;
}

export function loginBody(company, username, password) {
  var body = { companyId: company._id, username: username, password: password };
  if (config.tasks && config.tasks.length) { body.tasks = config.tasks; }
  if (config.linkedAccount) { body.linkedAccount = config.linkedAccount; }
  if (config.metadata) { body.metadata = config.metadata; }
  if (state.paymentMethod) { body.paymentMethod = state.paymentMethod; }
  if (state.distribution) { body.distribution = state.distribution; }
  return body;
}
