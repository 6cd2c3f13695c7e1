/* Signing in at the company: the login form (a real task starts when it is sent), the
 * second step some sandbox usernames ask for, and the reconnect of a linked account
 * that resumes without credentials. */

import { api, interaction, loginBody } from "./flow-api.js";
import { config, remember, screens, state } from "./flow-state.js";
import { alertBox, busy, companyHero, companyTitle, el, errorSentence, field, icon, logo,
         nextId, say, screen } from "./flow-ui.js";

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

export function login(company, options) {
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
  message.id = "login-error-" + nextId();
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
      screens.progress(company, json.data, null);
    }).catch(function (error) {
      busy(submit, false);
      interaction("Login Refused", { code: error.code });
      if (error.code === "company-under-maintenance" || error.code === "company-disabled" ||
          error.code === "product-not-offered") {
        return screens.unavailable(company, { code: error.code }, options);
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
export function resume(company) {
  state.company = company;
  interaction("Resumed Linked Account", { companyId: company._id });
  var body = { companyId: company._id, linkedAccount: config.linkedAccount };
  if (config.tasks && config.tasks.length) { body.tasks = config.tasks; }
  if (config.metadata) { body.metadata = config.metadata; }
  api("POST", "/sdk/login", body).then(function (json) {
    screens.progress(company, json.data, null);
  }).catch(function (error) {
    interaction("Login Refused", { code: error.code });
    login(company, { locked: true });
  });
}

/* A second sign-in step (sandbox usernames test-code-mfa, test-question-mfa): any
 * answer passes; the login is sent again with it and the task starts. */
export function mfa(company, body, challenge) {
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
      screens.progress(company, json.data, challenge);
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
