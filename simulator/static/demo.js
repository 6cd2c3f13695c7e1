/* The demo host page: a public token from its own server, then the hosted flow; every SDK
 * callback and every webhook the customer's backend received, in plain words, with the raw
 * JSON folded away. No keys here: POST /demo/token mints the token, GET /demo/webhooks
 * reads the sandbox's own demo receiver, POST /demo/reset puts the demo tenant back, and
 * GET /demo/profiles with PUT /demo/profile choose whose payroll the demo user has (bound
 * before the flow opens, so the linked account it makes takes that profile). */
(function () {
  "use strict";
  var POLL_MS = 1000;
  var $ = function (id) { return document.getElementById(id); };
  var flow = null;                        // the open flow's handle
  var inbox = { generation: null, last: 0, reading: false };

  function el(tag, className, text) {
    var node = document.createElement(tag);
    if (className) { node.className = className; }
    if (text != null) { node.textContent = String(text); }
    return node;
  }

  /* An id kept whole on one line: cut with an ellipsis where it does not fit, all of it on
   * hover (title) and for screen readers. */
  function idNode(id, prefix) {
    var node = el("span", "id", (prefix || "") + id);
    node.title = id;
    return node;
  }

  function words(code) { return String(code || "unknown").replace(/-/g, " "); }

  // -- the SDK's callbacks --------------------------------------------------------------------

  var INTERACTIONS = {
    "Initialized": function () { return "Opened the flow"; },
    "Selected Company": function (v) { return "Picked " + (v.name || "a company"); },
    "Chose Another Company": function () { return "Went back to choose another company"; },
    "Company Unavailable": function (v) { return "The company can't be used now (" + words(v.code) + ")"; },
    "Search Failed": function (v) { return "Search failed (" + words(v.code) + ")"; },
    "Submitted Credentials": function () { return "Sent the sign-in details"; },
    "Login Refused": function (v) { return "Sign-in refused (" + words(v.code) + ")"; },
    "Resumed Linked Account": function () { return "Picked up an account already connected"; },
    "Submitted MFA": function () { return "Sent the verification code"; },
    "MFA Refused": function (v) { return "Verification refused (" + words(v.code) + ")"; },
    "Started Task": function () { return "Started the task"; },
    "Task Completed": function () { return "The task completed"; },
    "Task Failed": function (v) { return "The task failed (" + words(v.reason) + ")"; },
    "Retried": function () { return "Tried again"; },
    "Chose Distribution": function (v) { return "Chose how the pay is split (" + words(v.type) + ")"; },
    "Downloaded Deposit Form": function () { return "Downloaded the direct deposit form"; },
    "Added Card": function (v) { return "Added a card ending in " + v.lastFour; },
    "Left Flow": function () { return "Left the flow"; },
    "Error": function (v) { return "Something went wrong (" + words(v.code) + ")"; }
  };

  function interactionWords(payload) {
    var name = String(payload.name || "");
    var value = payload.value || {};
    var viewed = /^Viewed (.+) Page$/.exec(name);
    if (viewed) { return "Showed the " + viewed[1].toLowerCase() + " screen"; }
    return INTERACTIONS[name] ? INTERACTIONS[name](value) : name;
  }

  function callback(kind, payload) {
    var item = el("li", "item");
    var what = el("p", "what");
    var label = kind;
    if (kind === "onInteraction") {
      what.textContent = interactionWords(payload);
      label = "onInteraction \u00b7 " + payload.name;
    } else if (kind === "onFinish") {
      what.appendChild(document.createTextNode("The flow finished: your app gets task "));
      what.appendChild(idNode(payload.taskId || ""));
    } else {
      what.textContent = "The flow closed (" + words(payload.reason) + ")";
    }
    item.appendChild(what);
    var meta = el("p", "meta");
    meta.appendChild(el("code", "name", label));
    item.appendChild(meta);
    item.appendChild(raw("Callback JSON", payload));
    $("callbacks").appendChild(item);
    $("callbacks-empty").hidden = true;
  }

  function raw(title, value) {
    var details = el("details");
    details.appendChild(el("summary", null, title));
    var pre = el("pre", null, JSON.stringify(value, null, 2));
    pre.tabIndex = 0;  // scrolls sideways with the keyboard
    details.appendChild(pre);
    return details;
  }

  function clear(list, empty) {
    $(list).textContent = "";
    $(empty).hidden = false;
  }

  // -- the webhooks the demo receiver got -----------------------------------------------------

  function webhook(record) {
    var item = el("li", "item");
    item.setAttribute("data-event-type", record.eventType);
    item.appendChild(el("p", "what", record.summary + (record.repeat ? " (again: same ce-id)" : "")));
    var meta = el("p", "meta");
    meta.appendChild(el("span", "signature " + record.signature,
      record.signature === "valid" ? "\u2713 signature valid" : "not signed"));
    meta.appendChild(el("code", "name", record.eventType));
    if (record.user) { meta.appendChild(el("span", "user", record.user)); }
    meta.appendChild(idNode(record.ceId, "ce-id "));
    item.appendChild(meta);
    item.appendChild(raw("Webhook: headers and body", { headers: record.headers, body: record.body }));
    // In the order things happened (eventTime, then arrival): deliveries sent at once may
    // arrive in any order.
    var key = order(record);
    item.setAttribute("data-order", key);
    var after = Array.prototype.find.call($("webhooks").children, function (other) {
      return other.getAttribute("data-order") > key;
    });
    $("webhooks").insertBefore(item, after || null);
    $("webhooks-empty").hidden = true;
  }

  function order(record) {
    var time = Date.parse(record.body.eventTime);
    return (isNaN(time) ? "" : new Date(time).toISOString()) + "/" + ("000000000" + record.sequence).slice(-10);
  }

  function readInbox() {
    if (inbox.reading) { return; }
    inbox.reading = true;
    var asked = inbox.last, again = false;
    fetch("/demo/webhooks?after=" + asked)
      .then(function (response) { return response.ok ? response.json() : null; })
      .then(function (json) {
        if (!json) { return; }
        if (json.inbox !== inbox.generation) {  // a new inbox (the demo was reset): start over
          inbox.generation = json.inbox;
          inbox.last = 0;
          clear("webhooks", "webhooks-empty");
          if (asked !== 0) { again = true; return; }
        }
        json.data.forEach(function (record) {
          if (record.sequence > inbox.last) { webhook(record); inbox.last = record.sequence; }
        });
      })
      .catch(function () { /* the next poll tries again */ })
      .then(function () {
        inbox.reading = false;
        if (again) { readInbox(); }
      });
  }

  // -- actions ----------------------------------------------------------------------------------

  function post(path) { return send("POST", path).then(function (json) { return json.data; }); }

  /* The answer's whole body (`data` and the fields beside it), or an error saying why. */
  function send(method, path, body) {
    var init = { method: method };
    if (body !== undefined) {
      init.headers = { "content-type": "application/json" };
      init.body = JSON.stringify(body);
    }
    return fetch(path, init).then(function (response) {
      return response.json().then(function (json) {
        if (!response.ok) { throw new Error(json.error ? json.error.message : String(response.status)); }
        return json;
      });
    });
  }

  function say(text, id) {
    var status = $("status");
    status.textContent = text;
    if (id) { status.appendChild(idNode(id)); status.appendChild(document.createTextNode(".")); }
  }

  // -- whose payroll: a data profile for the demo user -------------------------------------------

  var SEED_ABOUT = $("profile-about").textContent;
  var profiles = {};                      // name -> description

  /* "gig-worker" -> "Gig worker" */
  function title(name) {
    var text = words(name);
    return text.charAt(0).toUpperCase() + text.slice(1);
  }

  function about() {
    var chosen = $("profile").value;
    $("profile-about").textContent = chosen ? profiles[chosen] : SEED_ABOUT;
  }

  /* The profiles offered, and the one bound to the demo user now (null: none). */
  function readProfiles() {
    return send("GET", "/demo/profiles").then(function (json) {
      var select = $("profile");
      select.length = 1;                  // keeps "Generated from the seed"
      profiles = {};
      json.data.forEach(function (profile) {
        profiles[profile.name] = profile.description;
        var option = el("option", null, title(profile.name));
        option.value = profile.name;
        select.appendChild(option);
      });
      select.value = json.bound && profiles[json.bound] ? json.bound : "";
      about();
    }).catch(function (error) { say("Could not read the profiles: " + error.message); });
  }

  $("profile").onchange = about;

  $("start").onsubmit = function (event) {
    event.preventDefault();
    $("connect").disabled = true;
    var chosen = $("profile").value || null;
    say("Setting whose payroll the demo user has...");
    send("PUT", "/demo/profile", { profile: chosen })
      .then(function () {
        say("Asking the server for a public token...");
        return post("/demo/token");
      })
      .then(function (token) {
        say("The flow is open for " + token.identifier + " (" +
            (chosen ? title(chosen).toLowerCase() : "payroll generated from the seed") + ").");
        flow = window.Transact.transact({
          config: { publicToken: token.publicToken, scope: "user-link",
                    tasks: [{ operation: $("operation").value }] },
          onInteraction: function (payload) { callback("onInteraction", payload); },
          onFinish: function (payload) {
            flow = null;
            callback("onFinish", payload);
            say("Finished: task ", payload.taskId);
            $("connect").disabled = false;
          },
          onClose: function (payload) {
            flow = null;
            callback("onClose", payload);
            say("Closed: " + words(payload.reason) + ".");
            $("connect").disabled = false;
          }
        });
      })
      .catch(function (error) {
        say("Could not start: " + error.message);
        $("connect").disabled = false;
      });
  };

  $("reset").onclick = function () {
    $("reset").disabled = true;
    post("/demo/reset")
      .then(function () {
        if (flow) { flow.close(); flow = null; }
        clear("callbacks", "callbacks-empty");
        clear("webhooks", "webhooks-empty");
        $("connect").disabled = false;
        say("The demo is reset: tenant demo is back to its fixtures.");
        readInbox();
        readProfiles();
      })
      .catch(function (error) { say("Could not reset: " + error.message); })
      .then(function () { $("reset").disabled = false; });
  };

  readProfiles();
  readInbox();
  setInterval(readInbox, POLL_MS);
})();
