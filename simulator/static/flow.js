/* The hosted flow of the payroll-sandbox client SDK.
 *
 * 1. Ask the parent page for the public token (<prefix>-request-public-token) and accept
 *    only the answer carrying this page's handshake id (#hId=...).
 * 2. POST /sdk/session: the sandbox checks the token matches the configuration, resolves
 *    the deeplink (invalid-company-id) and says whether the configured tasks can start at
 *    the deeplinked company (`refusal`: maintenance per product, disabled). A company the
 *    user picks is checked the same way (POST /sdk/company).
 * 3. Screens: welcome, company search (or payroll providers), login, MFA (code or security
 *    question), progress, done, plus the deeplink steps account, direct-deposit-setup,
 *    manual-fallback, generate-deposit-pdf and add-card. Logging in starts a real task; the
 *    page follows it on GET /task/{id}. The user ends the flow on the last screen:
 *    onFinish({taskId, handoff}) after a completed task, onClose({reason}) otherwise.
 * 4. Leaving before the task resolved (close button, page gone) is told to the sandbox
 *    (POST /sdk/leave): the task's events then carry user.connected false.
 *
 * The user reads plain sentences only (boot.messages, from the sandbox); reason and
 * error codes go to onClose and onInteraction payloads.
 */
(function () {
  "use strict";
  var boot = JSON.parse(document.getElementById("bootstrap").textContent);
  var PREFIX = boot.prefix;
  var MESSAGES = boot.messages || { reasons: {}, errors: {}, fallback: "Something went wrong." };
  var hId = new URLSearchParams(window.location.hash.slice(1)).get("hId") || "";
  var config = boot.config || {};
  var nav = (config.theme && config.theme.navigationOptions) || {};
  var state = { token: null, parentOrigin: null, session: null, history: [], company: null,
                refusal: null, target: null, paymentMethod: null, distribution: null,
                pendingTask: null, left: false, ended: false };
  var app = document.getElementById("app");
  var LEAVE_WAIT_MS = 1500;
  var uid = 0;

  // -- talking to the parent ------------------------------------------------------------------

  function send(event, payload) {
    // Before the handshake nothing secret is sent, so any parent may hear the request.
    window.parent.postMessage({ event: PREFIX + "-" + event, payload: payload || {} },
                              state.parentOrigin || "*");
  }
  function interaction(name, value) { send("interaction", { name: name, value: value || {} }); }
  function finish(taskId) {
    // The SDK removes the flow on finish, as the real one does (transact.js).
    if (state.ended) { return; }
    state.ended = true;
    send("finish", { taskId: taskId, handoff: null });
  }
  function close(reason) {
    if (state.ended) { return; }
    state.ended = true;
    send("close", { reason: reason });
  }

  window.addEventListener("message", function (event) {
    var message = event.data || {};
    if (event.source !== window.parent || message.event !== "sdk-" + PREFIX + "-public-token") { return; }
    var payload = message.payload || {};
    if (!hId || payload.handshakeId !== hId || state.token) { return; }
    state.token = payload.publicToken;
    state.parentOrigin = event.origin;
    start();
  });

  // -- the sandbox API ----------------------------------------------------------------------

  function api(method, path, body) {
    return fetch(path, {
      method: method,
      headers: { "content-type": "application/json", "x-public-token": state.token || "" },
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
   * request outlive the page (pagehide, the iframe removed). */
  function leave() {
    if (!state.pendingTask || state.left) { return Promise.resolve(); }
    state.left = true;
    interaction("Left Flow", { taskId: state.pendingTask });
    return fetch("/sdk/leave", {
      method: "POST", keepalive: true,
      headers: { "content-type": "application/json", "x-public-token": state.token || "" },
      body: JSON.stringify({ taskId: state.pendingTask })
    }).catch(function () {});
  }
  window.addEventListener("pagehide", function () { leave(); });

  function closeDuringTask() {
    // The real SDK's reason for a flow closed while its task runs: task-pending.
    var waited = new Promise(function (resolve) { setTimeout(resolve, LEAVE_WAIT_MS); });
    Promise.race([leave(), waited]).then(function () { close("task-pending"); });
  }

  // -- words ----------------------------------------------------------------------------------

  function fill(sentence, company, meta) {
    var name = company && company.name ? company.name : "the company";
    var partner = meta && meta.managedBy && meta.managedBy.name ? meta.managedBy.name :
      "another provider";
    var text = sentence.replace(/\{company\}/g, name).replace(/\{partner\}/g, partner);
    return text.charAt(0).toUpperCase() + text.slice(1);
  }
  function reasonSentence(reason, company, meta) {
    return fill(MESSAGES.reasons[reason] || MESSAGES.reasons["unknown-failure"] ||
                MESSAGES.fallback, company, meta);
  }
  function errorSentence(code, company) {
    return fill(MESSAGES.errors[code] || MESSAGES.fallback, company);
  }

  // -- rendering ----------------------------------------------------------------------------

  function el(tag, attributes, children) {
    var node = document.createElement(tag);
    Object.keys(attributes || {}).forEach(function (key) {
      if (key === "onclick" || key === "oninput" || key === "onsubmit" || key === "onchange") {
        node[key] = attributes[key];
      } else if (key === "text") { node.textContent = attributes[key]; }
      else if (key === "style") {
        // Property by property: the page's Content-Security-Policy refuses style attributes.
        var look = attributes.style;
        Object.keys(look).forEach(function (name) { node.style[name] = look[name]; });
      }
      else { node.setAttribute(key, attributes[key]); }
    });
    (children || []).forEach(function (child) { if (child) { node.appendChild(child); } });
    return node;
  }

  /* A labelled field: the <label> names the control for screen readers and is clickable. */
  function field(label, control, hint) {
    var id = "field-" + (++uid);
    control.id = id;
    var children = [el("label", { "for": id, text: label })];
    if (hint) {
      var hintId = id + "-hint";
      control.setAttribute("aria-describedby", hintId);
      children.push(el("p", { "class": "hint", id: hintId, text: hint }));
    }
    children.push(control);
    return el("div", { "class": "field" }, children);
  }

  function alertBox(testId) {
    return el("p", { "class": "error", role: "alert", "data-testid": testId });
  }

  function screen(name, title, children, options) {
    options = options || {};
    document.getElementById("title").textContent = title;
    var back = document.getElementById("back");
    back.textContent = "";
    var canGoBack = options.back && nav.showBackButton !== false && state.history.length > 0;
    if (canGoBack) {
      back.appendChild(el("button", { type: "button", "data-testid": "back", "aria-label": "Back",
        text: nav.showBackButtonText === false ? "\u2190" : "\u2190 Back",
        onclick: function () { var previous = state.history.pop(); previous(); } }));
    }
    var closer = document.getElementById("close");
    closer.textContent = "";
    if (nav.showCloseButton !== false) {
      closer.appendChild(el("button", { type: "button", "data-testid": "close", "aria-label": "Close",
        text: "\u2715", onclick: options.onClose || function () {
          close(options.closeReason || "user-closed"); } }));
    }
    app.textContent = "";
    app.setAttribute("data-screen", name);
    children.forEach(function (child) { if (child) { app.appendChild(child); } });
    var focus = options.focus || app.querySelector("input, select") || app.querySelector("h1");
    if (focus) {
      if (focus.tagName === "H1") { focus.setAttribute("tabindex", "-1"); }
      focus.focus();
    }
    interaction("Viewed " + title + " Page");
  }

  function logo(company) {
    var branding = company.branding || {};
    return el("span", { "class": "logo", "aria-hidden": "true",
                        style: { background: branding.color || "#555" },
                        text: company.name.charAt(0) });
  }

  function companyHeading(company) {
    return el("div", { "class": "company" },
              [logo(company), el("h1", { "data-testid": "company-name", text: company.name })]);
  }

  function remember(render) { state.history.push(render); }

  // -- screens ------------------------------------------------------------------------------

  function fail(code, company) {
    interaction("Error", { code: code });
    screen("error", "Something went wrong", [
      el("h1", { text: "We can't continue" }),
      el("p", { "class": "error", "data-testid": "error", text: errorSentence(code, company) }),
      el("button", { type: "button", "class": "primary", text: "Close",
                     onclick: function () { close(code); } })
    ], { closeReason: code });
  }

  function welcome() {
    screen("welcome", "Welcome", [
      el("h1", { text: "Connect your payroll account" }),
      el("p", { text: "Sign in to your employer or payroll provider to continue." }),
      el("button", { type: "button", "class": "primary", "data-testid": "continue", text: "Continue",
        onclick: function () { remember(welcome); search(false); } })
    ]);
  }

  function search(payrollOnly) {
    var input = el("input", { type: "search", autocomplete: "off", "data-testid": "search",
                              placeholder: payrollOnly ? "For example, ADP" : "For example, Walmart" });
    var list = el("ul", { "class": "results", "data-testid": "results", "aria-label": "Results" });
    var pending = 0;
    input.oninput = function () {
      var query = input.value.trim();
      var ticket = ++pending;
      if (!query) { list.textContent = ""; return; }
      var body = { query: query, limit: 20 };
      if (config.scope) { body.scopes = [config.scope]; }
      if (payrollOnly) { body.tags = ["payroll-provider"]; }
      var products = operations();
      if (products.length === 1) { body.product = products[0]; }
      else if (products.length > 1) { body.products = products; }
      api("POST", "/company/search", body).then(function (json) {
        if (ticket !== pending) { return; }
        list.textContent = "";
        json.data.forEach(function (company) {
          list.appendChild(el("li", {}, [el("button", { type: "button", "data-company": company._id,
            onclick: function () {
              interaction("Selected Company", { companyId: company._id, name: company.name });
              remember(function () { search(payrollOnly); });
              chooseCompany(company._id);
            } }, [logo(company), el("span", { text: company.name }),
                  company.tags.indexOf("manual-deposits") >= 0 ?
                    el("span", { "class": "tag", text: "manual" }) : null])]));
        });
        if (!json.data.length) {
          list.appendChild(el("li", { "class": "hint", text: "No company found. Check the " +
            "spelling, or try the name of your payroll provider." }));
        }
      }).catch(function (error) {
        if (ticket !== pending) { return; }
        list.textContent = "";
        list.appendChild(el("li", { "class": "error", role: "alert", text: errorSentence(error.code) }));
        interaction("Search Failed", { code: error.code });
      });
    };
    screen("search", payrollOnly ? "Search Payroll" : "Search Company", [
      field(payrollOnly ? "Search for your payroll provider" : "Search for your employer", input),
      list], { back: true });
  }

  function operations() {
    return (config.tasks || []).map(function (t) { return t.operation || t.product; })
      .filter(function (o) { return !!o; });
  }

  /* A company the user picked: the sandbox says whether the configured tasks can start. */
  function chooseCompany(companyId) {
    var body = { companyId: companyId };
    if (config.tasks && config.tasks.length) { body.tasks = config.tasks; }
    api("POST", "/sdk/company", body).then(function (json) {
      openCompany(json.data.company, json.data.refusal, state.target || "login-company");
    }).catch(function (error) { fail(error.code); });
  }

  /* The screen for `step` at `company`: manual instructions where there is no online
   * sign-in, a refusal where the flow cannot start, else the step itself. */
  function openCompany(company, refusal, step, options) {
    state.company = company;
    state.refusal = refusal;
    if (step === "manual-fallback") { return manualFallback(company); }
    if (step === "generate-deposit-pdf") { return depositPdf(company); }
    if (company.tags.indexOf("manual-deposits") >= 0) { return manualFallback(company); }
    if (refusal) { return unavailable(company, refusal, options); }
    if (step === "direct-deposit-setup") { return depositSetup(company); }
    return login(company, options);
  }

  function unavailable(company, refusal, options) {
    options = options || {};
    interaction("Company Unavailable", { companyId: company._id, code: refusal.code });
    screen("unavailable", "Unavailable", [
      companyHeading(company),
      el("p", { "class": "error", "data-testid": "unavailable",
                text: errorSentence(refusal.code, company) }),
      el("button", { type: "button", "class": "primary", text: "Close",
                     onclick: function () { close(refusal.code); } })
    ], { back: !options.locked, closeReason: refusal.code });
  }

  function loginHint() {
    var items = [
      ["test-good", "signs in and succeeds"],
      ["test-bad", "wrong password: the sign-in is refused here"],
      ["test-failure", "signs in, then the update fails"],
      ["test-code-mfa", "asks for a verification code"],
      ["test-question-mfa", "asks a security question"],
      ["test-distribution-not-supported", "a percentage or fixed amount fails; the entire paycheck works"]
    ].map(function (pair) {
      return el("li", {}, [el("code", { text: pair[0] }), document.createTextNode(": " + pair[1])]);
    });
    return el("details", { "class": "hint", "data-testid": "login-hint" }, [
      el("summary", { text: "Testing? Use a sandbox username" }),
      el("ul", {}, items),
      el("p", { text: "Any password and any verification answer work. You can add @test.com " +
                      "to a username. test- followed by a scenario name runs that scenario." })
    ]);
  }

  function loginBody(company, username, password) {
    var body = { companyId: company._id, username: username, password: password };
    if (config.tasks && config.tasks.length) { body.tasks = config.tasks; }
    if (config.linkedAccount) { body.linkedAccount = config.linkedAccount; }
    if (state.paymentMethod) { body.paymentMethod = state.paymentMethod; }
    if (state.distribution) { body.distribution = state.distribution; }
    return body;
  }

  function login(company, options) {
    options = options || {};
    var username = el("input", { autocomplete: "username", "data-testid": "username",
                                 autocapitalize: "none", spellcheck: "false" });
    var password = el("input", { type: "password", autocomplete: "current-password",
                                 "data-testid": "password" });
    var message = alertBox("login-error");
    var submit = el("button", { type: "submit", "class": "primary", "data-testid": "submit",
                                text: "Sign in" });
    var form = el("form", { "class": "form", "aria-label": "Sign in to " + company.name },
                  [field("Username", username), field("Password", password), message, submit]);
    form.onsubmit = function (event) {
      event.preventDefault();
      if (!username.value.trim() || !password.value) {
        message.textContent = "Enter your username and password.";
        (username.value.trim() ? password : username).focus();
        return;
      }
      submit.disabled = true;
      message.textContent = "";
      interaction("Submitted Credentials", { companyId: company._id });
      var body = loginBody(company, username.value.trim(), password.value);
      api("POST", "/sdk/login", body).then(function (json) {
        if (json.data.mfa) {
          remember(function () { login(company, options); });
          return mfa(company, body, json.data.mfa);
        }
        progress(company, json.data.id);
      }).catch(function (error) {
        submit.disabled = false;
        interaction("Login Refused", { code: error.code });
        if (error.code === "company-under-maintenance" || error.code === "company-disabled" ||
            error.code === "product-not-offered") {
          return unavailable(company, { code: error.code }, options);
        }
        message.textContent = errorSentence(error.code, company);
        if (error.code === "credentials-refused") {
          password.value = "";
          username.focus();
          username.select();
        }
      });
    };
    screen("login", "Login", [
      companyHeading(company),
      el("p", { text: "Sign in with the username and password you use at " + company.name + "." }),
      form, loginHint()
    ], { back: !options.locked });
  }

  /* A second sign-in step (sandbox usernames test-code-mfa, test-question-mfa): any
   * answer passes; the login is sent again with it and the task starts. */
  function mfa(company, body, challenge) {
    var isCode = challenge.type === "code";
    var answer = el("input", isCode ?
      { inputmode: "numeric", autocomplete: "one-time-code", "data-testid": "mfa-answer" } :
      { autocomplete: "off", "data-testid": "mfa-answer" });
    var message = alertBox("mfa-error");
    var submit = el("button", { type: "submit", "class": "primary", "data-testid": "mfa-submit",
                                text: isCode ? "Verify" : "Continue" });
    var form = el("form", { "class": "form" }, [
      isCode ? field("Verification code", answer, challenge.prompt) :
               field(challenge.prompt, answer),
      message, submit]);
    form.onsubmit = function (event) {
      event.preventDefault();
      if (!answer.value.trim()) {
        message.textContent = isCode ? "Enter the code." : "Enter your answer.";
        answer.focus();
        return;
      }
      submit.disabled = true;
      interaction("Submitted MFA", { companyId: company._id, type: challenge.type });
      var again = {};
      Object.keys(body).forEach(function (key) { again[key] = body[key]; });
      again.mfaAnswer = answer.value.trim();
      api("POST", "/sdk/login", again).then(function (json) {
        progress(company, json.data.id);
      }).catch(function (error) {
        submit.disabled = false;
        message.textContent = errorSentence(error.code, company);
        interaction("MFA Refused", { code: error.code });
      });
    };
    screen(isCode ? "mfa-code" : "security-question",
           isCode ? "Verification" : "Security Question", [
      companyHeading(company),
      el("p", { text: isCode ? "For your security, " + company.name + " needs one more step." :
                "Answer your security question to continue." }),
      form
    ], { back: true });
  }

  function progress(company, taskId) {
    state.pendingTask = taskId;
    state.left = false;
    var status = el("p", { "class": "status", "data-testid": "task-status", role: "status",
                           text: "Connecting..." });
    screen("progress", "Connecting", [companyHeading(company), status,
      el("p", { "class": "hint", text: "This usually takes less than a minute. Please keep this window open." })],
      { onClose: closeDuringTask });
    interaction("Started Task", { taskId: taskId });
    function poll() {
      if (state.left || state.ended) { return; }
      api("GET", "/task/" + encodeURIComponent(taskId)).then(function (json) {
        if (state.left || state.ended) { return; }
        var task = json.data;
        status.textContent = task.status === "queued" ? "Waiting for " + company.name + "..." :
          task.authenticated ? "Signed in. Updating your account..." : "Signing in...";
        if (task.status === "completed" || task.status === "failed") { return done(company, task); }
        setTimeout(poll, 300);
      }).catch(function () { setTimeout(poll, 1000); });
    }
    poll();
  }

  function done(company, task) {
    state.pendingTask = null;
    var success = task.status === "completed";
    interaction(success ? "Task Completed" : "Task Failed",
                success ? { taskId: task.id } : { taskId: task.id, reason: task.reason || "unknown-failure" });
    if (success) {
      var end = function () { finish(task.id); };
      return screen("done", "Success", [
        el("h1", { "data-testid": "outcome", text: "You're all set" }),
        el("p", { "data-testid": "outcome-detail", text: company.name + " is connected." }),
        el("button", { type: "button", "class": "primary", "data-testid": "done", text: "Done",
                       onclick: end })
      ], { onClose: end });
    }
    var reason = task.reason || "unknown-failure";
    screen("done", "Not Connected", [
      el("h1", { "data-testid": "outcome", text: "We couldn't finish" }),
      el("p", { "data-testid": "outcome-detail", text: reasonSentence(reason, company, task.meta) }),
      el("button", { type: "button", "class": "primary", "data-testid": "done", text: "Close",
                     onclick: function () { close(reason); } }),
      el("button", { type: "button", "class": "secondary", "data-testid": "retry", text: "Try again",
                     onclick: function () { interaction("Retried", { taskId: task.id });
                                            login(company); } })
    ], { closeReason: reason });
  }

  function account() {
    api("GET", "/linked-accounts").then(function (json) {
      var items = json.data.map(function (linked) {
        // `company` is the _id here (the real list record nests it); every connector of
        // this sandbox is named after its company.
        var company = linked.company && typeof linked.company === "object" ? linked.company :
          { _id: linked.company, name: (linked.connector && linked.connector.name) || "Your employer" };
        var connected = linked.connected !== undefined ? linked.connected : linked.valid !== false;
        return el("li", {}, [el("button", { type: "button", "data-linked-account": linked._id,
          onclick: function () { remember(account); chooseCompany(company._id); } },
          [el("span", { text: company.name + (connected ? "" : " (needs you to sign in again)") })])]);
      });
      screen("account", "Account", [el("h1", { text: "Your connected accounts" }),
        items.length ? el("ul", { "class": "results" }, items) :
          el("p", { "class": "hint", text: "No connected account yet." }),
        el("button", { type: "button", "class": "primary", text: "Connect another",
                       onclick: function () { remember(account); search(false); } })]);
    }).catch(function (error) { fail(error.code); });
  }

  function depositSetup(company) {
    var capabilities = (company.connector && company.connector.capabilities) || {};
    var offered = capabilities.distributionTypes || ["total", "percent", "fixed"];
    var labels = { total: "My entire paycheck", percent: "A percentage of my paycheck",
                   fixed: "A fixed amount per paycheck" };
    var kind = el("select", { "data-testid": "distribution-type" },
      ["total", "percent", "fixed"].filter(function (t) { return offered.indexOf(t) >= 0; })
        .map(function (t) { return el("option", { value: t, text: labels[t] }); }));
    var amount = el("input", { type: "number", min: "1", step: "any", inputmode: "decimal",
                               "data-testid": "distribution-amount" });
    var amountField = field("Amount", amount);
    var amountLabel = amountField.querySelector("label");
    var message = alertBox("distribution-error");
    function sync() {
      amountField.hidden = kind.value === "total";
      amountLabel.textContent = kind.value === "percent" ? "Percentage (1 to 100)" : "Amount in dollars";
      amount.max = kind.value === "percent" ? "100" : "";
    }
    kind.onchange = sync;
    var form = el("form", { "class": "form" }, [
      field("How much of your pay should go to this account?", kind), amountField, message,
      el("button", { type: "submit", "class": "primary", "data-testid": "continue", text: "Continue" })]);
    form.onsubmit = function (event) {
      event.preventDefault();
      var value = Number(amount.value);
      if (kind.value !== "total" && (!(value > 0) || (kind.value === "percent" && value > 100))) {
        message.textContent = kind.value === "percent" ? "Enter a percentage from 1 to 100." :
          "Enter an amount greater than zero.";
        amount.focus();
        return;
      }
      state.distribution = kind.value === "total" ? { type: "total" } :
        { type: kind.value, amount: value };
      interaction("Chose Distribution", { companyId: company._id, type: kind.value });
      remember(function () { depositSetup(company); });
      login(company);
    };
    screen("direct-deposit-setup", "Direct Deposit", [companyHeading(company), form],
           { back: true, focus: kind });
    sync();
  }

  function manualFallback(company) {
    screen("manual-fallback", "Manual Instructions", [
      companyHeading(company),
      el("p", { "data-testid": "manual-instructions",
                text: company.name + " can't be connected online. Give your employer's payroll " +
                      "team your account and routing numbers, or a direct deposit form." }),
      el("button", { type: "button", "class": "primary", text: "Get a deposit form",
                     onclick: function () { remember(function () { manualFallback(company); });
                                            depositPdf(company); } })
    ], { back: true });
  }

  function depositPdf(company) {
    var link = el("a", { href: "/sdk/deposit-form.pdf?companyId=" + encodeURIComponent(company._id) +
                         "&publicToken=" + encodeURIComponent(state.token),
                         target: "_blank", "data-testid": "deposit-pdf", text: "Download the form (PDF)" });
    link.onclick = function (event) {
      // The host page opens it (<prefix>-open-url): an iframe may not open windows itself.
      event.preventDefault();
      interaction("Downloaded Deposit Form", { companyId: company._id });
      send("open-url", { url: new URL(link.getAttribute("href"), window.location.href).href });
    };
    screen("generate-deposit-pdf", "Deposit Form", [
      companyHeading(company),
      el("p", { text: "Fill in your account details, sign the form, and hand it to " +
                      company.name + "'s payroll team." }), link
    ], { back: true });
  }

  function addCard(company) {
    var number = el("input", { inputmode: "numeric", autocomplete: "cc-number",
                               "data-testid": "card-number" });
    var expiry = el("input", { autocomplete: "cc-exp", placeholder: "MM/YY", "data-testid": "card-expiry" });
    var message = alertBox("card-error");
    var form = el("form", { "class": "form" }, [field("Card number", number),
      field("Expiry date (MM/YY)", expiry), message,
      el("button", { type: "submit", "class": "primary", "data-testid": "continue", text: "Continue" })]);
    form.onsubmit = function (event) {
      event.preventDefault();
      var digits = number.value.replace(/\D/g, "");
      var parts = expiry.value.split("/");
      if (digits.length < 12 || parts.length !== 2) {
        message.textContent = "Check the card number and expiry date.";
        return;
      }
      state.paymentMethod = { type: "card", _id: "card-" + digits.slice(-4), title: "Card " + digits.slice(-4),
        lastFour: digits.slice(-4), brand: digits.charAt(0) === "4" ? "visa" : "card",
        expiry: "20" + parts[1].trim() + "-" + parts[0].trim().padStart(2, "0") + "-01T00:00:00Z" };
      interaction("Added Card", { lastFour: digits.slice(-4) });
      remember(function () { addCard(company); });
      if (company) { openCompany(company, state.refusal, "login-company"); }
      else { search(false); }
    };
    screen("add-card", "Add Card", [el("h1", { text: "Add a card" }), form]);
  }

  // -- start --------------------------------------------------------------------------------

  function start() {
    api("POST", "/sdk/session", { config: config }).then(function (json) {
      var session = state.session = json.data;
      var company = session.company;
      var step = session.step;
      state.refusal = session.refusal;
      interaction("Initialized", { step: step });
      if (session.linkedAccount) {
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

  if (boot.error) {
    fail(boot.error.code);
  } else {
    send("request-public-token");
  }
})();
