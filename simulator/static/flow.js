/* The hosted flow of the payroll-sandbox client SDK.
 *
 * 1. Ask the parent page for the public token (<prefix>-request-public-token) and accept
 *    only the answer carrying this page's handshake id (#hId=...).
 * 2. POST /sdk/session: the sandbox checks the token matches the configuration and
 *    resolves the deeplink (invalid-company-id, maintenance, the linked account).
 * 3. Screens: welcome, company search (or payroll providers), login, progress, done,
 *    plus the deeplink steps account, direct-deposit-setup, manual-fallback,
 *    generate-deposit-pdf and add-card. Logging in starts a real task; the page
 *    follows it on GET /task/{id} and ends with onFinish({taskId, handoff}).
 */
(function () {
  "use strict";
  var boot = JSON.parse(document.getElementById("bootstrap").textContent);
  var PREFIX = boot.prefix;
  var hId = new URLSearchParams(window.location.hash.slice(1)).get("hId") || "";
  var config = boot.config || {};
  var nav = (config.theme && config.theme.navigationOptions) || {};
  var state = { token: null, parentOrigin: null, session: null, history: [], company: null,
                paymentMethod: null, metadata: null };
  var app = document.getElementById("app");

  // -- talking to the parent ------------------------------------------------------------------

  function send(event, payload) {
    // Before the handshake nothing secret is sent, so any parent may hear the request.
    window.parent.postMessage({ event: PREFIX + "-" + event, payload: payload || {} },
                              state.parentOrigin || "*");
  }
  function interaction(name, value) { send("interaction", { name: name, value: value || {} }); }
  function finish(taskId) { send("finish", { taskId: taskId, handoff: null }); }
  function close(reason) { send("close", { reason: reason }); }

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
    }).then(function (response) {
      return response.json().then(function (json) {
        if (!response.ok) {
          var error = new Error((json.error && json.error.message) || response.statusText);
          error.code = json.error && json.error.code;
          error.status = response.status;
          throw error;
        }
        return json;
      });
    });
  }

  // -- rendering ----------------------------------------------------------------------------

  function el(tag, attributes, children) {
    var node = document.createElement(tag);
    Object.keys(attributes || {}).forEach(function (key) {
      if (key === "onclick" || key === "oninput" || key === "onsubmit") { node[key] = attributes[key]; }
      else if (key === "text") { node.textContent = attributes[key]; }
      else { node.setAttribute(key, attributes[key]); }
    });
    (children || []).forEach(function (child) { if (child) { node.appendChild(child); } });
    return node;
  }

  function screen(name, title, children, options) {
    options = options || {};
    document.getElementById("title").textContent = title;
    var back = document.getElementById("back");
    back.textContent = "";
    var canGoBack = options.back && nav.showBackButton !== false && state.history.length > 0;
    if (canGoBack) {
      back.appendChild(el("button", { "data-testid": "back", "aria-label": "Back",
        text: nav.showBackButtonText === false ? "\u2190" : "\u2190 Back",
        onclick: function () { var previous = state.history.pop(); previous(); } }));
    }
    var closer = document.getElementById("close");
    closer.textContent = "";
    if (nav.showCloseButton !== false) {
      closer.appendChild(el("button", { "data-testid": "close", "aria-label": "Close", text: "\u2715",
        onclick: function () { close(options.closeReason || "user-closed"); } }));
    }
    app.textContent = "";
    app.setAttribute("data-screen", name);
    children.forEach(function (child) { if (child) { app.appendChild(child); } });
    interaction("Viewed " + title + " Page");
  }

  function logo(company) {
    var branding = company.branding || {};
    return el("span", { "class": "logo", style: "background:" + (branding.color || "#555"),
                        text: company.name.charAt(0) });
  }

  function remember(render) { state.history.push(render); }

  // -- screens ------------------------------------------------------------------------------

  function fail(message, reason) {
    screen("error", "Something went wrong", [
      el("p", { "class": "error", "data-testid": "error", text: message }),
      el("button", { "class": "primary", text: "Close", onclick: function () { close(reason); } })
    ], { closeReason: reason });
  }

  function welcome() {
    screen("welcome", "Welcome", [
      el("h1", { text: "Connect your payroll account" }),
      el("p", { text: "Sign in to your employer or payroll provider to continue." }),
      el("button", { "class": "primary", "data-testid": "continue", text: "Continue",
        onclick: function () { remember(welcome); search(false); } })
    ]);
  }

  function search(payrollOnly) {
    var input = el("input", { type: "search", placeholder: payrollOnly ?
      "Search payroll providers" : "Search your employer", "data-testid": "search",
      "aria-label": "Search" });
    var list = el("ul", { "class": "results", "data-testid": "results" });
    var pending = 0;
    input.oninput = function () {
      var query = input.value.trim();
      var ticket = ++pending;
      if (!query) { list.textContent = ""; return; }
      var body = { query: query, limit: 20 };
      if (config.scope) { body.scopes = [config.scope]; }
      if (payrollOnly) { body.tags = ["payroll-provider"]; }
      var operation = firstOperation();
      if (operation) { body.product = operation; }
      api("POST", "/company/search", body).then(function (json) {
        if (ticket !== pending) { return; }
        list.textContent = "";
        json.data.forEach(function (company) {
          list.appendChild(el("li", {}, [el("button", { "data-company": company._id,
            onclick: function () {
              interaction("Selected Company", { companyId: company._id, name: company.name });
              remember(function () { search(payrollOnly); });
              chooseCompany(company._id);
            } }, [logo(company), el("span", { text: company.name }),
                  company.tags.indexOf("manual-deposits") >= 0 ?
                    el("span", { "class": "tag", text: "manual" }) : null])]));
        });
        if (!json.data.length) { list.appendChild(el("li", { "class": "hint", text: "No company found." })); }
      }).catch(function (error) { list.textContent = error.message; });
    };
    screen("search", payrollOnly ? "Search Payroll" : "Search Company", [input, list],
           { back: true });
    input.focus();
  }

  function firstOperation() {
    var tasks = config.tasks || [];
    return tasks.length && tasks[0].operation ? tasks[0].operation : null;
  }

  function chooseCompany(companyId) {
    api("GET", "/company/" + encodeURIComponent(companyId)).then(function (json) {
      var company = json.data;
      state.company = company;
      if (company.tags.indexOf("manual-deposits") >= 0) { return manualFallback(company); }
      login(company);
    }).catch(function (error) { fail(error.message, "unknown-company"); });
  }

  function login(company, options) {
    options = options || {};
    if (company.status === "under-maintenance" || company.status === "disabled") {
      return screen("unavailable", "Unavailable", [
        el("p", { "class": "error", "data-testid": "unavailable",
                  text: company.name + (company.status === "disabled" ? " is not available." :
                        " is under maintenance. Please try again later.") }),
        el("button", { "class": "primary", text: "Close",
                       onclick: function () { close("company-unavailable"); } })
      ], { back: true, closeReason: "company-unavailable" });
    }
    var username = el("input", { autocomplete: "username", placeholder: "Username",
                                 "data-testid": "username", "aria-label": "Username" });
    var password = el("input", { type: "password", autocomplete: "current-password",
                                 placeholder: "Password", "data-testid": "password",
                                 "aria-label": "Password" });
    var message = el("p", { "class": "error", "data-testid": "login-error" });
    var submit = el("button", { "class": "primary", "data-testid": "submit", text: "Sign in" });
    var form = el("form", {}, [username, password, message, submit]);
    form.style.cssText = "display:flex;flex-direction:column;gap:12px";
    form.onsubmit = function (event) {
      event.preventDefault();
      if (!username.value || !password.value) { message.textContent = "Enter your username and password."; return; }
      submit.disabled = true;
      interaction("Submitted Credentials", { companyId: company._id });
      var body = { companyId: company._id, username: username.value, password: password.value };
      if (config.tasks && config.tasks.length) { body.tasks = config.tasks; }
      if (config.linkedAccount) { body.linkedAccount = config.linkedAccount; }
      if (state.paymentMethod) { body.paymentMethod = state.paymentMethod; }
      if (state.metadata) { body.metadata = state.metadata; }
      api("POST", "/sdk/login", body).then(function (json) {
        progress(company, json.data.id);
      }).catch(function (error) {
        submit.disabled = false;
        message.textContent = error.message;
        interaction("Login Refused", { code: error.code });
      });
    };
    screen("login", "Login", [
      el("div", { style: "display:flex;gap:10px;align-items:center" },
         [logo(company), el("h1", { "data-testid": "company-name", text: company.name })]),
      el("p", { "class": "hint", text: "Sandbox: test-good succeeds, test-bad fails, " +
                                        "test-<scenario> runs that scenario." }),
      form
    ], { back: !options.locked });
  }

  function progress(company, taskId) {
    var status = el("p", { "class": "status", "data-testid": "task-status", text: "Connecting..." });
    screen("progress", "Connecting", [el("h1", { text: company.name }), status]);
    interaction("Started Task", { taskId: taskId });
    function poll() {
      api("GET", "/task/" + taskId).then(function (json) {
        var task = json.data;
        status.textContent = task.status === "queued" ? "Waiting..." :
          task.authenticated ? "Signed in, updating your account..." : "Signing in...";
        if (task.status === "completed" || task.status === "failed") { return done(company, task); }
        setTimeout(poll, 300);
      }).catch(function () { setTimeout(poll, 1000); });
    }
    poll();
  }

  function done(company, task) {
    var success = task.status === "completed";
    interaction(success ? "Task Completed" : "Task Failed", { taskId: task.id, reason: task.reason });
    finish(task.id);
    screen("done", success ? "Success" : "Task Failed", [
      el("h1", { "data-testid": "outcome", text: success ? "You're all set" : "We couldn't finish" }),
      el("p", { text: success ? company.name + " is connected." :
                "Reason: " + (task.reason || "unknown") + "." }),
      el("button", { "class": "primary", "data-testid": "done", text: "Done",
                     onclick: function () { close(success ? "completed" : "task-failed"); } })
    ], { closeReason: success ? "completed" : "task-failed" });
  }

  function account() {
    api("GET", "/linked-accounts").then(function (json) {
      var items = json.data.map(function (linked) {
        return el("li", {}, [el("button", { "data-linked-account": linked._id,
          onclick: function () { remember(account); chooseCompany(linked.company); } },
          [el("span", { text: linked.company + (linked.connected ? "" : " (disconnected)") })])]);
      });
      screen("account", "Account", [el("h1", { text: "Your connected accounts" }),
        items.length ? el("ul", { "class": "results" }, items) :
          el("p", { "class": "hint", text: "No connected account yet." }),
        el("button", { "class": "primary", text: "Connect another",
                       onclick: function () { remember(account); search(false); } })]);
    }).catch(function (error) { fail(error.message, "unknown"); });
  }

  function depositSetup(company) {
    var kind = el("select", { "data-testid": "distribution-type", "aria-label": "Distribution" }, [
      el("option", { value: "total", text: "Entire paycheck" }),
      el("option", { value: "percent", text: "A percentage" }),
      el("option", { value: "fixed", text: "A fixed amount" })]);
    var amount = el("input", { type: "number", min: "1", placeholder: "Amount",
                               "data-testid": "distribution-amount", "aria-label": "Amount" });
    screen("direct-deposit-setup", "Direct Deposit", [
      el("h1", { text: "How much of your pay goes here?" }), kind, amount,
      el("button", { "class": "primary", "data-testid": "continue", text: "Continue",
        onclick: function () {
          state.metadata = { distribution: { type: kind.value,
            amount: kind.value === "total" ? 100 : Number(amount.value || 0) } };
          remember(function () { depositSetup(company); });
          login(company);
        } })]);
  }

  function manualFallback(company) {
    screen("manual-fallback", "Manual Instructions", [
      el("h1", { text: "Update your direct deposit at " + company.name }),
      el("p", { "data-testid": "manual-instructions",
                text: company.name + " has no online sign-in here. Give your employer's payroll " +
                      "team your account and routing numbers, or a direct deposit form." }),
      el("button", { "class": "primary", text: "Get a deposit form",
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
      el("h1", { text: "Your direct deposit form" }),
      el("p", { text: "Fill in your account, sign it, and hand it to " + company.name + "." }), link
    ], { back: true });
  }

  function addCard(company) {
    var number = el("input", { inputmode: "numeric", placeholder: "Card number",
                               "data-testid": "card-number", "aria-label": "Card number" });
    var expiry = el("input", { placeholder: "MM/YY", "data-testid": "card-expiry", "aria-label": "Expiry" });
    var message = el("p", { "class": "error" });
    screen("add-card", "Add Card", [el("h1", { text: "Add a card" }), number, expiry, message,
      el("button", { "class": "primary", "data-testid": "continue", text: "Continue",
        onclick: function () {
          var digits = number.value.replace(/\D/g, "");
          var parts = expiry.value.split("/");
          if (digits.length < 12 || parts.length !== 2) { message.textContent = "Check the card number and expiry."; return; }
          state.paymentMethod = { type: "card", _id: "card-" + digits.slice(-4), title: "Card " + digits.slice(-4),
            lastFour: digits.slice(-4), brand: digits.charAt(0) === "4" ? "visa" : "card",
            expiry: "20" + parts[1].trim() + "-" + parts[0].trim().padStart(2, "0") + "-01T00:00:00Z" };
          interaction("Added Card", { lastFour: digits.slice(-4) });
          if (company) { remember(function () { addCard(company); }); login(company); }
          else { remember(function () { addCard(null); }); search(false); }
        } })]);
  }

  // -- start --------------------------------------------------------------------------------

  function start() {
    api("POST", "/sdk/session", { config: config }).then(function (json) {
      var session = state.session = json.data;
      var company = session.company;
      var step = session.step;
      interaction("Initialized", { step: step });
      if (session.linkedAccount) { return login(company, { locked: true }); }
      switch (step) {
        case "login-company":
          // A back button returns to company search unless the user is locked to the company.
          if (nav.showBackButton !== false) { remember(function () { search(false); }); }
          return login(company, { locked: nav.showBackButton === false });
        case "search-payroll": return search(true);
        case "welcome": return welcome();
        case "account": return account();
        case "direct-deposit-setup": return depositSetup(company);
        case "manual-fallback": return manualFallback(company);
        case "generate-deposit-pdf": return depositPdf(company);
        case "add-card": return addCard(company);
        default: return search(false);
      }
    }).catch(function (error) {
      var reason = error.code || "unknown";
      fail(error.message, reason);
      interaction("Error", { code: reason });
    });
  }

  if (boot.error) {
    fail(boot.error.message, boot.error.code);
  } else {
    send("request-public-token");
  }
})();
