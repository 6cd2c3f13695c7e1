/* How the flow looks: the user's words (t(), in the configured language) and sentences
 * (from the sandbox), elements and icons, the frame every screen shares (bar, back and
 * close, focus), and companies' logos and brand colours. */

import { close, handsOff, interaction } from "./flow-api.js";
import { MESSAGES, app, nav, state } from "./flow-state.js";

var uid = 0;

/* A new number for an element's id (a label names its control by id). */
export function nextId() { return ++uid; }

// -- words -------------------------------------------------------------------------------

/* The screens write their words in English and say them through t(): in the configured
 * language when the sandbox sent its translations (boot.messages.words, keyed by the
 * English; only for `language: "es"`), else as written. `{name}` placeholders are filled
 * from `values`, so a translation puts a name where its own grammar wants it. */
export function t(english, values) {
  // Read at each call: an autopilot's language replaces them before the first screen.
  var words = MESSAGES.words || {};
  var text = Object.prototype.hasOwnProperty.call(words, english) ? words[english] : english;
  return text.replace(/\{(\w+)\}/g, function (placeholder, name) {
    return values && values[name] !== undefined ? String(values[name]) : placeholder;
  });
}

function fill(sentence, company, meta) {
  var name = company && company.name ? company.name : t("the company");
  var partner = meta && meta.managedBy && meta.managedBy.name ? meta.managedBy.name :
    t("another provider");
  var text = sentence.replace(/\{company\}/g, name).replace(/\{partner\}/g, partner);
  return text.charAt(0).toUpperCase() + text.slice(1);
}
export function reasonSentence(reason, company, meta) {
  return fill(MESSAGES.reasons[reason] || MESSAGES.reasons["unknown-failure"] ||
              MESSAGES.fallback, company, meta);
}
export function errorSentence(code, company) {
  return fill(MESSAGES.errors[code] || MESSAGES.fallback, company);
}

// -- rendering ---------------------------------------------------------------------------

export function el(tag, attributes, children) {
  var node = document.createElement(tag);
  Object.keys(attributes || {}).forEach(function (key) {
    if (/^on/.test(key)) {  // a handler, as a property
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
var ICON_LOOK = { viewBox: "0 0 24 24", fill: "none", stroke: "currentColor", "stroke-width": "2",
                  "stroke-linecap": "round", "stroke-linejoin": "round", "aria-hidden": "true",
                  focusable: "false" };
export function icon(name) {
  var svg = document.createElementNS(SVG, "svg");
  Object.keys(ICON_LOOK).forEach(function (key) { svg.setAttribute(key, ICON_LOOK[key]); });
  ICONS[name].forEach(function (d) {
    var path = document.createElementNS(SVG, "path");
    path.setAttribute("d", d);
    svg.appendChild(path);
  });
  return svg;
}

/* A labelled field: the <label> names the control for screen readers and is clickable. */
export function field(label, control, hint, options) {
  options = options || {};
  var id = "field-" + nextId();
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

export function alertBox(testId) {
  return el("p", { "class": "alert", role: "alert", "data-testid": testId });
}
/* An inline message: an icon and the sentence (its text is the sentence alone). */
export function say(box, text) {
  box.textContent = "";
  if (text) { box.appendChild(icon("alert")); box.appendChild(el("span", { text: text })); }
}

export function button(kind, text, onclick, attributes) {
  return el("button", Object.assign({ type: "button", "class": kind, text: text, onclick: onclick }, attributes));
}

/* A submit button that shows it is working while its request runs. */
export function busy(submit, working) {
  if (!submit.getAttribute("data-label")) { submit.setAttribute("data-label", submit.textContent); }
  submit.disabled = working;
  submit.textContent = "";
  if (working) {
    submit.appendChild(el("span", { "class": "spinner", "aria-hidden": "true" }));
    submit.appendChild(document.createTextNode(submit.getAttribute("data-working") || t("Please wait…")));
  } else {
    submit.textContent = submit.getAttribute("data-label");
  }
}

/* `title` is English: the user reads it translated, the host's interaction names it as is. */
export function screen(name, title, children, options) {
  options = options || {};
  state.zeroResults = false;
  document.getElementById("title").textContent = t(title);
  document.title = t(title) + " · " + t("Connect your payroll");
  var back = document.getElementById("back");
  back.textContent = "";
  var canGoBack = options.back && nav.showBackButton !== false && state.history.length > 0;
  if (canGoBack) {
    back.appendChild(el("button", { type: "button", "class": "icon-button", "data-testid": "back",
      "aria-label": t("Back"), onclick: function () { var previous = state.history.pop(); previous(); } },
      [icon("back"), nav.showBackButtonText === false ? null : el("span", { text: t("Back") })]));
  }
  var closer = document.getElementById("close");
  closer.textContent = "";
  if (nav.showCloseButton !== false) {
    // The flow's last screens close at once; before them the user confirms (the exit
    // prompt), unless the host page asks for it itself (handoff exit-prompt).
    var leave = options.onClose || function (extra) {
      close(options.closeReason || (state.zeroResults ? "zero-search-results" : "unknown"), extra);
    };
    var prompt = !options.closeReason && (!options.onClose || options.confirmExit);
    closer.appendChild(el("button", { type: "button", "class": "icon-button", "data-testid": "close",
      "aria-label": t("Close"), onclick: function () {
        if (!prompt) { return leave(); }
        if (handsOff("exit-prompt")) { return leave({ handoff: "exit-prompt" }); }
        exitPrompt(leave);
      } }, [icon("x")]));
  }
  app.textContent = "";
  app.onkeydown = null;
  app.setAttribute("data-screen", name);
  app.scrollTop = 0;
  children.forEach(function (child) { if (child) { app.appendChild(child); } });
  // A screen taller than the frame (a long company name) scrolls: the keyboard can scroll it too.
  if (app.scrollHeight > app.clientHeight) { app.setAttribute("tabindex", "0"); }
  else { app.removeAttribute("tabindex"); }
  var focus = options.focus || app.querySelector("input, select") || app.querySelector("h1");
  if (focus) {
    if (focus.tagName === "H1") { focus.setAttribute("tabindex", "-1"); }
    focus.focus();
  }
  interaction("Viewed " + title + " Page");
  if (state.onScreen) { state.onScreen(name); }  // an autopilot plays it (flow-autopilot.js)
}

/* "Are you sure you want to exit?" over the current screen (which goes on beneath it: a
 * task's progress keeps following the task). */
function exitPrompt(leave) {
  var modal = document.querySelector(".modal");
  var opener = document.activeElement;
  var previous = modal.querySelector(".exit-prompt");
  if (previous) { previous.remove(); }
  var heading = el("h2", { id: "exit-title", text: t("Are you sure you want to exit?"), tabindex: "-1" });
  var stay = function () {
    panel.remove();
    interaction("Stayed in Flow");
    if (opener && opener.focus) { opener.focus(); }
  };
  var panel = el("div", { "class": "exit-prompt", role: "alertdialog", "aria-modal": "true",
                          "aria-labelledby": "exit-title", "data-testid": "exit-prompt" }, [
    el("div", { "class": "exit-card" }, [
      iconMark("alert"), heading,
      el("p", { text: state.pendingTask ? t("Your connection is still in progress. If you exit now, " +
                "it carries on without you and you won't see how it ends.") :
                t("You haven't finished connecting. Your progress will be lost.") }),
      el("div", { "class": "actions" }, [
        button("primary", t("Keep going"), stay, { "data-testid": "exit-stay" }),
        button("plain", t("Exit"), function () { panel.remove(); leave(); },
               { "data-testid": "exit-confirm" })])])]);
  panel.onkeydown = function (event) { if (event.key === "Escape") { stay(); } };
  modal.appendChild(panel);
  heading.focus();
  interaction("Viewed Exit Prompt");
}

function iconMark(name) {
  return el("span", { "class": "hero-icon danger", "aria-hidden": "true" }, [icon(name)]);
}

// -- companies: logos and brand colours --------------------------------------------------

var HEX = /^#(?:[0-9a-f]{3}){1,2}$/i;
function rgb(colour) {
  var hex = colour.slice(1);
  if (hex.length === 3) { hex = hex.replace(/./g, function (c) { return c + c; }); }
  return [0, 2, 4].map(function (i) { return parseInt(hex.slice(i, i + 2), 16); });
}
export function brandColour(company) {
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
export function logo(company, size) {
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

/* A company in a list: a button with its logo, its name and `meta` ({text, warn}) below. */
export function companyRow(company, attributes, meta) {
  return el("li", {}, [el("button", Object.assign({ type: "button" }, attributes), [
    logo(company, "sm"),
    el("span", { "class": "text" }, [el("span", { "class": "name", text: company.name }),
      meta ? el("span", { "class": "meta" + (meta.warn ? " warn" : ""), text: meta.text }) : null]),
    el("span", { "class": "chevron", "aria-hidden": "true" }, [icon("chevron")])])]);
}

function badged(node, kind) {
  var marks = { success: "check", failure: "x", warning: "wrench" };
  node.appendChild(el("span", { "class": "badge badge-" + kind, "aria-hidden": "true" }, [icon(marks[kind])]));
  return node;
}

/* A heading that names the company: `sentence` (said through t(), with its {company}
 * placeholder left in) around the name (data-testid company-name). */
export function companyTitle(company, sentence) {
  var around = sentence.split("{company}");
  return el("h1", {}, [around[0] || null, el("span", { "data-testid": "company-name", text: company.name }),
                       around[1] || null]);
}

/* The top of a company's screen: its logo on a band of its colour, the heading, a sentence. */
export function companyHero(company, heading, lead, options) {
  options = options || {};
  var mark = logo(company, options.size || "xl");
  if (options.badge) { badged(mark, options.badge); }
  return el("div", { "class": "hero" + (options.band === false ? "" : " hero-band"),
                     style: options.band === false ? {} : { background: tint(brandColour(company), 0.1) } },
            [mark, heading, lead ? el("p", { "class": "lead", text: lead }) : null]);
}

export function iconHero(name, heading, lead, tone) {
  return el("div", { "class": "hero" }, [
    el("div", { "class": "hero-icon" + (tone ? " " + tone : ""), "aria-hidden": "true" }, [icon(name)]),
    heading, lead ? el("p", { "class": "lead", text: lead }) : null]);
}
