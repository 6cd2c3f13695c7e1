/* Following the task the login started: its steps are the task's own state (GET
 * /sdk/task/{id}: queued, processing, authenticated, final), never a timer; then the
 * last screen, with what the user can do next after a failure. */

import { api, close, closeDuringTask, finish, finishAtSignIn, handsOff, interaction, send } from "./flow-api.js";
import { HINTS, mayChooseAnother, operations, remember, screens, state } from "./flow-state.js";
import { brandColour, button, companyHero, companyTitle, el, icon, logo, reasonSentence,
         screen, t } from "./flow-ui.js";

/* Said when used (t() at each call): an autopilot's language comes after the import. */
function updates() { return {
  deposit: [t("Updating your direct deposit"), t("Direct deposit updated")],
  verify: [t("Getting your income and employment"), t("Income and employment received")],
  switch: [t("Updating your payment method"), t("Payment method updated")],
  present: [t("Getting your account details"), t("Account details received")],
  identify: [t("Getting your identity details"), t("Identity details received")],
  tax: [t("Getting your tax documents"), t("Tax documents received")]
}; }
function outcomes() { return {
  deposit: t("Your pay goes to your new account from your next paycheck."),
  verify: t("Your income and employment details are on their way to the app."),
  switch: t("Your new payment method is set."),
  present: t("Your account details are on their way to the app."),
  identify: t("Your identity details are on their way to the app."),
  tax: t("Your tax documents are on their way to the app.")
}; }

/* The steps of `task` as its state says them: queued (connecting), processing (signing
 * in; a verification step when the flow asked for one or the scenario waits for one),
 * authenticated (the update), final. Each {id, label, state: pending|active|done|failed}. */
function stepsOf(company, task, challenge) {
  var named = { company: company.name };
  var verify = !!challenge || (HINTS.mfaScenarios || []).indexOf(task.scenario) >= 0;
  var update = updates()[task.product] || [t("Finishing the update"), t("Update finished")];
  // Each step's words: while it runs, once done, and when the task failed there.
  var steps = [
    { id: "connect", labels: [t("Connecting to {company}", named), t("Connected to {company}", named),
                              t("Couldn't connect to {company}", named)] },
    { id: "signin", labels: [t("Signing in"), t("Signed in"), t("Couldn't sign in")] },
    verify ? { id: "mfa", labels: [challenge && challenge.type === "code" ? t("Checking your code") :
                                   t("Verifying your identity"), t("Identity verified"),
                                   t("Couldn't verify your identity")] } : null,
    { id: "update", labels: update.concat([t("Couldn't finish the update")]) },
    { id: "done", labels: [t("Finishing up"), t("All done"), t("Not finished")] }
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
                        "aria-label": t("Steps") });
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
    var said = { step: step.label };
    item.setAttribute("aria-label", { done: t("{step}, done", said), failed: t("{step}, didn't finish", said),
                                      active: t("{step}, in progress", said), pending: step.label }[step.state]);
  });
}

export function progress(company, created, challenge) {
  var taskId = created.id;
  var workflowId = created.taskWorkflow;
  state.pendingTask = taskId;
  state.left = false;
  state.tasks = [];
  var first = { id: taskId, status: "queued", authenticated: false, product: operations()[0] || "",
                scenario: null };
  var steps = stepsOf(company, first, challenge);
  var list = stepList(steps);
  var status = el("p", { "class": "sr-only", "data-testid": "task-status", role: "status",
                         text: steps[0].label + "…" });
  var bar = el("div", { "class": "meter-bar" });
  var meter = el("div", { "class": "meter", role: "progressbar", "aria-label": t("Connection progress"),
                          "aria-valuemin": "0", "aria-valuemax": "100", "aria-valuenow": "5" }, [bar]);
  var orbit = el("div", { "class": "orbit", "aria-hidden": "true", style: { "--brand": brandColour(company) } },
                 [el("span", { "class": "glow" }), logo(company, "lg")]);
  var count = el("p", { "class": "hint center", "data-testid": "task-count", hidden: "hidden" });
  var latency = el("div", { "class": "notice", "data-testid": "high-latency", role: "status",
                            hidden: "hidden" }, [
    el("strong", { text: t("This is taking longer than usual") }),
    el("span", { text: t("You can keep waiting, or close this window: the connection carries on " +
                         "and the app tells you how it ends.") }),
    button("secondary", t("Close and carry on"), function () { closeDuringTask(); },
           { "data-testid": "latency-close" })]);
  screen("progress", "Connecting", [
    el("div", { "class": "hero" }, [orbit, companyTitle(company, t("Connecting to {company}")),
      el("p", { "class": "lead", text: t("This usually takes less than a minute. Please keep this window open.") })]),
    meter, list, count, latency, status
  ], { onClose: closeDuringTask, confirmExit: true });
  var spoken = status.textContent;
  var shown = taskId;
  var handedOff = false;
  function show(task) {
    if (task.id !== shown) {  // the workflow's next task: its own steps
      shown = task.id;
      list.textContent = "";
    }
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
  /* What the host hears of each task: Started Task once each (a task a `finish` option
   * held back appears when it starts), and every task at the flow's end. */
  function announce(tasks) {
    tasks.forEach(function (task) {
      var known = state.tasks.filter(function (one) { return one.taskId === task.id; })[0];
      if (!known) {
        known = { taskId: task.id, product: task.product };
        state.tasks.push(known);
        interaction("Started Task", { taskId: task.id, product: task.product });
      }
      known.status = task.status;
      if (task.reason) { known.reason = task.reason; } else { delete known.reason; }
    });
  }
  function poll() {
    if (state.left || state.ended) { return; }
    api("GET", "/sdk/workflow/" + encodeURIComponent(workflowId)).then(function (json) {
      if (state.left || state.ended) { return; }
      var workflow = json.data;
      var tasks = workflow.tasks;
      announce(tasks);
      var running = tasks.filter(function (one) { return one.status !== "completed" && one.status !== "failed"; });
      var current = running[0] || tasks[tasks.length - 1];
      state.pendingTask = current.id;
      if (tasks.length > 1 || workflow.pending) {
        count.hidden = false;
        count.textContent = t("Task {number} of {total}", { number: tasks.indexOf(current) + 1,
                                                             total: tasks.length + workflow.pending });
      }
      show(current);
      if (current.authenticated && handsOff("authentication-success") && !handedOff) {
        // The host shows its own success view: the flow ends at sign-in (facts 13), before
        // the final outcome, so the user is no longer connected to the task.
        handedOff = true;
        return finishAtSignIn(taskId);
      }
      if (current.highLatency) {
        if (handsOff("high-latency")) {
          return closeDuringTask({ handoff: "high-latency" });
        }
        if (latency.hidden) { latency.hidden = false; interaction("Viewed High Latency Page", { taskId: current.id }); }
      } else { latency.hidden = true; }
      if (current.meta && current.meta.dataRequest && !state.asked) {
        // Data only the app holds (a card for a pay-link switch): the host's onDataRequest.
        state.asked = true;
        send("data-request", { taskId: current.id, fields: current.meta.dataRequest.fields });
      }
      if (!running.length && !workflow.pending) {
        orbit.classList.add("stopped");
        return done(company, tasks, challenge);
      }
      setTimeout(poll, 300);
    }).catch(function () { setTimeout(poll, 1000); });
  }
  poll();
}

// -- the end -----------------------------------------------------------------------------

function nextSteps() { return {
  retry: [t("Try again"), "retry"],
  "another-card": [t("Use another card"), "another-card"],
  manual: [t("Set up manually"), "manual"],
  amount: [t("Choose another amount"), "change-amount"]
}; }

/* The workflow is over. Success when every task completed: the user's Done finishes
 * with the first task's id (the one the sign-in started; data.tasks names them all).
 * Otherwise the first failed task's screen, whose close carries its reason and id. */
function done(company, tasks, challenge) {
  state.pendingTask = null;
  tasks.forEach(function (each) {
    interaction(each.status === "completed" ? "Task Completed" : "Task Failed",
                each.status === "completed" ? { taskId: each.id } :
                  { taskId: each.id, reason: each.reason || "unknown-failure" });
  });
  var task = tasks.filter(function (one) { return one.status === "failed"; })[0] || tasks[0];
  var success = task.status === "completed";
  var summary = el("div", { "class": "card" }, [stepList(stepsOf(company, task, challenge), true)]);
  if (success) {
    var end = function () { finish(task.id); };
    return screen("done", "Success", [
      companyHero(company, el("h1", { "data-testid": "outcome", text: t("You're all set") }), null,
                  { badge: "success", band: false }),
      el("p", { "class": "lead center", "data-testid": "outcome-detail",
                text: t("{company} is connected.", { company: company.name }) }),
      outcomes()[task.product] ? el("p", { "class": "hint center", text: outcomes()[task.product] }) : null,
      summary,
      el("div", { "class": "actions" }, [
        button("primary", t("Done"), end, { "data-testid": "done" })])
    ], { onClose: end });
  }
  var reason = task.reason || "unknown-failure";
  var next = (HINTS.nextSteps || {})[reason] || "retry";
  var fractional = state.distribution && state.distribution.type !== "total";
  if (reason === "product-not-supported" && fractional) { next = "amount"; }
  if (next === "another-card" && task.product !== "switch" && !state.paymentMethod) { next = "retry"; }
  var closer = function (kind) {
    return button(kind, t("Close"), function () { close(reason, { taskId: task.id }); }, { "data-testid": "done" });
  };
  var actions = next === "close" ? [closer("primary")] : [];
  var retry = function () { interaction("Retried", { taskId: task.id }); screens.login(company, state.loginOptions); };
  var go = {
    retry: retry,
    "another-card": function () { interaction("Retried", { taskId: task.id, with: "another card" }); screens.addCard(company); },
    manual: function () { remember(function () { done(company, tasks, challenge); }); screens.manualFallback(company, true); },
    amount: function () { interaction("Retried", { taskId: task.id, with: "another amount" }); screens.depositSetup(company); }
  };
  var offered = nextSteps();
  if (offered[next]) {
    actions.push(button("primary", offered[next][0], go[next], { "data-testid": offered[next][1] }));
  }
  if (next !== "retry" && next !== "close") {
    actions.push(button("secondary", t("Try again"), retry, { "data-testid": "retry" }));
  }
  if (mayChooseAnother(state.loginOptions)) {
    actions.push(button("secondary", t("Choose another company"), screens.chooseAnother, { "data-testid": "choose-another" }));
  }
  if (next !== "close") { actions.push(closer(actions.length ? "plain" : "primary")); }
  screen("done", "Not Connected", [
    companyHero(company, el("h1", { "data-testid": "outcome", text: t("We couldn't finish") }), null,
                { badge: "failure", band: false }),
    el("p", { "class": "lead center", "data-testid": "outcome-detail", text: reasonSentence(reason, company, task.meta) }),
    summary,
    el("div", { "class": "actions" }, actions)
  ], { closeReason: reason });
}
