/* What one run of the hosted flow knows: the bootstrap the page embeds (flow.html: the
 * sandbox's sentences and hints, the configuration or its error), the handshake id, and
 * the state its screens share. */

export var boot = JSON.parse(document.getElementById("bootstrap").textContent);
export var PREFIX = boot.prefix;
export var MESSAGES = boot.messages || { reasons: {}, errors: {}, fallback: "Something went wrong." };
export var HINTS = boot.flow || { nextSteps: {}, mfaScenarios: [] };
export var hId = new URLSearchParams(window.location.hash.slice(1)).get("hId") || "";
export var config = boot.config || {};
export var nav = (config.theme && config.theme.navigationOptions) || {};
export var state = { token: null, parentOrigin: null, session: null, history: [], company: null,
                     refusal: null, target: null, paymentMethod: null, distribution: null,
                     pendingTask: null, left: false, ended: false, popular: {},
                     loginOptions: {}, payrollOnly: false,
                     // Every task the flow started, as the host hears of them at its end.
                     tasks: [], zeroResults: false,
                     // Called with each screen's name once it is drawn (flow-autopilot.js).
                     onScreen: null };
export var app = document.getElementById("app");

/* The screens by name, filled by flow.js: a module opens another module's screen through
 * it (screens.login(company)) and imports none of them, so the imports form no circle. */
export var screens = {};

export function remember(render) { state.history.push(render); }

export function operations() {
  return (config.tasks || []).map(function (task) { return task.operation || task.product; })
    .filter(function (o) { return !!o; });
}

/* Whether the user may leave this company for another (not when the host locked the
 * flow to it, nor when reconnecting a linked account). */
export function mayChooseAnother(options) {
  return nav.showBackButton !== false && !config.linkedAccount && !(options && options.locked);
}
