/* The sandbox dashboard: live tasks, events and deliveries of one tenant, and controls.
 *
 * It calls the control plane with the tenant's keys, taken from #key=&secret= in the
 * address (a fragment: never sent to the server, and removed from the address and the
 * history at once), the form, or this browser's storage, and refreshes every second.
 */
(function () {
  "use strict";
  var keys = { key: "", secret: "" };
  var $ = function (id) { return document.getElementById(id); };

  function api(method, path, body) {
    return fetch(path, {
      method: method,
      headers: { "content-type": "application/json", "x-api-key": keys.key, "x-api-secret": keys.secret },
      body: body === undefined ? undefined : JSON.stringify(body)
    }).then(function (response) {
      return response.json().then(function (json) {
        if (!response.ok) { throw new Error((json.error && json.error.message) || response.statusText); }
        return json;
      });
    });
  }

  function say(text) { $("message").textContent = text || ""; }
  function cell(text, className) {
    var td = document.createElement("td");
    if (className) {
      var pill = document.createElement("span");
      pill.className = "pill " + className;
      pill.textContent = text;
      td.appendChild(pill);
    } else { td.textContent = text == null ? "" : String(text); }
    return td;
  }
  function row(cells, onclick) {
    var tr = document.createElement("tr");
    cells.forEach(function (td) { tr.appendChild(td); });
    if (onclick) { tr.className = "clickable"; tr.onclick = onclick; }
    return tr;
  }
  function short(id) { return id ? String(id).slice(-8) : ""; }

  function refresh() {
    if (!keys.key) { return Promise.resolve(); }
    return Promise.all([
      api("GET", "/_sandbox/clock").then(function (json) {
        var clock = json.data;
        $("clock").textContent = clock.now + " (" + clock.mode + ", " + clock.pendingJobs +
          " pending, " + clock.backgroundJobs + " background)";
      }),
      api("GET", "/_sandbox/tasks?limit=50").then(function (json) {
        var body = $("tasks");
        body.textContent = "";
        json.data.forEach(function (task) {
          body.appendChild(row([cell(short(task.id)), cell(task.user.identifier), cell(task.product),
            cell(task.scenario), cell(task.status, task.status), cell(task.reason)]));
        });
      }),
      api("GET", "/_sandbox/events?limit=100").then(function (json) {
        var body = $("events");
        body.textContent = "";
        json.data.slice().reverse().forEach(function (event) {
          body.appendChild(row([cell(event.time.slice(11, 23)), cell(event.eventType),
            cell(event.userIdentifier), cell(short(event.task)), cell(event.delivery, event.delivery)],
            function () { $("event-detail").textContent = JSON.stringify(event, null, 2); }));
        });
      })
    ]).then(function () { say(""); }).catch(function (error) { say(error.message); });
  }

  function connect(key, secret) {
    keys = { key: key, secret: secret };
    try { localStorage.setItem("payroll-sandbox-keys", JSON.stringify(keys)); } catch (e) { /* private mode */ }
    $("api-key").value = key;
    $("api-secret").value = secret;
    api("GET", "/_sandbox/scenarios").then(function (json) {
      var select = $("task-scenario");
      select.textContent = "";
      json.data.filter(function (s) { return s.kind === "task"; }).forEach(function (s) {
        var option = document.createElement("option");
        option.value = s.name; option.textContent = s.name; option.title = s.description;
        if (s.name === "happy-path") { option.selected = true; }
        select.appendChild(option);
      });
      $("tenant").textContent = "tenant key " + key;
    }).catch(function (error) { say(error.message); });
    fetch("/_sandbox/schemas/events").then(function (r) { return r.json(); }).then(function (json) {
      var select = $("trigger-type");
      select.textContent = "";
      json.data.forEach(function (type) {
        var option = document.createElement("option");
        option.textContent = type;
        select.appendChild(option);
      });
    });
    api("GET", "/_sandbox/webhooks/endpoints").then(function (json) {
      if (json.data.length) { $("webhook-url").value = json.data[0].url; }
    }).catch(function () {});
    refresh();
  }

  function act(promise, done) {
    return promise.then(function (json) { say(done || ""); refresh(); return json; })
      .catch(function (error) { say(error.message); });
  }

  $("credentials").onsubmit = function (event) {
    event.preventDefault();
    connect($("api-key").value.trim(), $("api-secret").value.trim());
  };
  Array.prototype.forEach.call(document.querySelectorAll("[data-advance]"), function (button) {
    button.onclick = function () {
      act(api("POST", "/_sandbox/clock/advance", { seconds: Number(button.getAttribute("data-advance")) }));
    };
  });
  $("run-until-idle").onclick = function () { act(api("POST", "/_sandbox/clock/run-until-idle")); };
  $("task-form").onsubmit = function (event) {
    event.preventDefault();
    act(api("POST", "/task/create", { identifier: $("task-user").value, company: $("task-company").value,
      product: $("task-product").value, scenario: $("task-scenario").value }), "Task created.");
  };
  $("trigger-form").onsubmit = function (event) {
    event.preventDefault();
    var body = { eventType: $("trigger-type").value };
    if ($("trigger-user").value) { body.identifier = $("trigger-user").value; }
    act(api("POST", "/_sandbox/events/trigger", body), "Event emitted.");
  };
  $("company-form").onsubmit = function (event) {
    event.preventDefault();
    act(api("POST", "/_sandbox/companies/" + encodeURIComponent($("company-id").value) + "/status",
      { status: $("company-status").value }), "Company status set.");
  };
  $("webhook-form").onsubmit = function (event) {
    event.preventDefault();
    var url = $("webhook-url").value.trim();
    act(api("PUT", "/_sandbox/webhooks/endpoints", { endpoints: url ? [{ url: url }] : [] }),
        "Webhook endpoint saved.");
  };

  var given = new URLSearchParams(window.location.hash.replace(/^#/, ""));
  if (window.location.hash) {
    history.replaceState(null, "", window.location.pathname + window.location.search);
  }
  var stored = null;
  try { stored = JSON.parse(localStorage.getItem("payroll-sandbox-keys") || "null"); } catch (e) { stored = null; }
  if (given.get("key") && given.get("secret")) { connect(given.get("key"), given.get("secret")); }
  else if (stored && stored.key) { connect(stored.key, stored.secret); }
  setInterval(refresh, 1000);
})();
