// Supportbot widget: <script src="https://support.example/widget.js" data-tenant="acme"
//   data-identity="<token from your backend>" async></script>
// The token is handed to the chat frame by postMessage (never in a URL); a fresh one (after
// `identity.expired`) by `SupportbotWidget.identify(token)`.
// Adds a launcher button that opens the chat page in an iframe.
(function () {
  "use strict";
  var script = document.currentScript || document.querySelector("script[data-tenant]");
  if (!script || window.__supportbotWidget) return;
  window.__supportbotWidget = true;
  var origin = window.SUPPORTBOT_ORIGIN;
  var tenant = script.getAttribute("data-tenant");
  var identity = script.getAttribute("data-identity");
  // The identity token goes to the frame by postMessage, never in its URL (URLs reach logs).
  var url = origin + "/chat/" + encodeURIComponent(tenant) + "/?embed=1";

  var button = document.createElement("button");
  button.type = "button";
  button.id = "supportbot-launcher";
  button.setAttribute("aria-expanded", "false");
  button.setAttribute("aria-controls", "supportbot-frame");
  button.textContent = "Help";
  button.style.cssText = "position:fixed;right:20px;bottom:20px;z-index:2147483000;border:0;" +
    "border-radius:999px;padding:14px 20px;background:#1f5f4a;color:#fff;font:600 16px system-ui;" +
    "box-shadow:0 4px 14px rgba(0,0,0,.25);cursor:pointer";

  var frame = document.createElement("iframe");
  frame.id = "supportbot-frame";
  frame.title = "Customer support chat";
  frame.hidden = true;
  frame.style.cssText = "position:fixed;right:20px;bottom:84px;z-index:2147483000;border:0;" +
    "width:min(400px,calc(100vw - 40px));height:min(620px,calc(100vh - 110px));" +
    "border-radius:14px;box-shadow:0 8px 30px rgba(0,0,0,.3);background:#fff";

  window.addEventListener("message", function (e) {
    if (e.source !== frame.contentWindow || e.origin !== origin || !e.data) return;
    if (e.data.type === "supportbot.ready" && identity) {
      frame.contentWindow.postMessage({ type: "supportbot.identity", token: identity }, origin);
    } else if (e.data.type === "supportbot.identity_expired") {
      // The page may set a fresh token: window.SupportbotWidget.identify(token).
      identity = null;
    }
  });
  window.SupportbotWidget = {
    identify: function (token) {
      identity = token;
      if (frame.contentWindow) {
        frame.contentWindow.postMessage({ type: "supportbot.identity", token: token }, origin);
      }
    },
  };

  button.addEventListener("click", function () {
    if (!frame.src) frame.src = url;
    frame.hidden = !frame.hidden;
    button.setAttribute("aria-expanded", String(!frame.hidden));
    button.textContent = frame.hidden ? "Help" : "Close";
  });
  document.body.appendChild(frame);
  document.body.appendChild(button);
})();
