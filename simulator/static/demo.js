/* The demo host page: a public token from its own server, then the hosted flow, and every
 * callback listed as it arrives. No keys here: POST /demo/token mints the token. */
(function () {
  "use strict";
  var $ = function (id) { return document.getElementById(id); };

  function show(name, payload) {
    var item = document.createElement("li");
    var label = document.createElement("strong");
    label.textContent = name;
    var body = document.createElement("code");
    body.textContent = JSON.stringify(payload);
    item.appendChild(label);
    item.appendChild(document.createTextNode(" "));
    item.appendChild(body);
    $("callbacks").appendChild(item);
  }

  $("start").onsubmit = function (event) {
    event.preventDefault();
    $("connect").disabled = true;
    $("status").textContent = "Asking the server for a public token...";
    fetch("/demo/token", { method: "POST" })
      .then(function (response) {
        return response.json().then(function (json) {
          if (!response.ok) { throw new Error(json.error ? json.error.message : response.status); }
          return json.data;
        });
      })
      .then(function (token) {
        $("status").textContent = "The flow is open for " + token.identifier + ".";
        window.Transact.transact({
          config: { publicToken: token.publicToken, scope: "user-link",
                    tasks: [{ operation: $("operation").value }] },
          onInteraction: function (payload) { show("onInteraction", payload); },
          onFinish: function (payload) {
            show("onFinish", payload);
            $("status").textContent = "Finished: task " + payload.taskId + ".";
            $("connect").disabled = false;
          },
          onClose: function (payload) {
            show("onClose", payload);
            $("status").textContent = "Closed: " + payload.reason + ".";
            $("connect").disabled = false;
          }
        });
      })
      .catch(function (error) {
        $("status").textContent = "Could not start: " + error.message;
        $("connect").disabled = false;
      });
  };
})();
