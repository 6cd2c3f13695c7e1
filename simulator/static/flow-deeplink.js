/* The screens a deeplink step opens (or a failed task offers): the user's connected
 * accounts, the direct-deposit split, manual instructions, the deposit form, a card. */

import { api, interaction, send } from "./flow-api.js";
import { remember, screens, state } from "./flow-state.js";
import { alertBox, button, companyHero, companyRow, companyTitle, el, field, icon, iconHero,
         say, screen, t } from "./flow-ui.js";

export function account() {
  api("GET", "/sdk/linked-accounts").then(function (json) {
    var items = json.data.map(function (linked) {
      var company = linked.company;
      var connected = linked.valid !== false;
      return companyRow(company, { "data-linked-account": linked._id,
        onclick: function () { remember(account); screens.chooseCompany(company._id); } },
        { text: connected ? t("Connected") : t("Needs you to sign in again"), warn: !connected });
    });
    screen("account", "Account", [
      iconHero("bank", el("h1", { text: t("Your connected accounts") }), null),
      items.length ? el("ul", { "class": "results", "aria-label": t("Connected accounts") }, items) :
        el("p", { "class": "hint center", text: t("No connected account yet.") }),
      el("div", { "class": "actions" }, [
        button("primary", t("Connect another"), function () { remember(account); screens.search(false); })])]);
  }).catch(function (error) { screens.fail(error.code); });
}

export function depositSetup(company) {
  var capabilities = (company.connector && company.connector.capabilities) || {};
  var offered = capabilities.distributionTypes || ["total", "percent", "fixed"];
  var labels = { total: t("My entire paycheck"), percent: t("A percentage of my paycheck"),
                 fixed: t("A fixed amount per paycheck") };
  var kind = el("select", { "data-testid": "distribution-type" },
    ["total", "percent", "fixed"].filter(function (type) { return offered.indexOf(type) >= 0; })
      .map(function (type) { return el("option", { value: type, text: labels[type] }); }));
  var amount = el("input", { type: "number", min: "1", step: "any", inputmode: "decimal",
                             "data-testid": "distribution-amount" });
  var amountField = field(t("Amount"), amount);
  var amountLabel = amountField.querySelector("label");
  var message = alertBox("distribution-error");
  function sync() {
    amountField.hidden = kind.value === "total";
    amountLabel.textContent = kind.value === "percent" ? t("Percentage (1 to 100)") : t("Amount in dollars");
    amount.max = kind.value === "percent" ? "100" : "";
  }
  kind.onchange = sync;
  var form = el("form", { "class": "form", novalidate: "" }, [
    field(t("How much of your pay should go to this account?"), kind), amountField, message,
    el("button", { type: "submit", "class": "primary", "data-testid": "continue", text: t("Continue") })]);
  form.onsubmit = function (event) {
    event.preventDefault();
    var value = Number(amount.value);
    if (kind.value !== "total" && (!(value > 0) || (kind.value === "percent" && value > 100))) {
      say(message, kind.value === "percent" ? t("Enter a percentage from 1 to 100.") :
        t("Enter an amount greater than zero."));
      amount.focus();
      return;
    }
    state.distribution = kind.value === "total" ? { type: "total" } :
      { type: kind.value, amount: value };
    interaction("Chose Distribution", { companyId: company._id, type: kind.value });
    remember(function () { depositSetup(company); });
    screens.login(company, state.loginOptions);
  };
  screen("direct-deposit-setup", "Direct Deposit", [
    companyHero(company, companyTitle(company, t("Direct deposit at {company}")),
                t("Choose how much of each paycheck goes to your account.")), form],
         { back: true, focus: kind });
  sync();
}

export function manualFallback(company, afterFailure) {
  var named = { company: company.name };
  var steps = [
    t("Ask {company}'s payroll team (or your HR portal) how to change your direct deposit.", named),
    t("Give them your account and routing numbers, or a signed direct deposit form."),
    t("Check your next pay stub to see that the change is in place.")
  ].map(function (text) { return el("li", { text: text }); });
  screen("manual-fallback", "Manual Instructions", [
    companyHero(company, companyTitle(company, t("Update your deposit at {company}")), null),
    el("p", { "data-testid": "manual-instructions", "class": "lead",
              text: afterFailure ?
                t("You can make this change with {company} directly. Give your employer's payroll " +
                  "team your account and routing numbers, or a direct deposit form.", named) :
                t("{company} can't be connected online. Give your employer's payroll " +
                  "team your account and routing numbers, or a direct deposit form.", named) }),
    el("ol", { "class": "card numbered" }, steps),
    el("div", { "class": "actions" }, [
      button("primary", t("Get a deposit form"), function () {
        remember(function () { manualFallback(company, afterFailure); });
        depositPdf(company); })])
  ], { back: true });
}

export function depositPdf(company) {
  var link = el("a", { href: "/sdk/deposit-form.pdf?companyId=" + encodeURIComponent(company._id) +
                       "&publicToken=" + encodeURIComponent(state.token),
                       target: "_blank", "class": "primary", "data-testid": "deposit-pdf" },
                [icon("document"), el("span", { text: t("Download the form (PDF)") })]);
  link.onclick = function (event) {
    // The host page opens it (<prefix>-open-url): an iframe may not open windows itself.
    event.preventDefault();
    interaction("Downloaded Deposit Form", { companyId: company._id });
    send("open-url", { url: new URL(link.getAttribute("href"), window.location.href).href });
  };
  screen("generate-deposit-pdf", "Deposit Form", [
    companyHero(company, companyTitle(company, t("Deposit form for {company}")),
                t("Fill in your account details, sign the form, and hand it to {company}'s payroll team.",
                  { company: company.name })),
    el("div", { "class": "actions" }, [link])
  ], { back: true });
}

export function addCard(company) {
  var number = el("input", { inputmode: "numeric", autocomplete: "cc-number",
                             "data-testid": "card-number" });
  var expiry = el("input", { autocomplete: "cc-exp", placeholder: t("MM/YY"), "data-testid": "card-expiry" });
  var message = alertBox("card-error");
  var form = el("form", { "class": "form", novalidate: "" }, [field(t("Card number"), number),
    field(t("Expiry date (MM/YY)"), expiry), message,
    el("button", { type: "submit", "class": "primary", "data-testid": "continue", text: t("Continue") })]);
  form.onsubmit = function (event) {
    event.preventDefault();
    var digits = number.value.replace(/\D/g, "");
    var parts = expiry.value.split("/");
    if (digits.length < 12 || parts.length !== 2) {
      say(message, t("Check the card number and expiry date."));
      return;
    }
    state.paymentMethod = { type: "card", _id: "card-" + digits.slice(-4), title: "Card " + digits.slice(-4),
      lastFour: digits.slice(-4), brand: digits.charAt(0) === "4" ? "visa" : "card",
      expiry: "20" + parts[1].trim() + "-" + parts[0].trim().padStart(2, "0") + "-01T00:00:00Z" };
    interaction("Added Card", { lastFour: digits.slice(-4) });
    remember(function () { addCard(company); });
    if (company) { screens.openCompany(company, state.refusal, "login-company"); }
    else { screens.search(false); }
  };
  screen("add-card", "Add Card", [
    iconHero("card", el("h1", { text: t("Add a card") }),
             company ? t("The card you want {company} to charge.", { company: company.name }) :
               t("The card you want to pay with.")),
    form]);
}
