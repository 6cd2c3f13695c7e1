/* Signing in at the company: the login form (a real task starts when it is sent), the
 * second step some sandbox usernames ask for, and the reconnect of a linked account
 * that resumes without credentials. */

import { api, interaction, loginBody } from "./flow-api.js";
import { remember, screens, state } from "./flow-state.js";
import { alertBox, busy, companyHero, companyTitle, el, errorSentence, field, iconHero, logo,
         nextId, say, screen, t } from "./flow-ui.js";

function loginHint() {
  var items = [
    ["test-good", t("signs in and succeeds")],
    ["test-bad", t("wrong password: the sign-in is refused here")],
    ["test-failure", t("signs in, then the update fails")],
    ["test-code-mfa", t("asks for a verification code")],
    ["test-question-mfa", t("asks a security question")],
    ["test-distribution-not-supported", t("signs in, then the deposit fails: the payroll system can't set it up")]
  ].map(function (pair) {
    return el("li", {}, [el("code", { text: pair[0] }), document.createTextNode(": " + pair[1])]);
  });
  return el("details", { "class": "hint", "data-testid": "login-hint" }, [
    el("summary", { text: t("Testing? Use a sandbox username") }),
    el("ul", {}, items),
    el("p", { text: t("Any password and any verification answer work. You can add @test.com " +
                      "to a username. test- followed by a scenario name runs that scenario.") })
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
                              "data-working": t("Signing in…"), text: t("Sign in") });
  var form = el("form", { "class": "form", "aria-label": t("Sign in to {company}", { company: company.name }),
                          novalidate: "" },
                [field(t("Username"), username), field(t("Password"), password), message, submit]);
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
      say(message, t("Enter your username and password."));
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
    companyHero(company, companyTitle(company, t("Sign in to {company}")),
                t("Use the username and password you use at {company}.", { company: company.name })),
    form, loginHint()
  ], { back: !options.locked });
}

/* Spec (linkedAccount): a reconnect "often does not require re-entering credentials".
 * The session said this one resumes: the tasks start at once, without the login form. */
export function resume(company) {
  state.company = company;
  interaction("Resumed Linked Account", { companyId: company._id });
  api("POST", "/sdk/login", loginBody(company)).then(function (json) {
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
                              "data-working": t("Checking…"), text: isCode ? t("Verify") : t("Continue") });
  // The prompt is the sandbox's (domain/sdk.py MFA_CHALLENGES), in English: said through t().
  var form = el("form", { "class": "form", novalidate: "" }, [
    isCode ? field(t("Verification code"), answer, t(challenge.prompt)) :
             field(t(challenge.prompt), answer),
    message, submit]);
  answer.oninput = function () { answer.removeAttribute("aria-invalid"); };
  form.onsubmit = function (event) {
    event.preventDefault();
    if (!answer.value.trim()) {
      say(message, isCode ? t("Enter the code.") : t("Enter your answer."));
      answer.setAttribute("aria-invalid", "true");
      answer.focus();
      return;
    }
    busy(submit, true);
    interaction("Submitted MFA", { companyId: company._id, type: challenge.type });
    api("POST", "/sdk/login", Object.assign({}, body, { mfaAnswer: answer.value.trim() })).then(function (json) {
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
    iconHero(isCode ? "shield" : "question",
      el("h1", { text: isCode ? t("Enter your verification code") : t("Answer your security question") }),
      isCode ? t("For your security, {company} needs one more step.", { company: company.name }) :
        t("{company} asks one of your security questions to make sure it's you.", { company: company.name })),
    form,
    el("p", { "class": "hint pair-line" }, [mark, " " + t("Signing in to {company}", { company: company.name })])
  ], { back: true });
}
