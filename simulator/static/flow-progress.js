/* Following the task the login started: its steps are the task's own state (GET
 * /sdk/task/{id}: queued, processing, authenticated, final), never a timer; then the
 * last screen, with what the user can do next after a failure. */

import { api, close, closeDuringTask, finish, interaction } from "./flow-api.js";
import { HINTS, mayChooseAnother, operations, remember, screens, state } from "./flow-state.js";
import { brandColour, button, companyHero, companyTitle, el, icon, logo, reasonSentence,
         screen } from "./flow-ui.js";

var UPDATES = {
  deposit: ["Updating your direct deposit", "Direct deposit updated"],
  verify: ["Getting your income and employment", "Income and employment received"],
  switch: ["Updating your payment method", "Payment method updated"],
  present: ["Getting your account details", "Account details received"],
  identify: ["Getting your identity details", "Identity details received"],
  tax: ["Getting your tax documents", "Tax documents received"]
};
var OUTCOMES = {
  deposit: "Your pay goes to your new account from your next paycheck.",
  verify: "Your income and employment details are on their way to the app.",
  switch: "Your new payment method is set.",
  present: "Your account details are on their way to the app.",
  identify: "Your identity details are on their way to the app.",
  tax: "Your tax documents are on their way to the app."
};

/* The steps of `task` as its state says them: queued (connecting), processing (signing
 * in; a verification step when the flow asked for one or the scenario waits for one),
 * authenticated (the update), final. Each {id, label, state: pending|active|done|failed}. */
function stepsOf(company, task, challenge) {
  var name = company.name;
  var verify = !!challenge || (HINTS.mfaScenarios || []).indexOf(task.scenario) >= 0;
  var update = UPDATES[task.product] || ["Finishing the update", "Update finished"];
  // Each step's words: while it runs, once done, and when the task failed there.
  var steps = [
    { id: "connect", labels: ["Connecting to " + name, "Connected to " + name,
                              "Couldn't connect to " + name] },
    { id: "signin", labels: ["Signing in", "Signed in", "Couldn't sign in"] },
    verify ? { id: "mfa", labels: [challenge && challenge.type === "code" ? "Checking your code" :
                                   "Verifying your identity", "Identity verified",
                                   "Couldn't verify your identity"] } : null,
    { id: "update", labels: update.concat(["Couldn't finish the update"]) },
    { id: "done", labels: ["Finishing up", "All done", "Not finished"] }
  ].filter(Boolean);
  var at = function (id) { return steps.map(function (s) { return s.id; }).indexOf(id); };
  var signingIn = verify ? at("mfa") : at("signin");
  var current;
  if (task.status === "queued") { current = 0; }
  else if (task.status === "completed") { current = steps.length; }
  else if (task.authenticated) { current = at("update"); }
  else if (task.status === "failed" && task.previousStatus === "queued") { current = 0; }
  else { current = signingIn; }
  return steps.map(function (step, i) {
    var stepState = i < current ? "done" : i > current ? "pending" :
      task.status === "failed" ? "failed" : "active";
    return { id: step.id, state: stepState,
             label: step.labels[{ done: 1, failed: 2 }[stepState] || 0] };
  });
}

function stepList(steps, compact) {
  var list = el("ol", { "class": "steps" + (compact ? " compact" : ""), "data-testid": "progress-steps",
                        "aria-label": "Steps" });
  showSteps(list, steps);
  return list;
}
/* The steps in place: the same items change state (so their marks can move); a step
 * that the task's state reveals (the scenario's verification) is put in its place. */
function showSteps(list, steps) {
  steps.forEach(function (step, i) {
    if (list.querySelector("[data-step='" + step.id + "']")) { return; }
    var item = el("li", { "data-step": step.id }, [el("span", { "class": "mark", "aria-hidden": "true" }),
                                                   el("span", { "class": "label" })]);
    list.insertBefore(item, list.children[i] || null);
  });
  steps.forEach(function (step) {
    var item = list.querySelector("[data-step='" + step.id + "']");
    if (!item || item.getAttribute("data-state") === step.state &&
        item.querySelector(".label").textContent === step.label) { return; }
    item.setAttribute("data-state", step.state);
    if (step.state === "active") { item.setAttribute("aria-current", "step"); }
    else { item.removeAttribute("aria-current"); }
    item.querySelector(".label").textContent = step.label;
    var mark = item.querySelector(".mark");
    mark.textContent = "";
    if (step.state === "done") { mark.appendChild(icon("check")); }
    if (step.state === "failed") { mark.appendChild(icon("x")); }
    var spoken = { done: ", done", failed: ", didn't finish", active: ", in progress", pending: "" }[step.state];
    item.setAttribute("aria-label", step.label + spoken);
  });
}

export function progress(company, created, challenge) {
  var taskId = created.id;
  state.pendingTask = taskId;
  state.left = false;
  var first = { id: taskId, status: "queued", authenticated: false, product: operations()[0] || "",
                scenario: null };
  var steps = stepsOf(company, first, challenge);
  var list = stepList(steps);
  var status = el("p", { "class": "sr-only", "data-testid": "task-status", role: "status",
                         text: steps[0].label + "…" });
  var bar = el("div", { "class": "meter-bar" });
  var meter = el("div", { "class": "meter", role: "progressbar", "aria-label": "Connection progress",
                          "aria-valuemin": "0", "aria-valuemax": "100", "aria-valuenow": "5" }, [bar]);
  var orbit = el("div", { "class": "orbit", "aria-hidden": "true", style: { "--brand": brandColour(company) } },
                 [el("span", { "class": "glow" }), logo(company, "lg")]);
  screen("progress", "Connecting", [
    el("div", { "class": "hero" }, [orbit, companyTitle(company, "Connecting to "),
      el("p", { "class": "lead", text: "This usually takes less than a minute. Please keep this window open." })]),
    meter, list, status
  ], { onClose: closeDuringTask });
  interaction("Started Task", { taskId: taskId });
  var spoken = status.textContent;
  function show(task) {
    var now = stepsOf(company, task, challenge);
    showSteps(list, now);
    var done = now.filter(function (s) { return s.state === "done"; }).length;
    var share = Math.max(5, Math.round(100 * (done + 0.5) / now.length));
    bar.style.width = Math.min(share, 100) + "%";
    meter.setAttribute("aria-valuenow", String(Math.min(share, 100)));
    var active = now.filter(function (s) { return s.state === "active"; })[0];
    var text = active ? active.label + "…" : "";
    if (text && text !== spoken) { status.textContent = spoken = text; }
  }
  function poll() {
    if (state.left || state.ended) { return; }
    api("GET", "/sdk/task/" + encodeURIComponent(taskId)).then(function (json) {
      if (state.left || state.ended) { return; }
      var task = json.data;
      show(task);
      if (task.status === "completed" || task.status === "failed") {
        orbit.classList.add("stopped");
        return done(company, task, challenge);
      }
      setTimeout(poll, 300);
    }).catch(function () { setTimeout(poll, 1000); });
  }
  poll();
}

// -- the end -----------------------------------------------------------------------------

var NEXT = {
  retry: ["Try again", "retry"],
  "another-card": ["Use another card", "another-card"],
  manual: ["Set up manually", "manual"],
  amount: ["Choose another amount", "change-amount"]
};

function done(company, task, challenge) {
  state.pendingTask = null;
  var success = task.status === "completed";
  interaction(success ? "Task Completed" : "Task Failed",
              success ? { taskId: task.id } : { taskId: task.id, reason: task.reason || "unknown-failure" });
  var summary = el("div", { "class": "card" }, [stepList(stepsOf(company, task, challenge), true)]);
  if (success) {
    var end = function () { finish(task.id); };
    return screen("done", "Success", [
      companyHero(company, el("h1", { "data-testid": "outcome", text: "You're all set" }), null,
                  { badge: "success", band: false }),
      el("p", { "class": "lead center", "data-testid": "outcome-detail", text: company.name + " is connected." }),
      OUTCOMES[task.product] ? el("p", { "class": "hint center", text: OUTCOMES[task.product] }) : null,
      summary,
      el("div", { "class": "actions" }, [
        button("primary", "Done", end, { "data-testid": "done" })])
    ], { onClose: end });
  }
  var reason = task.reason || "unknown-failure";
  var next = (HINTS.nextSteps || {})[reason] || "retry";
  var fractional = state.distribution && state.distribution.type !== "total";
  if (reason === "product-not-supported" && fractional) { next = "amount"; }
  if (next === "another-card" && task.product !== "switch" && !state.paymentMethod) { next = "retry"; }
  var actions = [];
  if (next === "close") {
    actions.push(button("primary", "Close", function () { close(reason); }, { "data-testid": "done" }));
  }
  var retry = function () { interaction("Retried", { taskId: task.id }); screens.login(company, state.loginOptions); };
  var go = {
    retry: retry,
    "another-card": function () { interaction("Retried", { taskId: task.id, with: "another card" }); screens.addCard(company); },
    manual: function () { remember(function () { done(company, task, challenge); }); screens.manualFallback(company, true); },
    amount: function () { interaction("Retried", { taskId: task.id, with: "another amount" }); screens.depositSetup(company); }
  };
  if (NEXT[next]) {
    actions.push(button("primary", NEXT[next][0], go[next], { "data-testid": NEXT[next][1] }));
  }
  if (next !== "retry" && next !== "close") {
    actions.push(button("secondary", "Try again", retry, { "data-testid": "retry" }));
  }
  if (mayChooseAnother(state.loginOptions)) {
    actions.push(button("secondary", "Choose another company", screens.chooseAnother, { "data-testid": "choose-another" }));
  }
  if (next !== "close") {
    actions.push(button(actions.length ? "plain" : "primary", "Close", function () { close(reason); },
                        { "data-testid": "done" }));
  }
  screen("done", "Not Connected", [
    companyHero(company, el("h1", { "data-testid": "outcome", text: "We couldn't finish" }), null,
                { badge: "failure", band: false }),
    el("p", { "class": "lead center", "data-testid": "outcome-detail", text: reasonSentence(reason, company, task.meta) }),
    summary,
    el("div", { "class": "actions" }, actions)
  ], { closeReason: reason });
}
