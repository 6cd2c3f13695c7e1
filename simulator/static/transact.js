/* payroll-sandbox client SDK: window.__GLOBAL__.transact({...}) opens the hosted flow.
 *
 * The global's name is the service profile's `sdkGlobal` (DESIGN.md, Service profile), so
 * a frontend written for the vendor's SDK loads this script in its place and runs
 * unchanged: transact({config, container, environmentOverride, onInteraction,
 * onDataRequest, onFinish, onClose, onOpenUrl}) returns {close}, and `Product` names the
 * products, both as `__GLOBAL__.Product` and as a global `Product` of its own (unless the
 * page has one) (real-service-facts 11).
 *
 * It opens an iframe at <origin>/initialize/<base64 of JSON config>#hId=<handshake> and
 * talks to it with postMessage({event, payload}). The config in the URL never carries the
 * public token: URLs end up in access logs, proxies and browser history. The page asks
 * for it (<prefix>-request-public-token) and gets it only with this handshake's id
 * (sdk-<prefix>-public-token). Messages are accepted only from the sandbox's origin and
 * from that iframe. The iframe is removed when the flow finishes (onFinish) or closes
 * (onClose), and by the returned handle's close().
 */
(function () {
  "use strict";
  var PREFIX = "__PREFIX__";
  var script = document.currentScript;
  var SANDBOX_ORIGIN = new URL(script ? script.src : window.location.href).origin;
  // The vendor's constants (real-service-facts 11), valued as this service names them.
  var Product = { DEPOSIT: "deposit", VERIFY: "verify", IDENTIFY: "identify",
                  WITHHOLD: "tax", TAX: "tax", SWITCH: "switch", PRESENT: "present",
                  MANAGE: "manage" };

  /* Base64 of the JSON as a browser's btoa writes it (the standard alphabet, padded), as
   * the vendor's SDK does: the flow reads it and the URL-safe one alike. */
  function encodeConfig(config) {
    var bytes = new TextEncoder().encode(JSON.stringify(config));
    var binary = "";
    bytes.forEach(function (b) { binary += String.fromCharCode(b); });
    return btoa(binary);
  }

  function withoutToken(config) {
    var copy = Object.assign({}, config);
    delete copy.publicToken;
    return copy;
  }

  function handshakeId() {
    var values = new Uint32Array(4);
    (window.crypto || window.msCrypto).getRandomValues(values);
    return Array.prototype.map.call(values, function (v) { return v.toString(16); }).join("");
  }

  function transact(options) {
    options = options || {};
    var config = options.config || {};
    var origin = options.environmentOverride || SANDBOX_ORIGIN;
    origin = new URL(origin).origin;
    var container = options.container || document.body;
    var hId = handshakeId();
    var iframe = document.createElement("iframe");
    iframe.src = origin + "/initialize/" + encodeConfig(withoutToken(config)) + "#hId=" + hId;
    iframe.title = config.language === "es" ? "Conexión de nómina" : "Payroll connection";
    iframe.setAttribute("data-transact", hId);
    // One property at a time: a host page whose Content-Security-Policy refuses inline
    // styles (style-src without 'unsafe-inline') refuses `style.cssText`, not these.
    var look = options.container ? { width: "100%", height: "100%", border: "0" } :
      { position: "fixed", inset: "0", width: "100%", height: "100%", border: "0",
        zIndex: "2147483647", background: "rgba(0,0,0,.4)" };
    Object.keys(look).forEach(function (name) { iframe.style[name] = look[name]; });
    var closed = false;

    function close() {
      if (closed) { return; }
      closed = true;
      window.removeEventListener("message", onMessage);
      if (iframe.parentNode) { iframe.parentNode.removeChild(iframe); }
    }

    function call(callback, payload) {
      if (typeof callback === "function") {
        try { callback(payload); } catch (error) { setTimeout(function () { throw error; }); }
      }
    }

    function onMessage(event) {
      if (event.origin !== origin || event.source !== iframe.contentWindow) { return; }
      var message = event.data || {};
      var payload = message.payload || {};
      switch (message.event) {
        case PREFIX + "-request-public-token":
          iframe.contentWindow.postMessage({
            event: "sdk-" + PREFIX + "-public-token",
            payload: { publicToken: config.publicToken, handshakeId: hId }
          }, origin);
          break;
        case PREFIX + "-interaction":
          call(options.onInteraction, payload);
          break;
        case PREFIX + "-finish":
          // The flow is over: the real SDK removes it before telling the host page.
          close();
          call(options.onFinish, payload);
          break;
        case PREFIX + "-close":
          close();
          call(options.onClose, payload);
          break;
        case PREFIX + "-data-request":
          call(options.onDataRequest, payload);
          break;
        case PREFIX + "-open-url":
          if (typeof options.onOpenUrl === "function") { call(options.onOpenUrl, payload); }
          else if (payload.url && /^https?:/.test(payload.url)) {
            window.open(payload.url, "_blank", "noopener");
          }
          break;
      }
    }

    window.addEventListener("message", onMessage);
    container.appendChild(iframe);
    return { close: close, iframe: iframe, handshakeId: hId };
  }

  window["__GLOBAL__"] = { transact: transact, Product: Product, prefix: PREFIX,
                           origin: SANDBOX_ORIGIN };
  // The SDK's type declarations export `Product` as a name of its own beside the global
  // (real-service-facts 11): frontend code writes `Product.DEPOSIT` next to
  // `__GLOBAL__.transact(...)`. A `Product` the page already has is left as it is.
  if (!("Product" in window)) { window.Product = Product; }
})();
