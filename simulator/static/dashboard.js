/* The sandbox dashboard: one tenant's tasks on its virtual time axis, every event with its
 * deliveries and attempts, a resend, and controls (clock, tasks, scenario bindings, data
 * profile bindings, webhook endpoint and faults, company status, triggers).
 *
 * Keys: from #key=&secret= in the address (a fragment: never sent to the server; read on
 * load and on every change of it, and removed from the address and the history at once),
 * the sign-in form, or this browser's storage; sent in headers, never in a URL. Signed
 * out, the page is one prompt and nothing else: no clock, no lists, no controls.
 *
 * Companies are picked by name: the company fields search (POST /company/search with the
 * keys) and fill the id. Each event shows each endpoint's delivery state.
 *
 * Live updates: every second the page asks only for what changed since its cursor
 * (GET /_sandbox/events?after=<revision> and /_sandbox/tasks?after=<revision>), so a tick
 * costs the new events and attempts, not the ledger. What it keeps is bounded (MAX_*).
 */
(function () {
  "use strict";
  var TICK_MS = 1000;
  var PAGE = 500;          // changes read per tick at most (the rest come next tick)
  var MAX_EVENTS = 1000;   // events kept by the page (the oldest go first)
  var MAX_TASKS = 300;
  var LANES = 12;          // task rows on the timeline (the newest)
  var LOOSE = 40;          // events of no shown task, on their own row (the newest)
  var TABLE_EVENTS = 100, TABLE_TASKS = 50;
  var LEVEL = 30, LEVEL_TOP = 12;  // px: an event's sub-row in its lane, below the task's bar
  var GAP = 2.5;           // % of the axis: events closer than this take another sub-row
  var STEPS = [1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 10800, 21600,
               43200, 86400, 172800, 604800, 2592000];

  var keys = { key: "", secret: "" };
  var signedIn = false;
  var STORAGE = "payroll-sandbox-keys";
  var FAULTS_EVERY = 5;    // ticks between reads of the API fault rules
  var faultTicks = 0, faultsShown = "";
  var events = new Map(), tasks = new Map();
  var cursors = { events: 0, tasks: 0 };
  // What the hosted flow told the host page (GET /_sandbox/sdk/callbacks), by id.
  var callbacks = new Map(), callbackCursor = 0;
  var MAX_CALLBACKS = 1000, LOOSE_FLOWS = 3;
  var clock = null, clockShown = "";
  var selected = null;     // { kind: "event" | "task", id }
  var detailShown = "null";
  var DETAIL_HINT = "Click an event on the timeline or in the list to see its deliveries and every attempt.";
  var ticking = false, again = false, generation = 0;
  var $ = function (id) { return document.getElementById(id); };

  // -- talking to the control plane -------------------------------------------------------

  function api(method, path, body) {
    var mine = generation;
    return fetch(path, {
      method: method,
      headers: { "content-type": "application/json", "x-api-key": keys.key, "x-api-secret": keys.secret },
      body: body === undefined ? undefined : JSON.stringify(body)
    }).then(function (response) {
      return response.json().catch(function () { return {}; }).then(function (json) {
        if (!response.ok) {
          var error = new Error(problem(json) || response.statusText);
          error.status = response.status;
          // The keys stopped working (the tenant was deleted): signed out, said why.
          if (response.status === 401 && signedIn && mine === generation) { signOut(error.message); }
          throw error;
        }
        return json;
      });
    });
  }

  function problem(json) {
    var error = json && json.error;
    if (!error) { return ""; }
    var details = (error.details || []).map(function (d) { return d.path + ": " + d.message; });
    return error.message + (details.length ? " (" + details.join("; ") + ")" : "");
  }

  function say(text, ok) {
    var message = $("message");
    message.textContent = text || "";
    message.className = "message" + (ok ? " ok" : "");
  }

  function act(promise, done) {
    return promise.then(function (json) {
      say(typeof done === "function" ? done(json) : done || "", true);
      tick();
      return json;
    }).catch(function (error) { if (signedIn) { say(error.message); } })
      .then(function (json) { loadApiFaults(); return json; });  // a call may have fired a rule
  }

  // -- small builders -----------------------------------------------------------------------

  function el(tag, className, text) {
    var node = document.createElement(tag);
    if (className) { node.className = className; }
    if (text != null) { node.textContent = String(text); }
    return node;
  }
  function cell(text, pill) {
    var td = el("td");
    if (pill) { td.appendChild(el("span", "pill " + pill, text)); } else { td.textContent = text == null ? "" : String(text); }
    return td;
  }
  /* A URL, an id or a time kept on one line (the table scrolls sideways instead). */
  function nowrap(td) { td.className += (td.className ? " " : "") + "nowrap"; return td; }
  function short(id) { return id ? "\u2026" + String(id).slice(-8) : ""; }
  function seconds(iso) { return Date.parse(iso) / 1000; }
  function iso(t) { return new Date(t * 1000).toISOString(); }  // UTC: 2026-05-28T20:26:43.000Z
  function clockTime(t, withSeconds) { return iso(t).slice(11, withSeconds === false ? 16 : 19); }
  function fullTime(t) { return iso(t).slice(0, 19).replace("T", " "); }
  function duration(s) {
    s = Math.round(s);
    if (s < 120) { return s + " s"; }
    if (s < 7200) { return Math.floor(s / 60) + " min" + (s % 60 ? " " + (s % 60) + " s" : ""); }
    if (s < 172800) { return Math.floor(s / 3600) + " h" + (Math.floor(s / 60) % 60 ? " " + Math.floor(s / 60) % 60 + " min" : ""); }
    return Math.floor(s / 86400) + " days";
  }

  /* What an attempt came to: ok (2xx), failed, pending (in flight), interrupted. */
  function outcome(attempt) {
    if (attempt.error && attempt.error.indexOf("interrupted") === 0) { return "interrupted"; }
    if (attempt.error) { return "failed"; }
    if (attempt.status == null) { return "pending"; }
    return attempt.status >= 200 && attempt.status < 300 ? "ok" : "failed";
  }

  /* Each endpoint's state for an event, from the latest delivery to it (a resend after a
   * failure is what counts now): delivered, failed, retrying (a retry is due), waiting (a
   * first attempt held back on purpose), sending (in flight), interrupted. */
  function endpoints(event) {
    var byUrl = new Map();
    event.deliveries.forEach(function (d) { byUrl.set(d.url, d); });
    return Array.from(byUrl.values()).map(function (d) {
      var state = d.state;
      if (state === "pending") { state = !d.nextAttemptAt ? "sending" : d.attempts.length ? "retrying" : "waiting"; }
      return { url: d.url, state: state, resent: !!d.replay };
    });
  }
  /* One word for the event: none (no endpoint), the state its endpoints share, or mixed. */
  function overall(states) {
    if (!states.length) { return "none"; }
    var first = states[0].state;
    return states.every(function (s) { return s.state === first; }) ? first : "mixed";
  }
  var LOOK = { delivered: "delivered", failed: "failed", retrying: "pending", waiting: "pending",
               sending: "pending", interrupted: "interrupted", none: "none", mixed: "mixed" };
  function endpointName(url) {
    try {
      var parsed = new URL(url);
      return parsed.host + (parsed.pathname === "/" ? "" : parsed.pathname);
    } catch (e) { return url; }
  }
  function statesText(states) {
    if (!states.length) { return "no endpoint"; }
    return states.map(function (s) {
      return s.state + (s.state === "failed" ? " at " : " to ") + endpointName(s.url) + (s.resent ? " (resent)" : "");
    }).join(", ");
  }
  function endpointList(states) {
    var list = el("ul", "endpoints");
    if (!states.length) { list.appendChild(el("li", null)).appendChild(el("span", "pill none", "no endpoint")); }
    states.forEach(function (s) {
      var item = el("li");
      item.setAttribute("data-state", s.state);
      item.appendChild(el("span", "pill " + LOOK[s.state], s.state));
      var name = el("span", "endpoint", endpointName(s.url) + (s.resent ? " (resent)" : ""));
      name.title = s.url;
      item.appendChild(name);
      list.appendChild(item);
    });
    return list;
  }

  // -- live updates ---------------------------------------------------------------------------

  function tick() {
    if (!signedIn) { return Promise.resolve(); }
    if (ticking) { again = true; return Promise.resolve(); }  // right after this one
    ticking = true;
    again = false;
    var mine = generation;
    return Promise.all([
      api("GET", "/_sandbox/clock"),
      api("GET", "/_sandbox/events?limit=" + PAGE + "&after=" + cursors.events),
      api("GET", "/_sandbox/tasks?limit=" + PAGE + "&after=" + cursors.tasks),
      api("GET", "/_sandbox/sdk/callbacks?limit=" + PAGE + "&after=" + callbackCursor)
    ]).then(function (answers) {
      if (mine !== generation || !signedIn) { return; }  // other keys since: not this tenant's
      var moved = takeClock(answers[0].data);
      if (answers[1].reset) { callbacks.clear(); callbackCursor = 0; }  // a reset or a restore
      var changed = takeEvents(answers[1]);
      changed = takeTasks(answers[2]) || changed;
      changed = takeCallbacks(answers[3].data) || changed;
      if (changed) { render(); }
      else if (moved) {  // only time passed: the clock, the now line, running tasks' bars
        renderClock();
        keepFocus(renderTimeline);
      }
      faultTicks += 1;
      if (faultTicks >= FAULTS_EVERY) { faultTicks = 0; loadApiFaults(); }
    }).catch(function (error) { if (signedIn) { say(error.message); } })
      .then(function () {
        ticking = false;
        if (again) { tick(); }
      });
  }

  function takeClock(now) {
    var shown = now.now + now.pendingJobs + now.backgroundJobs + now.mode;
    clock = now;
    if (shown === clockShown) { return false; }
    clockShown = shown;
    return true;
  }

  function take(map, json, cursor, limit, order) {
    if (json.reset) { map.clear(); }
    json.data.forEach(function (record) { map.set(record.id, record); });
    cursors[cursor] = json.revision;
    if (map.size > limit) {
      var oldest = Array.from(map.values()).sort(order).slice(0, map.size - limit);
      oldest.forEach(function (record) { map.delete(record.id); });
    }
    return json.reset || json.data.length > 0;
  }
  function bySequence(a, b) { return a.sequence - b.sequence; }
  function byCreation(a, b) { return seconds(a.createdAt) - seconds(b.createdAt); }
  function takeEvents(json) { return take(events, json, "events", MAX_EVENTS, bySequence); }
  function takeTasks(json) { return take(tasks, json, "tasks", MAX_TASKS, byCreation); }
  function takeCallbacks(list) {
    list.forEach(function (entry) { callbacks.set(entry.id, entry); callbackCursor = entry.id; });
    Array.from(callbacks.keys()).slice(0, Math.max(0, callbacks.size - MAX_CALLBACKS))
      .forEach(function (id) { callbacks.delete(id); });
    return list.length > 0;
  }

  /* The flow's messages by its run, each run with the task it started (if it did). */
  function flows() {
    var byFlow = new Map();
    callbacks.forEach(function (entry) {
      var flow = byFlow.get(entry.flow);
      if (!flow) { flow = { id: entry.flow, identifier: entry.identifier, task: null, entries: [] };
                   byFlow.set(entry.flow, flow); }
      flow.entries.push(entry);
      var value = entry.payload.value || {};
      if (!flow.task && entry.payload.name === "Started Task" && value.taskId) { flow.task = value.taskId; }
      if (!flow.task && entry.payload.taskId) { flow.task = entry.payload.taskId; }
    });
    return Array.from(byFlow.values());
  }
  // -- drawing --------------------------------------------------------------------------------

  function render() {
    renderClock();
    keepFocus(function () {
      renderTimeline();
      renderTables();
    });
    renderDetail();
  }

  /* Redraw without losing the keyboard's place: the element focused before (known by its
   * data-focus) is focused again after. */
  function keepFocus(draw) {
    var active = document.activeElement;
    var key = active && active.getAttribute ? active.getAttribute("data-focus") : null;
    draw();
    if (!key) { return; }
    var again = Array.prototype.filter.call(document.querySelectorAll("[data-focus]"),
      function (node) { return node.getAttribute("data-focus") === key; })[0];
    if (again) { again.focus(); }
  }

  function mark(node, key, current) {
    node.setAttribute("data-focus", key);
    if (current) { node.setAttribute("aria-current", "true"); }
  }
  /* A button that reads as a link; `focusKey` and `current` as mark() takes them. */
  function link(text, label, focusKey, current) {
    var button = el("button", "link", text);
    button.type = "button";
    button.setAttribute("aria-label", label);
    mark(button, focusKey, current);
    return button;
  }
  function isSelected(kind, id) { return !!selected && selected.kind === kind && selected.id === id; }

  function renderClock() {
    if (!clock) { return; }
    $("clock").textContent = fullTime(clock.timestamp) + " UTC";
    $("clock-detail").textContent = clock.mode + " clock \u00b7 " + clock.pendingJobs + " pending, " +
      clock.backgroundJobs + " background jobs";
  }

  function lanes() {
    var shown = Array.from(tasks.values()).sort(byCreation).slice(-LANES);
    var ids = new Set(shown.map(function (t) { return t.id; }));
    var byTask = new Map(), loose = [];
    Array.from(events.values()).sort(bySequence).forEach(function (event) {
      if (event.task && ids.has(event.task)) {
        if (!byTask.has(event.task)) { byTask.set(event.task, []); }
        byTask.get(event.task).push(event);
      } else { loose.push(event); }
    });
    var told = new Map(), untold = [];
    flows().forEach(function (flow) {
      if (flow.task && ids.has(flow.task)) {
        told.set(flow.task, (told.get(flow.task) || []).concat(flow.entries));
      } else { untold.push(flow); }
    });
    var rows = shown.map(function (task) {
      return { task: task, events: byTask.get(task.id) || [], callbacks: told.get(task.id) || [] };
    });
    untold.slice(-LOOSE_FLOWS).forEach(function (flow) {
      rows.push({ task: null, flow: flow, events: [], callbacks: flow.entries });
    });
    if (loose.length) { rows.push({ task: null, events: loose.slice(-LOOSE), callbacks: [] }); }
    return rows;
  }

  function moments(row) {
    var times = [];
    if (row.task) {
      times.push(seconds(row.task.createdAt));
      row.task.history.forEach(function (h) { times.push(seconds(h.at)); });
    }
    row.callbacks.forEach(function (entry) { times.push(seconds(entry.time)); });
    row.events.forEach(function (event) { times.push.apply(times, eventTimes(event)); });
    return times;
  }

  /* An event's time, then each attempt's and each retry due. */
  function eventTimes(event) {
    var times = [seconds(event.time)];
    event.deliveries.forEach(function (d) {
      d.attempts.forEach(function (a) { times.push(seconds(a.time)); });
      if (d.nextAttemptAt) { times.push(seconds(d.nextAttemptAt)); }
    });
    return times;
  }

  function renderTimeline() {
    var rows = lanes();
    var list = $("timeline-rows"), axis = $("axis");
    list.textContent = "";
    axis.textContent = "";
    $("timeline").hidden = rows.length === 0;
    $("timeline-empty").hidden = rows.length > 0;
    if (!rows.length) { $("timeline-range").textContent = ""; return; }
    var all = [].concat.apply([], rows.map(moments));
    var lo = Math.min.apply(null, all), hi = Math.max.apply(null, all);
    if (hi - lo < 10) { hi = lo + 10; }
    var margin = (hi - lo) * 0.04;
    lo -= margin; hi += margin;
    var at = function (t) { return (t - lo) / (hi - lo) * 100; };
    var x = function (t) { return at(t).toFixed(3) + "%"; };
    x.at = at;
    var step = STEPS.filter(function (s) { return (hi - lo) / s <= 8; })[0] || STEPS[STEPS.length - 1];
    var ticks = [];
    for (var t = Math.ceil(lo / step) * step; t <= hi; t += step) { ticks.push(t); }
    ticks.forEach(function (t) {
      var label = el("span", "tick", step >= 86400 ? fullTime(t).slice(5, 16) : clockTime(t, step < 60));
      label.style.left = x(t);
      axis.appendChild(label);
    });
    var now = clock ? clock.timestamp : null;
    $("timeline-range").textContent = "Virtual time " + fullTime(lo + margin) + " to " +
      clockTime(hi - margin) + " UTC (" + duration(hi - lo - 2 * margin) + "), gridlines every " +
      duration(step) + (now != null && now > hi ? "; now is " + duration(now - hi + margin) + " later" : "") + ".";
    var shownNow = now != null && now >= lo && now <= hi ? now : null;
    rows.forEach(function (row) { list.appendChild(lane(row, x, ticks, shownNow, hi)); });
  }

  function lane(row, x, ticks, now, hi) {
    var task = row.task;
    var item = el("li", "lane");
    var label = el("div", "lane-label");
    var track = el("div", "track");
    if (task) {
      var open = link("task " + short(task.id), "task " + task.id + ", " + task.status, "lane:" + task.id,
                      isSelected("task", task.id));
      open.onclick = function () { select("task", task.id); };
      var status = el("span", null);
      status.appendChild(el("span", "pill " + task.status, task.status + (task.reason ? ": " + task.reason : "")));
      label.append(open, el("span", null, task.user.identifier + " \u00b7 " + task.scenario), status);
      if (isSelected("task", task.id)) { item.className += " selected"; }
    } else if (row.flow) {
      label.append(el("strong", null, "Hosted flow"), el("span", null, row.flow.identifier + " \u00b7 no task shown"));
    } else {
      label.append(el("strong", null, "Other events"), el("span", null, "not of a task shown"));
    }
    ticks.forEach(function (t) {
      var line = el("span", "gridline");
      line.style.left = x(t);
      track.appendChild(line);
    });
    if (task) {
      var start = seconds(task.createdAt), last = task.history[task.history.length - 1];
      var final = task.status === "completed" || task.status === "failed";
      // Running: up to now, or to the axis's end when now is past it.
      var end = final ? seconds(last.at) : Math.min(hi, Math.max(start, clock ? clock.timestamp : start));
      var bar = el("span", "span " + task.status);
      bar.style.left = x(start);
      bar.style.width = "calc(" + x(Math.max(end, start)) + " - " + x(start) + " + 2px)";
      bar.title = "task " + task.status + " (created " + clockTime(start) + ")";
      track.appendChild(bar);
    }
    if (now != null) {
      var line = el("span", "now");
      line.style.left = x(now);
      line.title = "now";
      track.appendChild(line);
    }
    var levels = stack(row.events, x.at);
    var used = row.events.length ? Math.max.apply(null, levels) + 1 : 0;
    var told = row.callbacks.length ? 1 : 0;  // the flow's messages: a sub-row of their own
    track.style.height = (LEVEL_TOP + LEVEL * Math.max(1, used + told)) + "px";
    row.events.forEach(function (event, index) { marks(track, event, x, LEVEL_TOP + LEVEL * levels[index]); });
    if (told) { callbackMarks(track, row.callbacks, x, LEVEL_TOP + LEVEL * used); }
    item.append(label, track);
    return item;
  }

  /* Each event's sub-row in its lane: the first one free from its time to its last
   * attempt (or retry due), so events at one instant, or retrying together, never
   * hide one another. */
  function stack(events, at) {
    var ends = [];
    return events.map(function (event) {
      var times = eventTimes(event).map(at);
      var start = times[0], end = Math.max.apply(null, times);
      var level = 0;
      while (level < ends.length && ends[level] + GAP > start) { level += 1; }
      ends[level] = end;
      return level;
    });
  }

  function marks(track, event, x, top) {
    var at = seconds(event.time);
    var states = endpoints(event), state = overall(states);
    var marker = el("button", "event-marker " + LOOK[state]);
    marker.type = "button";
    marker.setAttribute("data-event", event.id);
    marker.setAttribute("data-time", String(at));
    marker.setAttribute("data-delivery", state);
    if (isSelected("event", event.id)) { marker.className += " selected"; }
    mark(marker, "marker:" + event.id, isSelected("event", event.id));
    marker.onclick = function () { select("event", event.id); };
    pin(track, marker, x(at), top, event.eventType + " at " + clockTime(at) + ": " + statesText(states));
    event.deliveries.forEach(function (delivery, index) {
      delivery.attempts.forEach(function (attempt) {
        var kind = attempt.fault === "duplicate" ? "dup" : outcome(attempt);
        var when = seconds(attempt.time);
        var dot = el("span", "dot attempt " + kind + (delivery.replay ? " replay" : ""));
        dot.setAttribute("role", "img");
        dot.setAttribute("data-event", event.id);
        dot.setAttribute("data-delivery", String(index + 1));
        dot.setAttribute("data-attempt", String(attempt.number));
        dot.setAttribute("data-time", String(when));
        dot.setAttribute("data-outcome", kind);
        pin(track, dot, x(when), top + 17, (delivery.replay ? "resent " : "") + "attempt " + attempt.number +
          " of " + event.eventType + " at " + clockTime(when) + ": " + (attempt.status || "no answer") +
          (attempt.error ? ", " + attempt.error : ""));
      });
      if (delivery.nextAttemptAt) {
        var due = seconds(delivery.nextAttemptAt);
        var next = el("span", "dot due");
        next.setAttribute("role", "img");
        pin(track, next, x(due), top + 17, "retry of " + event.eventType + " due at " + clockTime(due),
            "retry due at " + clockTime(due));
      }
    });
  }

  /* `node` on a lane's track at `left`, `top` px down, named for screen readers and on
   * hover (`title` when the hover says it shorter). */
  function pin(track, node, left, top, label, title) {
    node.style.left = left;
    node.style.top = top + "px";
    node.setAttribute("aria-label", label);
    node.title = title || label;
    track.appendChild(node);
  }

  /* The flow's messages to the host page, one mark per instant (most come at one virtual
   * instant: the clock stands still while the user clicks): how many, and the last. */
  function callbackMarks(track, entries, x, top) {
    var byTime = new Map();
    entries.forEach(function (entry) {
      var at = seconds(entry.time);
      if (!byTime.has(at)) { byTime.set(at, []); }
      byTime.get(at).push(entry);
    });
    byTime.forEach(function (group, at) {
      var said = group.map(function (e) {
        return e.event === "interaction" ? e.payload.name :
          e.event + (e.payload.reason ? " " + e.payload.reason : e.payload.handoff ? " " + e.payload.handoff : "");
      });
      var last = group[group.length - 1];
      // Past the axis's middle the label reads leftwards from its instant: it stays inside.
      var side = x.at(at) > 60 ? " leftwards" : "";
      var mark = el("span", "callback" + side + (last.event === "interaction" ? "" : " " + last.event),
                    (group.length > 1 ? group.length + " \u00b7 " : "") + said[said.length - 1]);
      mark.setAttribute("role", "img");
      mark.setAttribute("data-callbacks", group.map(function (e) { return e.id; }).join(" "));
      pin(track, mark, x(at), top, group.length + " message" + (group.length > 1 ? "s" : "") +
          " to the host page at " + clockTime(at) + ": " + said.join(", "));
    });
  }

  function renderTables() {
    var taskBody = $("tasks");
    taskBody.textContent = "";
    Array.from(tasks.values()).sort(byCreation).reverse().slice(0, TABLE_TASKS).forEach(function (task) {
      var tr = el("tr", "clickable");
      var first = el("td", "mono");
      first.appendChild(link(short(task.id), "task " + task.id, "task-row:" + task.id, isSelected("task", task.id)));
      tr.append(first, cell(task.user.identifier), cell(task.product), cell(task.scenario),
                cell(task.status, task.status), cell(task.reason));
      tr.onclick = function () { select("task", task.id); };
      taskBody.appendChild(tr);
    });
    var eventBody = $("events");
    eventBody.textContent = "";
    Array.from(events.values()).sort(bySequence).reverse().slice(0, TABLE_EVENTS).forEach(function (event) {
      var tr = el("tr", "clickable" + (isSelected("event", event.id) ? " selected" : ""));
      var first = el("td", "mono");
      first.appendChild(link(clockTime(seconds(event.time)), event.eventType + " at " + event.time,
                             "event-row:" + event.id, isSelected("event", event.id)));
      var delivery = el("td");
      delivery.appendChild(endpointList(endpoints(event)));
      tr.append(first, cell(event.eventType), cell(event.userIdentifier), cell(short(event.task)), delivery);
      tr.onclick = function () { select("event", event.id); };
      eventBody.appendChild(tr);
    });
  }

  function select(kind, id) {
    selected = { kind: kind, id: id };
    render();
  }

  function renderDetail() {
    var event = selected && selected.kind === "event" ? events.get(selected.id) : null;
    var task = selected && selected.kind === "task" ? tasks.get(selected.id) : null;
    var shown = JSON.stringify(event || task || null);
    if (shown === detailShown) { return; }  // unchanged: a selection in it stays
    detailShown = shown;
    $("attempts").hidden = !event;
    $("resend").hidden = !event;
    $("body-details").hidden = !event;
    $("history").hidden = !task;
    if (event) { showEvent(event); } else if (task) { showTask(task); }
    else {
      $("detail-title").textContent = "Event";
      $("detail-summary").textContent = DETAIL_HINT;
    }
  }

  function showEvent(event) {
    $("detail-title").textContent = "Event " + event.eventType;
    $("detail-summary").textContent = "ce-id " + event.id + " \u00b7 " + fullTime(seconds(event.time)) +
      " UTC \u00b7 " + (event.deliveries.length ? statesText(endpoints(event)) :
                          "no endpoint was registered for this type") +
      (event.task ? " \u00b7 task " + event.task : "");
    var body = $("attempt-rows");
    body.textContent = "";
    event.deliveries.forEach(function (delivery, index) {
      var previous = null;
      delivery.attempts.forEach(function (attempt) {
        var kind = outcome(attempt), when = seconds(attempt.time);
        var tr = el("tr");
        tr.setAttribute("data-delivery", String(index + 1));
        tr.setAttribute("data-time", String(when));
        tr.append(nowrap(cell("#" + (index + 1) + (delivery.replay ? " (resent)" : ""))),
                  cell(attempt.number + (attempt.fault ? " (" + attempt.fault + ")" : "")),
                  nowrap(cell(clockTime(when) + (previous == null ? "" : " (+" + duration(when - previous) + ")"))),
                  nowrap(cell(delivery.url)),
                  cell(attempt.status == null ? (kind === "pending" ? "in flight" : "no answer") : attempt.status, kind),
                  cell(attempt.latencyMs == null ? "" : Math.round(attempt.latencyMs) + " ms"),
                  cell(attempt.error || ""));
        body.appendChild(tr);
        previous = when;
      });
      if (delivery.nextAttemptAt) {
        var tr = el("tr");
        tr.append(cell("#" + (index + 1)), cell(delivery.attempts.length + 1),
                  cell(clockTime(seconds(delivery.nextAttemptAt))), nowrap(cell(delivery.url)),
                  cell("retry due", "pending"), cell(""), cell(""));
        body.appendChild(tr);
      }
    });
    $("event-detail").textContent = JSON.stringify(event, null, 2);
  }

  function showTask(task) {
    $("detail-title").textContent = "Task " + short(task.id);
    $("detail-summary").textContent = task.id + " \u00b7 " + task.user.identifier + " \u00b7 " + task.product +
      " \u00b7 scenario " + task.scenario + " \u00b7 " + task.status + (task.reason ? " (" + task.reason + ")" : "") +
      ". Its events are on its row of the timeline.";
    var body = $("history-rows");
    body.textContent = "";
    task.history.forEach(function (h) {
      var tr = el("tr");
      tr.append(cell(clockTime(seconds(h.at))), cell(h.status, h.status), cell(h.previousStatus || ""),
                cell((h.reason || "") + (h.patch ? " (patch)" : "")));
      body.appendChild(tr);
    });
  }

  // -- signing in and out ----------------------------------------------------------------------

  /* Signed out: the prompt, and nothing else shown or running. */
  function showSignedIn(yes) {
    signedIn = yes;
    $("signin").hidden = yes;
    $("console").hidden = !yes;
    $("sign-out").hidden = !yes;
    $("tenant").hidden = !yes;
    if (!yes) { $("tenant").textContent = ""; say(""); }
  }

  function signOut(why) {
    generation += 1;
    keys = { key: "", secret: "" };
    try { localStorage.removeItem(STORAGE); } catch (e) { /* private mode */ }
    showSignedIn(false);
    $("api-secret").value = "";
    $("signin-message").textContent = why || "";
    $("connect").disabled = false;
  }

  /* Tries the keys (GET /_sandbox/tenant); the console opens only if they work. */
  function connect(key, secret) {
    keys = { key: key, secret: secret };
    generation += 1;
    var mine = generation;
    showSignedIn(false);
    $("api-key").value = key;
    $("api-secret").value = secret;
    $("connect").disabled = true;
    $("signin-message").textContent = "";
    api("GET", "/_sandbox/tenant").then(function (json) {
      if (mine !== generation) { return; }
      try { localStorage.setItem(STORAGE, JSON.stringify(keys)); } catch (e) { /* private mode */ }
      $("tenant").textContent = "tenant " + json.data.name + " (" + json.data.environment + ")";
      $("connect").disabled = false;
      openConsole();
    }).catch(function (error) {
      if (mine !== generation) { return; }
      signOut(error.status === 401 ? error.message + " Check the keys and sign in again." :
              "Could not sign in: " + error.message);
    });
  }

  /* The console of the tenant whose keys worked: everything read afresh. */
  function openConsole() {
    events.clear(); tasks.clear();
    cursors = { events: 0, tasks: 0 };
    clock = null; clockShown = ""; selected = null; detailShown = "";
    faultTicks = 0; faultsShown = "";
    $("clock").textContent = "\u2026";
    $("clock-detail").textContent = "";
    showSignedIn(true);
    loadScenarios();
    loadProfiles();
    fetch("/_sandbox/schemas/events").then(function (r) { return r.json(); }).then(function (json) {
      options($("trigger-type"), json.data.map(function (type) { return { value: type, text: type }; }));
    }).catch(function (error) { say(error.message); });
    api("GET", "/_sandbox/webhooks/endpoints").then(function (json) {
      $("webhook-url").value = json.data.length ? json.data[0].url : "";
    }).catch(function () {});
    api("GET", "/_sandbox/webhooks/faults").then(function (json) { showFaults(json.data); }).catch(function () {});
    catalog = [];
    readCatalog(0, generation);
    pickers.forEach(function (picker) { picker.find(); });
    loadApiFaults();
    render();
    tick();
  }

  // -- companies by name ------------------------------------------------------------------------

  var HEX_ID = /^[0-9a-f]{24}$/i;
  var catalog = [];  // the whole catalog, disabled companies too (search leaves them out)

  /* A company field: type a name, pick it from the list (POST /company/search, most
   * relevant first; with `disabled`, the catalog's disabled companies too), and the id is
   * filled in and shown under the field. A raw id still works. */
  function Picker(input, withDisabled) {
    var list = $(input.getAttribute("list"));
    var shown = $(input.id + "-chosen");
    var offered = new Map();   // option text -> company
    var asked = 0, timer = null;
    var picker = { chosen: null };

    function show() {
      shown.textContent = "";
      if (picker.chosen) {
        shown.appendChild(document.createTextNode(picker.chosen.name + " \u00b7 "));
        var id = el("span", "id", picker.chosen._id);
        id.title = picker.chosen._id;
        shown.appendChild(id);
        shown.setAttribute("data-company", picker.chosen._id);
      } else {
        shown.textContent = input.value.trim() ? "No company picked: choose one from the list." : "";
        shown.removeAttribute("data-company");
      }
    }

    function offer(companies) {
      list.textContent = "";
      offered.clear();
      var names = {};
      companies.forEach(function (c) { names[c.name] = (names[c.name] || 0) + 1; });
      companies.forEach(function (company) {
        var text = names[company.name] > 1 ? company.name + " (\u2026" + company._id.slice(-6) + ")" : company.name;
        if (company.status === "disabled") { text += " (disabled)"; }
        offered.set(text, company);
        var option = el("option");
        option.value = text;
        option.label = company._id;
        list.appendChild(option);
      });
    }

    function match(text) {
      if (offered.has(text)) { return offered.get(text); }
      var lower = text.toLowerCase(), found = null;
      offered.forEach(function (company, option) {
        if (!found && (option.toLowerCase() === lower || company.name.toLowerCase() === lower)) { found = company; }
      });
      return found;
    }

    /* Finds what the field says: an option offered, an id, or a search. */
    picker.find = function () {
      var text = input.value.trim();
      var mine = ++asked;
      picker.chosen = match(text);
      if (picker.chosen || !text) { show(); return Promise.resolve(picker.chosen); }
      var local = withDisabled ? catalog.filter(function (c) {
        return c.status === "disabled" && c.name.toLowerCase().indexOf(text.toLowerCase()) >= 0;
      }) : [];
      var lookup = HEX_ID.test(text) ?
        api("GET", "/company/" + text).then(function (json) { return [json.data]; }) :
        api("POST", "/company/search", { query: text.slice(0, 200), limit: 10 }).then(function (json) { return json.data; });
      return lookup.catch(function () { return []; }).then(function (found) {
        if (mine !== asked) { return picker.chosen; }
        offer(found.concat(local).slice(0, 12));
        picker.chosen = HEX_ID.test(text) ? found[0] || null : match(text);
        show();
        return picker.chosen;
      });
    };

    /* The id to send: the company picked, found now if the field changed since. */
    picker.id = function () {
      return picker.find().then(function (company) {
        if (!company) { throw new Error("No company matches \u201c" + input.value.trim() + "\u201d: pick one from the list."); }
        return company._id;
      });
    };

    input.addEventListener("input", function () {
      clearTimeout(timer);
      picker.chosen = match(input.value.trim());
      if (picker.chosen) { show(); return; }
      shown.textContent = "Searching\u2026";
      timer = setTimeout(picker.find, 200);
    });
    return picker;
  }

  /* The whole catalog, a page at a time (GET /company/list: disabled companies too). */
  function readCatalog(skip, mine) {
    api("GET", "/company/list?limit=1000&skip=" + skip).then(function (json) {
      if (mine !== generation) { return; }
      catalog = catalog.concat(json.data);
      if (json.data.length && catalog.length < json.total) { readCatalog(catalog.length, mine); }
    }).catch(function () {});
  }

  var pickers = [];
  var taskCompany = Picker($("task-company"), false);
  var statusCompany = Picker($("company-id"), true);
  pickers.push(taskCompany, statusCompany);

  // -- API fault rules (GET /_sandbox/faults/api), read-only ---------------------------------------

  function loadApiFaults() {
    if (!signedIn) { return Promise.resolve(); }
    var mine = generation;
    return api("GET", "/_sandbox/faults/api").then(function (json) {
      if (mine !== generation) { return; }
      var rules = (json.data && json.data.rules) || [];
      var text = JSON.stringify(rules);
      $("api-faults").hidden = false;
      if (text === faultsShown) { return; }
      faultsShown = text;
      $("api-faults-empty").hidden = rules.length > 0;
      $("api-faults-table").hidden = rules.length === 0;
      var body = $("api-fault-rows");
      body.textContent = "";
      rules.forEach(function (rule) {
        var tr = el("tr");
        var what = rule.status != null ? rule.status + (rule.retryAfter != null ? ", retry-after " + rule.retryAfter + " s" : "") :
          rule.latencyMs != null ? "slow: " + rule.latencyMs + " ms" : rule.reset ? "connection reset" : "";
        var limits = [];
        if (rule.count != null) { limits.push(rule.count + " times"); }
        if (rule.probability != null && rule.probability < 1) { limits.push(Math.round(rule.probability * 100) + "% of calls"); }
        tr.append(el("td", "mono", rule.method + " " + rule.path),
                  cell(what + (limits.length ? " (" + limits.join(", ") + ")" : "")),
                  cell(rule.fired + (rule.remaining != null ? " (" + rule.remaining + " left)" : "")));
        body.appendChild(tr);
      });
    }).catch(function (error) {
      // No such operation on this server (404): the panel stays hidden.
      if (mine === generation && error.status === 404) { $("api-faults").hidden = true; }
    });
  }

  function options(select, items, chosen) {
    select.textContent = "";
    items.forEach(function (item) {
      var option = el("option", null, item.text);
      option.value = item.value;
      if (item.title) { option.title = item.title; }
      if (item.value === chosen) { option.selected = true; }
      select.appendChild(option);
    });
  }

  function loadScenarios() {
    return api("GET", "/_sandbox/scenarios").then(function (json) {
      var taskScenarios = json.data.filter(function (s) { return s.kind === "task"; }).map(function (s) {
        return { value: s.name, text: s.name, title: s.description };
      });
      options($("task-scenario"), taskScenarios, "happy-path");
      options($("binding-scenario"), [{ value: "", text: "no binding (the usual selection)" }].concat(taskScenarios),
              $("binding-scenario").value || "auth-expired");
      var list = $("bindings");
      list.textContent = "";
      Object.keys(json.bindings).forEach(function (identifier) {
        var item = el("li");
        var remove = link("unbind", "unbind " + identifier, "unbind:" + identifier, false);
        remove.onclick = function () { bind(identifier, null); };
        item.append(el("span", null, identifier + " \u2192 " + json.bindings[identifier]), remove);
        list.appendChild(item);
      });
    }).catch(function (error) { say(error.message); });
  }

  function bind(identifier, scenario) {
    return act(api("PUT", "/_sandbox/users/" + encodeURIComponent(identifier) + "/scenario", { scenario: scenario }),
               scenario ? identifier + "'s next tasks run " + scenario + "." : identifier + " is unbound.")
      .then(loadScenarios);
  }

  // -- data profiles (GET /_sandbox/profiles, PUT/GET/DELETE /_sandbox/users/{id}/profile) -------

  var profileAbout = {};  // name -> description

  function loadProfiles() {
    return api("GET", "/_sandbox/profiles").then(function (json) {
      profileAbout = {};
      options($("profile-name"), json.data.map(function (profile) {
        profileAbout[profile.name] = profile.description;
        return { value: profile.name, text: profile.name, title: profile.description };
      }), $("profile-name").value || "gig-worker");
      describeProfile();
      showProfile();
    }).catch(function (error) { say(error.message); });
  }

  function describeProfile() { $("profile-about").textContent = profileAbout[$("profile-name").value] || ""; }

  function profilePath(identifier) { return "/_sandbox/users/" + encodeURIComponent(identifier) + "/profile"; }

  /* What the identifier in the field has bound now. */
  function showProfile() {
    var identifier = $("profile-user").value.trim();
    var shown = $("profile-bound");
    if (!identifier) { shown.textContent = ""; return Promise.resolve(); }
    return api("GET", profilePath(identifier)).then(function (json) {
      if ($("profile-user").value.trim() !== identifier) { return; }
      var bound = json.data.profile || (json.data.document ? "data of their own" : null);
      shown.textContent = "Now: " + identifier + " \u2192 " + (bound || "no profile (generated from the seed)");
      shown.setAttribute("data-profile", json.data.profile || "");
    }).catch(function () { shown.textContent = ""; });
  }

  function bindProfile(identifier, name) {
    if (!identifier) { say("Give a user identifier."); return; }
    var call = name ? api("PUT", profilePath(identifier), { profile: name }) : api("DELETE", profilePath(identifier));
    return act(call, function (json) {
      return name ? identifier + "'s next linked accounts take the " + name + " profile." :
        json.data.removed ? identifier + " has no profile now: their next linked accounts come from the seed." :
          identifier + " had no profile bound.";
    }).then(showProfile);
  }

  function showFaults(faults) {
    $("fault-duplicate").value = faults.duplicate;
    $("fault-out-of-order").value = faults.outOfOrder;
    $("fault-delay").value = faults.delay;
    $("fault-delay-seconds").value = faults.delaySeconds;
  }

  // -- controls -------------------------------------------------------------------------------

  function onSubmit(id, handler) {
    $(id).onsubmit = function (event) { event.preventDefault(); handler(); };
  }
  function advance(seconds) {
    act(api("POST", "/_sandbox/clock/advance", { seconds: seconds }), function (json) {
      return "Advanced " + duration(seconds) + ": " + json.data.jobsRun + " jobs, " + json.data.eventsEmitted + " events.";
    });
  }

  onSubmit("credentials", function () { connect($("api-key").value.trim(), $("api-secret").value.trim()); });
  Array.prototype.forEach.call(document.querySelectorAll("[data-advance]"), function (button) {
    button.onclick = function () { advance(Number(button.getAttribute("data-advance"))); };
  });
  onSubmit("advance-form", function () { advance(Number($("advance-seconds").value)); });
  $("run-until-idle").onclick = function () {
    act(api("POST", "/_sandbox/clock/run-until-idle"), function (json) {
      return "Ran " + json.data.jobsRun + " jobs: " + json.data.eventsEmitted + " events.";
    });
  };
  onSubmit("task-form", function () {
    act(taskCompany.id().then(function (company) {
      return api("POST", "/task/create", { identifier: $("task-user").value, company: company,
        product: $("task-product").value, scenario: $("task-scenario").value });
    }), "Task created.");
  });
  onSubmit("binding-form", function () { bind($("binding-user").value.trim(), $("binding-scenario").value || null); });
  onSubmit("profile-form", function () { bindProfile($("profile-user").value.trim(), $("profile-name").value); });
  $("profile-unbind").onclick = function () { bindProfile($("profile-user").value.trim(), null); };
  $("profile-name").onchange = describeProfile;
  $("profile-user").onchange = showProfile;
  onSubmit("trigger-form", function () {
    var body = { eventType: $("trigger-type").value };
    if ($("trigger-user").value) { body.identifier = $("trigger-user").value; }
    act(api("POST", "/_sandbox/events/trigger", body), "Event emitted.");
  });
  onSubmit("company-form", function () {
    var body = { status: $("company-status").value };
    var products = $("company-products").value.split(",").map(function (p) { return p.trim(); })
      .filter(function (p) { return p; });
    if (products.length && body.status === "under-maintenance") { body.products = products; }
    act(statusCompany.id().then(function (company) {
      return api("POST", "/_sandbox/companies/" + encodeURIComponent(company) + "/status", body);
    }), function (json) {
        var company = json.data;
        return company.name + " is " + company.status.replace("-", " ") +
          (company.maintenanceProducts ? " for " + company.maintenanceProducts.join(", ") : "") + ".";
      });
  });
  onSubmit("webhook-form", function () {
    var url = $("webhook-url").value.trim();
    act(api("PUT", "/_sandbox/webhooks/endpoints", { endpoints: url ? [{ url: url }] : [] }),
        url ? "Every event type now goes to " + url + "." : "No endpoint: events are stored, not sent.");
  });
  onSubmit("faults-form", function () {
    act(api("PUT", "/_sandbox/webhooks/faults", {
      duplicate: Number($("fault-duplicate").value), outOfOrder: Number($("fault-out-of-order").value),
      delay: Number($("fault-delay").value), delaySeconds: Number($("fault-delay-seconds").value)
    }), "Faults set.").then(function (json) { if (json) { showFaults(json.data); } });
  });
  $("resend").onclick = function () {
    var event = selected && events.get(selected.id);
    if (!event) { return; }
    act(api("POST", "/_sandbox/webhooks/replay", { eventId: event.id }), function (json) {
      var made = json.data.length ? json.data[0].deliveries.length : 0;
      return made ? "Resent " + event.eventType + " with the same ce-id (" + made +
                    (made === 1 ? " delivery)." : " deliveries).") :
        "Nothing resent: no endpoint is registered for " + event.eventType + ".";
    });
  };

  /* Keys in the address's fragment (#key=...&secret=...), on load and whenever it changes
   * (keys pasted into the address of an open tab): taken, and the fragment removed from
   * the address and its history entry at once. */
  function fromFragment() {
    var hash = window.location.hash.replace(/^#/, "");
    if (!hash) { return false; }
    var given = new URLSearchParams(hash);
    if (!given.has("key") && !given.has("secret")) { return false; }
    history.replaceState(null, "", window.location.pathname + window.location.search);
    if (given.get("key") && given.get("secret")) {
      connect(given.get("key").trim(), given.get("secret").trim());
    } else {
      signOut("The address had only part of the keys: it needs #key=...&secret=....");
    }
    return true;
  }

  $("sign-out").onclick = function () { signOut("Signed out."); };
  window.addEventListener("hashchange", fromFragment);
  if (!fromFragment()) {
    var stored = null;
    try { stored = JSON.parse(localStorage.getItem(STORAGE) || "null"); } catch (e) { stored = null; }
    if (stored && stored.key && stored.secret) { connect(stored.key, stored.secret); }
    else { showSignedIn(false); }
  }
  setInterval(tick, TICK_MS);
})();
