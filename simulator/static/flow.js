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
 */
(function () {
  "use strict";
  var boot = JSON.parse(document.getElementById("bootstrap").textContent);
  var PREFIX = boot.prefix;
  var MESSAGES = boot.messages || { reasons: {}, errors: {}, fallback: "Something went wrong." };
  var HINTS = boot.flow || { nextSteps: {}, mfaScenarios: [] };
  var hId = new URLSearchParams(window.location.hash.slice(1)).get("hId") || "";
  var config = boot.config || {};
  var nav = (config.theme && config.theme.navigationOptions) || {};
  var state = { token: null, parentOrigin: null, session: null, history: [], company: null,
                refusal: null, target: null, paymentMethod: null, distribution: null,
                pendingTask: null, left: false, ended: false, popular: {}, loginOptions: {},
                payrollOnly: false };
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

  // -- rendering ----------------------------------------------------------------------------

  function el(tag, attributes, children) {
    var node = document.createElement(tag);
    Object.keys(attributes || {}).forEach(function (key) {
      if (key === "onclick" || key === "oninput" || key === "onsubmit" || key === "onchange" ||
          key === "onkeydown") {
        node[key] = attributes[key];
      } else if (key === "text") { node.textContent = attributes[key]; }
      else if (key === "style") {
        // Property by property: the page's Content-Security-Policy refuses style attributes.
        var look = attributes.style;
        Object.keys(look).forEach(function (name) {
          if (name.indexOf("--") === 0) { node.style.setProperty(name, look[name]); }
          else { node.style[name] = look[name]; }
        });
      }
      else { node.setAttribute(key, attributes[key]); }
    });
    (children || []).forEach(function (child) {
      if (child) { node.appendChild(typeof child === "string" ? document.createTextNode(child) : child); }
    });
    return node;
  }

  /* Line icons (24 x 24, stroked in the text colour), drawn here: nothing is fetched. */
  var ICONS = {
    check: ["M5 12.5l4.5 4.5L19 7.5"],
    x: ["M7 7l10 10M17 7L7 17"],
    back: ["M15 18l-6-6 6-6"],
    chevron: ["M9 6l6 6-6 6"],
    search: ["M11 4a7 7 0 1 0 0 14a7 7 0 1 0 0-14z", "M20 20l-4-4"],
    lock: ["M6 11h12v10H6z", "M8.5 11V8a3.5 3.5 0 0 1 7 0v3"],
    alert: ["M12 3a9 9 0 1 0 0 18a9 9 0 1 0 0-18z", "M12 7.5v5.5", "M12 16.5v.01"],
    shield: ["M12 3l7 3v5c0 4.6-3 8.6-7 10-4-1.4-7-5.4-7-10V6z", "M9 12l2 2 4-4"],
    question: ["M12 3a9 9 0 1 0 0 18a9 9 0 1 0 0-18z", "M9.2 9.2a2.9 2.9 0 0 1 5.6 1c0 1.9-2.8 2.6-2.8 2.6", "M12 16.8v.01"],
    clock: ["M12 3a9 9 0 1 0 0 18a9 9 0 1 0 0-18z", "M12 7v5l3 2"],
    card: ["M3 6h18v12H3z", "M3 10h18", "M7 15h3"],
    wrench: ["M14.5 6.5a4 4 0 0 0-5.3 5.3L3.5 17.5l3 3 5.7-5.7a4 4 0 0 0 5.3-5.3l-2.6 2.6-2.3-.7-.7-2.3z"],
    document: ["M7 3h7l5 5v13H7z", "M14 3v5h5", "M10 13h6", "M10 17h6"],
    grid: ["M4 4h6v6H4z", "M14 4h6v6h-6z", "M4 14h6v6H4z", "M14 14h6v6h-6z"],
    bank: ["M3 10l9-6 9 6", "M5 10v8", "M10 10v8", "M14 10v8", "M19 10v8", "M3 21h18"],
    bolt: ["M13 3L5 14h6l-1 7 8-11h-6z"],
    unlink: ["M9 15l-2 2a3 3 0 0 1-4-4l3-3", "M15 9l2-2a3 3 0 0 1 4 4l-3 3", "M8 8L5 5", "M19 19l-3-3"]
  };
  var SVG = "http://www.w3.org/2000/svg";
  function icon(name) {
    var svg = document.createElementNS(SVG, "svg");
    svg.setAttribute("viewBox", "0 0 24 24");
    svg.setAttribute("fill", "none");
    svg.setAttribute("stroke", "currentColor");
    svg.setAttribute("stroke-width", "2");
    svg.setAttribute("stroke-linecap", "round");
    svg.setAttribute("stroke-linejoin", "round");
    svg.setAttribute("aria-hidden", "true");
    svg.setAttribute("focusable", "false");
    ICONS[name].forEach(function (d) {
      var path = document.createElementNS(SVG, "path");
      path.setAttribute("d", d);
      svg.appendChild(path);
    });
    return svg;
  }

  /* A labelled field: the <label> names the control for screen readers and is clickable. */
  function field(label, control, hint, options) {
    options = options || {};
    var id = "field-" + (++uid);
    control.id = id;
    var children = [el("label", { "for": id, text: label, "class": options.hiddenLabel ? "sr-only" : null })];
    if (hint) {
      var hintId = id + "-hint";
      control.setAttribute("aria-describedby", hintId);
      children.push(el("p", { "class": "hint", id: hintId, text: hint }));
    }
    children.push(options.wrap ? options.wrap(control) : control);
    return el("div", { "class": "field" }, children);
  }

  function alertBox(testId) {
    return el("p", { "class": "alert", role: "alert", "data-testid": testId });
  }
  /* An inline message: an icon and the sentence (its text is the sentence alone). */
  function say(box, text) {
    box.textContent = "";
    if (text) { box.appendChild(icon("alert")); box.appendChild(el("span", { text: text })); }
  }

  function button(kind, text, onclick, attributes) {
    var node = el("button", { type: "button", "class": kind, text: text, onclick: onclick });
    Object.keys(attributes || {}).forEach(function (key) { node.setAttribute(key, attributes[key]); });
    return node;
  }

  /* A submit button that shows it is working while its request runs. */
  function busy(submit, working) {
    if (!submit.getAttribute("data-label")) { submit.setAttribute("data-label", submit.textContent); }
    submit.disabled = working;
    submit.textContent = "";
    if (working) {
      submit.appendChild(el("span", { "class": "spinner", "aria-hidden": "true" }));
      submit.appendChild(document.createTextNode(submit.getAttribute("data-working") || "Please wait…"));
    } else {
      submit.textContent = submit.getAttribute("data-label");
    }
  }

  function screen(name, title, children, options) {
    options = options || {};
    document.getElementById("title").textContent = title;
    document.title = title + " · Connect your payroll";
    var back = document.getElementById("back");
    back.textContent = "";
    var canGoBack = options.back && nav.showBackButton !== false && state.history.length > 0;
    if (canGoBack) {
      back.appendChild(el("button", { type: "button", "class": "icon-button", "data-testid": "back",
        "aria-label": "Back", onclick: function () { var previous = state.history.pop(); previous(); } },
        [icon("back"), nav.showBackButtonText === false ? null : el("span", { text: "Back" })]));
    }
    var closer = document.getElementById("close");
    closer.textContent = "";
    if (nav.showCloseButton !== false) {
      closer.appendChild(el("button", { type: "button", "class": "icon-button", "data-testid": "close",
        "aria-label": "Close", onclick: options.onClose || function () {
          close(options.closeReason || "user-closed"); } }, [icon("x")]));
    }
    app.textContent = "";
    app.onkeydown = null;
    app.setAttribute("data-screen", name);
    app.scrollTop = 0;
    children.forEach(function (child) { if (child) { app.appendChild(child); } });
    var focus = options.focus || app.querySelector("input, select") || app.querySelector("h1");
    if (focus) {
      if (focus.tagName === "H1") { focus.setAttribute("tabindex", "-1"); }
      focus.focus();
    }
    interaction("Viewed " + title + " Page");
  }

  // -- companies: logos and brand colours -----------------------------------------------------

  var HEX = /^#(?:[0-9a-f]{3}){1,2}$/i;
  function rgb(colour) {
    var hex = colour.slice(1);
    if (hex.length === 3) { hex = hex.replace(/./g, function (c) { return c + c; }); }
    return [0, 2, 4].map(function (i) { return parseInt(hex.slice(i, i + 2), 16); });
  }
  function brandColour(company) {
    var colour = company && company.branding && company.branding.color;
    return typeof colour === "string" && HEX.test(colour) ? colour : "#4b5563";
  }
  /* WCAG relative luminance; white or near-black ink, whichever reads better. */
  function luminance(colour) {
    return rgb(colour).map(function (v) {
      v /= 255;
      return v <= 0.03928 ? v / 12.92 : Math.pow((v + 0.055) / 1.055, 2.4);
    }).reduce(function (sum, v, i) { return sum + v * [0.2126, 0.7152, 0.0722][i]; }, 0);
  }
  function inkOn(colour) {
    var l = luminance(colour);
    return (1.05 / (l + 0.05)) >= ((l + 0.05) / 0.05) ? "#ffffff" : "#000000";
  }
  /* The brand colour mixed into white: a tint that dark text reads on. */
  function tint(colour, share) {
    return "rgb(" + rgb(colour).map(function (v) { return Math.round(255 - (255 - v) * share); }).join(",") + ")";
  }

  /* The company's logo from the sandbox (a monogram on its brand colour), or its first
   * letter where the sandbox has none (a tenant's own company). Decorative: the name is
   * always written next to it. */
  function logo(company, size) {
    var colour = brandColour(company);
    var box = el("span", { "class": "logo" + (size ? " logo-" + size : ""), "aria-hidden": "true",
                           style: { background: colour, color: inkOn(colour) } });
    var img = el("img", { alt: "", src: "/sdk/logo/" + encodeURIComponent(company._id) + ".svg",
                          decoding: "async" });
    img.onerror = function () {
      box.textContent = (company.name || "?").charAt(0).toUpperCase();
    };
    box.appendChild(img);
    return box;
  }

  function badged(node, kind) {
    var marks = { success: "check", failure: "x", warning: "wrench" };
    node.appendChild(el("span", { "class": "badge badge-" + kind, "aria-hidden": "true" }, [icon(marks[kind])]));
    return node;
  }

  /* A heading that names the company: `prefix` then the name (data-testid company-name). */
  function companyTitle(company, prefix) {
    return el("h1", {}, [prefix || null, el("span", { "data-testid": "company-name", text: company.name })]);
  }

  /* The top of a company's screen: its logo on a band of its colour, the heading, a sentence. */
  function companyHero(company, heading, lead, options) {
    options = options || {};
    var mark = logo(company, options.size || "xl");
    if (options.badge) { badged(mark, options.badge); }
    return el("div", { "class": "hero" + (options.band === false ? "" : " hero-band"),
                       style: options.band === false ? {} : { background: tint(brandColour(company), 0.1) } },
              [mark, heading, lead ? el("p", { "class": "lead", text: lead }) : null]);
  }

  function iconHero(name, heading, lead, tone) {
    return el("div", { "class": "hero" }, [
      el("div", { "class": "hero-icon" + (tone ? " " + tone : ""), "aria-hidden": "true" }, [icon(name)]),
      heading, lead ? el("p", { "class": "lead", text: lead }) : null]);
  }

  function remember(render) { state.history.push(render); }

  // -- screens ------------------------------------------------------------------------------

  function fail(code, company) {
    interaction("Error", { code: code });
    screen("error", "Something went wrong", [
      iconHero("alert", el("h1", { text: "We can't continue" }), null, "danger"),
      el("p", { "class": "lead center", "data-testid": "error", text: errorSentence(code, company) }),
      el("div", { "class": "actions" }, [
        button("primary", "Close", function () { close(code); })])
    ], { closeReason: code });
  }

  function welcome() {
    var points = [
      ["lock", "Private and secure", "You sign in with your employer or payroll provider; the app never sees your password."],
      ["bolt", "Quick", "It usually takes less than a minute."],
      ["unlink", "In your control", "You can disconnect this at any time."]
    ].map(function (p) {
      return el("li", {}, [icon(p[0]), el("div", {}, [el("strong", { text: p[1] }), el("span", { text: p[2] })])]);
    });
    var dots = el("span", { "class": "dots" }, [el("i"), el("i"), el("i")]);
    screen("welcome", "Welcome", [
      el("div", { "class": "hero" }, [
        el("div", { "class": "pair", "aria-hidden": "true" }, [
          el("span", { "class": "app-mark" }, [icon("grid")]), dots,
          el("span", { "class": "hero-icon" }, [icon("bank")])]),
        el("h1", { text: "Connect your payroll account" }),
        el("p", { "class": "lead", text: "Sign in to your employer or payroll provider to continue." })]),
      el("ul", { "class": "points" }, points),
      el("div", { "class": "actions" }, [
        button("primary", "Continue", function () { remember(welcome); search(false); },
               { "data-testid": "continue" })])
    ]);
  }

  var META = { "payroll-provider": "Payroll provider", "gig-economy": "Gig economy",
               "franchise-parent": "All locations", "manual-deposits": "Set up by hand" };
  function describe(company) {
    if (company.status === "under-maintenance") { return { text: "Under maintenance", warn: true }; }
    var tags = company.tags || [];
    for (var i = tags.length - 1; i >= 0; i--) {
      if (META[tags[i]]) { return { text: META[tags[i]] }; }
    }
    return null;
  }

  function pick(company, payrollOnly, where) {
    interaction("Selected Company", { companyId: company._id, name: company.name, from: where });
    remember(function () { search(payrollOnly); });
    chooseCompany(company._id);
  }

  function resultRow(company, payrollOnly) {
    var meta = describe(company);
    return el("li", {}, [el("button", { type: "button", "data-company": company._id,
      onclick: function () { pick(company, payrollOnly, "search"); } }, [
        logo(company, "sm"),
        el("span", { "class": "text" }, [el("span", { "class": "name", text: company.name }),
          meta ? el("span", { "class": "meta" + (meta.warn ? " warn" : ""), text: meta.text }) : null]),
        el("span", { "class": "chevron", "aria-hidden": "true" }, [icon("chevron")])])]);
  }

  function tile(company, payrollOnly) {
    return el("li", {}, [el("button", { type: "button", "class": "tile", "data-company": company._id,
      onclick: function () { pick(company, payrollOnly, "popular"); } }, [
        logo(company), el("span", { "class": "name", text: company.name })])]);
  }

  /* What the search screen shows before the user types: popular companies, as tiles. */
  function popularSections(popular, payrollOnly) {
    var sections = [];
    var groups = [["companies", config.scope === "pay-link" ? "Popular" : "Popular employers", "popular"],
                  ["payrollProviders", "Payroll providers", "popular-payroll"]];
    groups.forEach(function (group) {
      var companies = popular[group[0]] || [];
      if (!companies.length) { return; }
      var id = "section-" + (++uid);
      sections.push(el("section", { "class": "section", "aria-labelledby": id }, [
        el("h2", { id: id, text: group[1] }),
        el("ul", { "class": "tiles", "data-testid": group[2], "aria-labelledby": id },
           companies.map(function (c) { return tile(c, payrollOnly); }))]));
    });
    return sections;
  }

  function searchFilters(payrollOnly) {
    var body = {};
    if (config.scope) { body.scopes = [config.scope]; }
    if (payrollOnly) { body.tags = ["payroll-provider"]; }
    var products = operations();
    if (products.length === 1) { body.product = products[0]; }
    else if (products.length > 1) { body.products = products; }
    return body;
  }

  /* Arrow keys move between the search box and the companies, as in a list: up and down
   * (by rows among tiles), left and right among tiles, Home and End. */
  function arrowKeys(event) {
    var keys = ["ArrowDown", "ArrowUp", "ArrowLeft", "ArrowRight", "Home", "End"];
    if (keys.indexOf(event.key) < 0) { return; }
    var input = app.querySelector("input[type=search]");
    var items = Array.prototype.slice.call(app.querySelectorAll("[data-company]"));
    if (!items.length) { return; }
    var target = event.target;
    var index = items.indexOf(target);
    if (target === input) {
      if (event.key !== "ArrowDown") { return; }
      event.preventDefault();
      return items[0].focus();
    }
    if (index < 0) { return; }
    var inGrid = target.classList.contains("tile");
    var step = { ArrowDown: inGrid ? 3 : 1, ArrowUp: inGrid ? -3 : -1,
                 ArrowRight: inGrid ? 1 : 0, ArrowLeft: inGrid ? -1 : 0 }[event.key];
    event.preventDefault();
    if (event.key === "Home") { return items[0].focus(); }
    if (event.key === "End") { return items[items.length - 1].focus(); }
    if (!step) { return; }
    var next = index + step;
    if (next < 0) { return input ? input.focus() : items[0].focus(); }
    items[Math.min(next, items.length - 1)].focus();
  }

  function search(payrollOnly) {
    state.payrollOnly = payrollOnly;
    var payLink = config.scope === "pay-link" && !payrollOnly;
    var input = el("input", { type: "search", autocomplete: "off", "data-testid": "search",
                              spellcheck: "false", enterkeyhint: "search",
                              placeholder: payrollOnly ? "For example, ADP" :
                                "Search by name, e.g. " + (payLink ? "Netflix" : "Walmart") });
    var list = el("ul", { "class": "results", "data-testid": "results", "aria-label": "Results" });
    var announce = el("p", { "class": "sr-only", role: "status" });
    var popularBox = el("div", { "class": "popular", "data-testid": "popular-box" });
    var slot = el("div", { "class": "section" }, [popularBox]);
    var pending = 0;
    var key = payrollOnly ? "payroll" : "all";

    function showPopular(popular) {
      popularBox.textContent = "";
      popularSections(popular, payrollOnly).forEach(function (s) { popularBox.appendChild(s); });
      if (!popularBox.childNodes.length) {
        popularBox.appendChild(el("p", { "class": "hint", text: "Start typing to find your company." }));
      }
    }
    if (state.popular[key]) { showPopular(state.popular[key]); }
    else {
      var ask = { payrollOnly: payrollOnly };
      if (config.scope) { ask.scope = config.scope; }
      if (config.tasks && config.tasks.length) { ask.tasks = config.tasks; }
      api("POST", "/sdk/popular", ask).then(function (json) {
        state.popular[key] = json.data;
        showPopular(json.data);
      }).catch(function () { showPopular({}); });
    }

    function nothingFound() {
      var children = [el("p", { text: "No company found. Check the spelling, or try the name of your payroll provider." })];
      if (!payrollOnly) {
        children.push(button("plain", "Search payroll providers instead", function () {
          remember(function () { search(false); });
          search(true);
        }, { "data-testid": "search-payroll" }));
      }
      return el("li", { "class": "empty" }, children);
    }

    input.oninput = function () {
      var query = input.value.trim();
      var ticket = ++pending;
      if (!query) {
        list.textContent = "";
        announce.textContent = "";
        if (!popularBox.parentNode) { slot.appendChild(popularBox); }
        return;
      }
      // Gone from the page, not hidden: a company is listed once, as a result.
      if (popularBox.parentNode) { slot.removeChild(popularBox); }
      var body = searchFilters(payrollOnly);
      body.query = query;
      body.limit = 20;
      api("POST", "/company/search", body).then(function (json) {
        if (ticket !== pending) { return; }
        list.textContent = "";
        json.data.forEach(function (company) { list.appendChild(resultRow(company, payrollOnly)); });
        if (!json.data.length) { list.appendChild(nothingFound()); }
        announce.textContent = json.data.length ? json.data.length + (json.data.length === 1 ?
          " company found" : " companies found") : "No company found";
      }).catch(function (error) {
        if (ticket !== pending) { return; }
        list.textContent = "";
        list.appendChild(el("li", { "class": "error", role: "alert", text: errorSentence(error.code) }));
        interaction("Search Failed", { code: error.code });
      });
    };
    input.onkeydown = function (event) {
      if (event.key === "Escape" && input.value) {
        event.preventDefault();
        event.stopPropagation();
        input.value = "";
        input.oninput();
      }
    };
    var box = function (control) {
      return el("div", { "class": "search-box" }, [icon("search"), control]);
    };
    var heading = payrollOnly ? "Find your payroll provider" :
      payLink ? "Find the company you pay" : "Find your employer";
    var lead = payrollOnly ? "The company that runs payroll for your employer." :
      payLink ? "Search for the company whose bill you want to update." :
      "Search for the company that pays you, or your payroll provider.";
    screen("search", payrollOnly ? "Search Payroll" : "Search Company", [
      el("div", { "class": "hero hero-left" }, [el("h1", { text: heading }), el("p", { "class": "lead", text: lead })]),
      field(payrollOnly ? "Search for your payroll provider" : payLink ? "Search for the company" :
            "Search for your employer", input, null, { hiddenLabel: true, wrap: box }),
      announce, list, slot], { back: true });
    app.onkeydown = arrowKeys;
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

  /* Whether the user may leave this company for another (not when the host locked the
   * flow to it, nor when reconnecting a linked account). */
  function mayChooseAnother(options) {
    return nav.showBackButton !== false && !config.linkedAccount && !(options && options.locked);
  }
  function chooseAnother() {
    interaction("Chose Another Company", {});
    state.history = [];
    state.distribution = null;
    search(state.payrollOnly);
  }

  function unavailable(company, refusal, options) {
    options = options || {};
    interaction("Company Unavailable", { companyId: company._id, code: refusal.code });
    var actions = [];
    if (mayChooseAnother(options)) {
      actions.push(button("primary", "Choose another company", chooseAnother, { "data-testid": "choose-another" }));
    }
    actions.push(button(actions.length ? "secondary" : "primary", "Close", function () { close(refusal.code); }));
    screen("unavailable", "Unavailable", [
      companyHero(company, companyTitle(company, "Can't connect to "), null, { badge: "warning" }),
      el("p", { "class": "lead center", "data-testid": "unavailable", text: errorSentence(refusal.code, company) }),
      el("div", { "class": "actions" }, actions)
    ], { back: !options.locked, closeReason: refusal.code });
  }

  function loginHint() {
    var items = [
      ["test-good", "signs in and succeeds"],
      ["test-bad", "wrong password: the sign-in is refused here"],
      ["test-failure", "signs in, then the update fails"],
      ["test-code-mfa", "asks for a verification code"],
      ["test-question-mfa", "asks a security question"],
      ["test-distribution-not-supported", "signs in, then the deposit fails: the payroll system can't set it up"]
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
    if (config.metadata) { body.metadata = config.metadata; }
    if (state.paymentMethod) { body.paymentMethod = state.paymentMethod; }
    if (state.distribution) { body.distribution = state.distribution; }
    return body;
  }

  function login(company, options) {
    options = options || {};
    state.loginOptions = options;
    var username = el("input", { autocomplete: "username", "data-testid": "username",
                                 autocapitalize: "none", spellcheck: "false" });
    var password = el("input", { type: "password", autocomplete: "current-password",
                                 "data-testid": "password" });
    var message = alertBox("login-error");
    var submit = el("button", { type: "submit", "class": "primary", "data-testid": "submit",
                                "data-working": "Signing in…", text: "Sign in" });
    var form = el("form", { "class": "form", "aria-label": "Sign in to " + company.name, novalidate: "" },
                  [field("Username", username), field("Password", password), message, submit]);
    function invalid(fields) {
      [username, password].forEach(function (input) {
        if (fields.indexOf(input) >= 0) {
          input.setAttribute("aria-invalid", "true");
          input.setAttribute("aria-errormessage", message.id);
        } else {
          input.removeAttribute("aria-invalid");
          input.removeAttribute("aria-errormessage");
        }
      });
    }
    message.id = "login-error-" + (++uid);
    username.oninput = password.oninput = function () { invalid([]); };
    form.onsubmit = function (event) {
      event.preventDefault();
      if (!username.value.trim() || !password.value) {
        var missing = [username, password].filter(function (i) { return !i.value.trim(); });
        say(message, "Enter your username and password.");
        invalid(missing);
        missing[0].focus();
        return;
      }
      busy(submit, true);
      say(message, "");
      interaction("Submitted Credentials", { companyId: company._id });
      var body = loginBody(company, username.value.trim(), password.value);
      api("POST", "/sdk/login", body).then(function (json) {
        if (json.data.mfa) {
          remember(function () { login(company, options); });
          return mfa(company, body, json.data.mfa);
        }
        progress(company, json.data, null);
      }).catch(function (error) {
        busy(submit, false);
        interaction("Login Refused", { code: error.code });
        if (error.code === "company-under-maintenance" || error.code === "company-disabled" ||
            error.code === "product-not-offered") {
          return unavailable(company, { code: error.code }, options);
        }
        say(message, errorSentence(error.code, company));
        if (error.code === "credentials-refused") {
          password.value = "";
          invalid([username, password]);
          username.focus();
          username.select();
        }
      });
    };
    screen("login", "Login", [
      companyHero(company, companyTitle(company, "Sign in to "),
                  "Use the username and password you use at " + company.name + "."),
      form, loginHint()
    ], { back: !options.locked });
  }

  /* Spec (linkedAccount): a reconnect "often does not require re-entering credentials".
   * The session said this one resumes: the tasks start at once, without the login form. */
  function resume(company) {
    state.company = company;
    interaction("Resumed Linked Account", { companyId: company._id });
    var body = { companyId: company._id, linkedAccount: config.linkedAccount };
    if (config.tasks && config.tasks.length) { body.tasks = config.tasks; }
    if (config.metadata) { body.metadata = config.metadata; }
    api("POST", "/sdk/login", body).then(function (json) {
      progress(company, json.data, null);
    }).catch(function (error) {
      interaction("Login Refused", { code: error.code });
      login(company, { locked: true });
    });
  }

  /* A second sign-in step (sandbox usernames test-code-mfa, test-question-mfa): any
   * answer passes; the login is sent again with it and the task starts. */
  function mfa(company, body, challenge) {
    var isCode = challenge.type === "code";
    var answer = el("input", isCode ?
      { inputmode: "numeric", autocomplete: "one-time-code", "class": "code", "data-testid": "mfa-answer" } :
      { autocomplete: "off", "data-testid": "mfa-answer" });
    var message = alertBox("mfa-error");
    var submit = el("button", { type: "submit", "class": "primary", "data-testid": "mfa-submit",
                                "data-working": "Checking…", text: isCode ? "Verify" : "Continue" });
    var form = el("form", { "class": "form", novalidate: "" }, [
      isCode ? field("Verification code", answer, challenge.prompt) :
               field(challenge.prompt, answer),
      message, submit]);
    answer.oninput = function () { answer.removeAttribute("aria-invalid"); };
    form.onsubmit = function (event) {
      event.preventDefault();
      if (!answer.value.trim()) {
        say(message, isCode ? "Enter the code." : "Enter your answer.");
        answer.setAttribute("aria-invalid", "true");
        answer.focus();
        return;
      }
      busy(submit, true);
      interaction("Submitted MFA", { companyId: company._id, type: challenge.type });
      var again = {};
      Object.keys(body).forEach(function (key) { again[key] = body[key]; });
      again.mfaAnswer = answer.value.trim();
      api("POST", "/sdk/login", again).then(function (json) {
        progress(company, json.data, challenge);
      }).catch(function (error) {
        busy(submit, false);
        say(message, errorSentence(error.code, company));
        interaction("MFA Refused", { code: error.code });
      });
    };
    var mark = logo(company, "sm");
    screen(isCode ? "mfa-code" : "security-question",
           isCode ? "Verification" : "Security Question", [
      el("div", { "class": "hero" }, [
        el("div", { "class": "hero-icon", "aria-hidden": "true" }, [icon(isCode ? "shield" : "question")]),
        el("h1", { text: isCode ? "Enter your verification code" : "Answer your security question" }),
        el("p", { "class": "lead", text: isCode ? "For your security, " + company.name + " needs one more step." :
                  company.name + " asks one of your security questions to make sure it's you." })]),
      form,
      el("p", { "class": "hint pair-line" }, [mark, " Signing in to " + company.name])
    ], { back: true });
  }

  // -- progress: the task's own steps ----------------------------------------------------------

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

  function progress(company, created, challenge) {
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

  // -- the end -----------------------------------------------------------------------------------

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
    var retry = function () { interaction("Retried", { taskId: task.id }); login(company, state.loginOptions); };
    var go = {
      retry: retry,
      "another-card": function () { interaction("Retried", { taskId: task.id, with: "another card" }); addCard(company); },
      manual: function () { remember(function () { done(company, task, challenge); }); manualFallback(company, true); },
      amount: function () { interaction("Retried", { taskId: task.id, with: "another amount" }); depositSetup(company); }
    };
    if (NEXT[next]) {
      actions.push(button("primary", NEXT[next][0], go[next], { "data-testid": NEXT[next][1] }));
    }
    if (next !== "retry" && next !== "close") {
      actions.push(button("secondary", "Try again", retry, { "data-testid": "retry" }));
    }
    if (mayChooseAnother(state.loginOptions)) {
      actions.push(button("secondary", "Choose another company", chooseAnother, { "data-testid": "choose-another" }));
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

  // -- the deeplink steps ---------------------------------------------------------------------

  function account() {
    api("GET", "/sdk/linked-accounts").then(function (json) {
      var items = json.data.map(function (linked) {
        var company = linked.company;
        var connected = linked.valid !== false;
        return el("li", {}, [el("button", { type: "button", "data-linked-account": linked._id,
          onclick: function () { remember(account); chooseCompany(company._id); } }, [
            logo(company, "sm"),
            el("span", { "class": "text" }, [el("span", { "class": "name", text: company.name }),
              el("span", { "class": "meta" + (connected ? "" : " warn"),
                           text: connected ? "Connected" : "Needs you to sign in again" })]),
            el("span", { "class": "chevron", "aria-hidden": "true" }, [icon("chevron")])])]);
      });
      screen("account", "Account", [
        iconHero("bank", el("h1", { text: "Your connected accounts" }), null),
        items.length ? el("ul", { "class": "results", "aria-label": "Connected accounts" }, items) :
          el("p", { "class": "hint center", text: "No connected account yet." }),
        el("div", { "class": "actions" }, [
          button("primary", "Connect another", function () { remember(account); search(false); })])]);
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
    var form = el("form", { "class": "form", novalidate: "" }, [
      field("How much of your pay should go to this account?", kind), amountField, message,
      el("button", { type: "submit", "class": "primary", "data-testid": "continue", text: "Continue" })]);
    form.onsubmit = function (event) {
      event.preventDefault();
      var value = Number(amount.value);
      if (kind.value !== "total" && (!(value > 0) || (kind.value === "percent" && value > 100))) {
        say(message, kind.value === "percent" ? "Enter a percentage from 1 to 100." :
          "Enter an amount greater than zero.");
        amount.focus();
        return;
      }
      state.distribution = kind.value === "total" ? { type: "total" } :
        { type: kind.value, amount: value };
      interaction("Chose Distribution", { companyId: company._id, type: kind.value });
      remember(function () { depositSetup(company); });
      login(company, state.loginOptions);
    };
    screen("direct-deposit-setup", "Direct Deposit", [
      companyHero(company, companyTitle(company, "Direct deposit at "),
                  "Choose how much of each paycheck goes to your account."), form],
           { back: true, focus: kind });
    sync();
  }

  function manualFallback(company, afterFailure) {
    var steps = [
      "Ask " + company.name + "'s payroll team (or your HR portal) how to change your direct deposit.",
      "Give them your account and routing numbers, or a signed direct deposit form.",
      "Check your next pay stub to see that the change is in place."
    ].map(function (text) { return el("li", { text: text }); });
    screen("manual-fallback", "Manual Instructions", [
      companyHero(company, companyTitle(company, "Update your deposit at "), null),
      el("p", { "data-testid": "manual-instructions", "class": "lead",
                text: afterFailure ?
                  "You can make this change with " + company.name + " directly. Give your employer's payroll " +
                  "team your account and routing numbers, or a direct deposit form." :
                  company.name + " can't be connected online. Give your employer's payroll " +
                  "team your account and routing numbers, or a direct deposit form." }),
      el("ol", { "class": "card numbered" }, steps),
      el("div", { "class": "actions" }, [
        button("primary", "Get a deposit form", function () {
          remember(function () { manualFallback(company, afterFailure); });
          depositPdf(company); })])
    ], { back: true });
  }

  function depositPdf(company) {
    var link = el("a", { href: "/sdk/deposit-form.pdf?companyId=" + encodeURIComponent(company._id) +
                         "&publicToken=" + encodeURIComponent(state.token),
                         target: "_blank", "class": "primary", "data-testid": "deposit-pdf" },
                  [icon("document"), el("span", { text: "Download the form (PDF)" })]);
    link.onclick = function (event) {
      // The host page opens it (<prefix>-open-url): an iframe may not open windows itself.
      event.preventDefault();
      interaction("Downloaded Deposit Form", { companyId: company._id });
      send("open-url", { url: new URL(link.getAttribute("href"), window.location.href).href });
    };
    screen("generate-deposit-pdf", "Deposit Form", [
      companyHero(company, companyTitle(company, "Deposit form for "),
                  "Fill in your account details, sign the form, and hand it to " +
                  company.name + "'s payroll team."),
      el("div", { "class": "actions" }, [link])
    ], { back: true });
  }

  function addCard(company) {
    var number = el("input", { inputmode: "numeric", autocomplete: "cc-number",
                               "data-testid": "card-number" });
    var expiry = el("input", { autocomplete: "cc-exp", placeholder: "MM/YY", "data-testid": "card-expiry" });
    var message = alertBox("card-error");
    var form = el("form", { "class": "form", novalidate: "" }, [field("Card number", number),
      field("Expiry date (MM/YY)", expiry), message,
      el("button", { type: "submit", "class": "primary", "data-testid": "continue", text: "Continue" })]);
    form.onsubmit = function (event) {
      event.preventDefault();
      var digits = number.value.replace(/\D/g, "");
      var parts = expiry.value.split("/");
      if (digits.length < 12 || parts.length !== 2) {
        say(message, "Check the card number and expiry date.");
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
    screen("add-card", "Add Card", [
      iconHero("card", el("h1", { text: "Add a card" }),
               company ? "The card you want " + company.name + " to charge." : "The card you want to pay with."),
      form]);
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
    var ahead = controls.filter(function (node) {
      return node === active || active.compareDocumentPosition(node) & Node.DOCUMENT_POSITION_FOLLOWING;
    });
    var behind = controls.filter(function (node) {
      return node === active || active.compareDocumentPosition(node) & Node.DOCUMENT_POSITION_PRECEDING;
    });
    if (!event.shiftKey && (ahead.length === 0 || ahead.length === 1 && ahead[0] === active)) {
      event.preventDefault();
      controls[0].focus();
    } else if (event.shiftKey && (behind.length === 0 || behind.length === 1 && behind[0] === active)) {
      event.preventDefault();
      controls[controls.length - 1].focus();
    }
  });

  document.getElementById("foot").insertBefore(icon("lock"), document.getElementById("foot").firstChild);
  if (boot.error) {
    fail(boot.error.code);
  } else {
    send("request-public-token");
  }
})();
