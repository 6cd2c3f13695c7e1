/* Finding the company: the welcome, the search (popular companies before the user
 * types), the sandbox's check of a company the user picked and the screen it leads to,
 * the refusal of one that cannot be connected, and the error screen. */

import { api, close, interaction, searchFilters } from "./flow-api.js";
import { app, config, mayChooseAnother, remember, screens, state } from "./flow-state.js";
import { button, companyHero, companyRow, companyTitle, el, errorSentence, field, icon, iconHero,
         logo, nextId, screen, t } from "./flow-ui.js";

export function fail(code, company) {
  interaction("Error", { code: code });
  screen("error", "Something went wrong", [
    iconHero("alert", el("h1", { text: t("We can't continue") }), null, "danger"),
    el("p", { "class": "lead center", "data-testid": "error", text: errorSentence(code, company) }),
    el("div", { "class": "actions" }, [
      button("primary", t("Close"), function () { close(code); }, { "data-testid": "done" })])
  ], { closeReason: code });
}

export function welcome() {
  var points = [
    ["lock", t("Private and secure"),
     t("You sign in with your employer or payroll provider; the app never sees your password.")],
    ["bolt", t("Quick"), t("It usually takes less than a minute.")],
    ["unlink", t("In your control"), t("You can disconnect this at any time.")]
  ].map(function (p) {
    return el("li", {}, [icon(p[0]), el("div", {}, [el("strong", { text: p[1] }), el("span", { text: p[2] })])]);
  });
  var dots = el("span", { "class": "dots" }, [el("i"), el("i"), el("i")]);
  screen("welcome", "Welcome", [
    el("div", { "class": "hero" }, [
      el("div", { "class": "pair", "aria-hidden": "true" }, [
        el("span", { "class": "app-mark" }, [icon("grid")]), dots,
        el("span", { "class": "hero-icon" }, [icon("bank")])]),
      el("h1", { text: t("Connect your payroll account") }),
      el("p", { "class": "lead", text: t("Sign in to your employer or payroll provider to continue.") })]),
    el("ul", { "class": "points" }, points),
    el("div", { "class": "actions" }, [
      button("primary", t("Continue"), function () { remember(welcome); search(false); },
             { "data-testid": "continue" })])
  ]);
}

function meta() { return { "payroll-provider": t("Payroll provider"), "gig-economy": t("Gig economy"),
             "franchise-parent": t("All locations"), "manual-deposits": t("Set up by hand") }; }
function describe(company) {
  if (company.status === "under-maintenance") { return { text: t("Under maintenance"), warn: true }; }
  var names = meta();
  // The last of its tags that has a name.
  var tag = (company.tags || []).filter(function (one) { return names[one]; }).pop();
  return tag ? { text: names[tag] } : null;
}

function pick(company, payrollOnly, where) {
  interaction("Selected Company", { companyId: company._id, name: company.name, from: where });
  remember(function () { search(payrollOnly); });
  chooseCompany(company._id);
}

function resultRow(company, payrollOnly) {
  return companyRow(company, { "data-company": company._id,
    onclick: function () { pick(company, payrollOnly, "search"); } }, describe(company));
}

function tile(company, payrollOnly) {
  return el("li", {}, [el("button", { type: "button", "class": "tile", "data-company": company._id,
    onclick: function () { pick(company, payrollOnly, "popular"); } }, [
      logo(company), el("span", { "class": "name", text: company.name })])]);
}

/* What the search screen shows before the user types: popular companies, as tiles. */
function popularSections(popular, payrollOnly) {
  var groups = [["companies", config.scope === "pay-link" ? t("Popular") : t("Popular employers"), "popular"],
                ["payrollProviders", t("Payroll providers"), "popular-payroll"]];
  return groups.filter(function (group) { return (popular[group[0]] || []).length; }).map(function (group) {
    var id = "section-" + nextId();
    return el("section", { "class": "section", "aria-labelledby": id }, [
      el("h2", { id: id, text: group[1] }),
      el("ul", { "class": "tiles", "data-testid": group[2], "aria-labelledby": id },
         popular[group[0]].map(function (c) { return tile(c, payrollOnly); }))]);
  });
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

export function search(payrollOnly) {
  state.payrollOnly = payrollOnly;
  var payLink = config.scope === "pay-link" && !payrollOnly;
  var input = el("input", { type: "search", autocomplete: "off", "data-testid": "search",
                            spellcheck: "false", enterkeyhint: "search",
                            placeholder: payrollOnly ? t("For example, ADP") :
                              t("Search by name, e.g. {company}", { company: payLink ? "Netflix" : "Walmart" }) });
  var list = el("ul", { "class": "results", "data-testid": "results", "aria-label": t("Results") });
  var announce = el("p", { "class": "sr-only", role: "status" });
  var popularBox = el("div", { "class": "popular", "data-testid": "popular-box" });
  var slot = el("div", { "class": "section" }, [popularBox]);
  var pending = 0;
  var key = payrollOnly ? "payroll" : "all";

  function showPopular(popular) {
    popularBox.textContent = "";
    popularSections(popular, payrollOnly).forEach(function (s) { popularBox.appendChild(s); });
    if (!popularBox.childNodes.length) {
      popularBox.appendChild(el("p", { "class": "hint", text: t("Start typing to find your company.") }));
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
    var children = [el("p", { text: t("No company found. Check the spelling, or try the name of your payroll provider.") })];
    if (!payrollOnly) {
      children.push(button("plain", t("Search payroll providers instead"), function () {
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
      state.zeroResults = false;
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
      state.zeroResults = !json.data.length;  // closing now: zero-search-results
      var found = { count: json.data.length };
      announce.textContent = found.count === 1 ? t("{count} company found", found) :
        found.count ? t("{count} companies found", found) : t("No company found");
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
  var heading = payrollOnly ? t("Find your payroll provider") :
    payLink ? t("Find the company you pay") : t("Find your employer");
  var lead = payrollOnly ? t("The company that runs payroll for your employer.") :
    payLink ? t("Search for the company whose bill you want to update.") :
    t("Search for the company that pays you, or your payroll provider.");
  screen("search", payrollOnly ? "Search Payroll" : "Search Company", [
    el("div", { "class": "hero hero-left" }, [el("h1", { text: heading }), el("p", { "class": "lead", text: lead })]),
    field(payrollOnly ? t("Search for your payroll provider") : payLink ? t("Search for the company") :
          t("Search for your employer"), input, null, { hiddenLabel: true, wrap: box }),
    announce, list, slot], { back: true });
  app.onkeydown = arrowKeys;
}

/* A company the user picked: the sandbox says whether the configured tasks can start. */
export function chooseCompany(companyId) {
  var body = { companyId: companyId };
  if (config.tasks && config.tasks.length) { body.tasks = config.tasks; }
  api("POST", "/sdk/company", body).then(function (json) {
    openCompany(json.data.company, json.data.refusal, state.target || "login-company");
  }).catch(function (error) { fail(error.code); });
}

/* The screen for `step` at `company`: manual instructions where there is no online
 * sign-in, a refusal where the flow cannot start, else the step itself. */
export function openCompany(company, refusal, step, options) {
  state.company = company;
  state.refusal = refusal;
  if (step === "manual-fallback") { return screens.manualFallback(company); }
  if (step === "generate-deposit-pdf") { return screens.depositPdf(company); }
  if (company.tags.indexOf("manual-deposits") >= 0) { return screens.manualFallback(company); }
  if (refusal) { return unavailable(company, refusal, options); }
  if (step === "direct-deposit-setup") { return screens.depositSetup(company); }
  return screens.login(company, options);
}

export function chooseAnother() {
  interaction("Chose Another Company", {});
  state.history = [];
  state.distribution = null;
  search(state.payrollOnly);
}

export function unavailable(company, refusal, options) {
  options = options || {};
  interaction("Company Unavailable", { companyId: company._id, code: refusal.code });
  var actions = [];
  if (mayChooseAnother(options)) {
    actions.push(button("primary", t("Choose another company"), chooseAnother, { "data-testid": "choose-another" }));
  }
  actions.push(button(actions.length ? "secondary" : "primary", t("Close"), function () { close(refusal.code); }));
  screen("unavailable", "Unavailable", [
    companyHero(company, companyTitle(company, t("Can't connect to {company}")), null, { badge: "warning" }),
    el("p", { "class": "lead center", "data-testid": "unavailable", text: errorSentence(refusal.code, company) }),
    el("div", { "class": "actions" }, actions)
  ], { back: !options.locked, closeReason: refusal.code });
}
