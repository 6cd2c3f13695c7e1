// The hosted flow under test in Node (docs/exec.md, Playwright): bind a user's autopilot,
// so the flow your frontend opens plays itself, and wait on what the flow told your page
// (the callbacks ledger), with no click in the cross-origin iframe. No dependency.
const WAIT_MS = 10_000;   // how long waitForCallback waits by default
const POLL_MS = 50;       // between two reads of the ledger

export function sandboxFlow({ url = process.env.PAYROLL_SANDBOX_URL,
                              apiKey = process.env.PAYROLL_SANDBOX_API_KEY,
                              apiSecret = process.env.PAYROLL_SANDBOX_API_SECRET } = {}) {
  if (!url) throw new Error("PAYROLL_SANDBOX_URL is not set: run your suite under `payroll-sandbox exec`");

  async function call(method, path, body) {
    const response = await fetch(url + path, {
      method,
      headers: { "x-api-key": apiKey, "x-api-secret": apiSecret, "content-type": "application/json" },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await response.text();
    if (!response.ok) throw new Error(`${method} ${path}: ${response.status} ${text}`);
    return text ? JSON.parse(text).data : undefined;
  }

  const user = (identifier) => `/_sandbox/users/${encodeURIComponent(identifier)}/autopilot`;

  return {
    call,
    // What the user does in the flow: { company, username, mfa, distribution, language,
    // product, pause }; null unbinds it.
    autopilot: (identifier, plan) =>
      plan === null ? call("DELETE", user(identifier)) : call("PUT", user(identifier), plan),
    publicToken: async (identifier) =>
      (await call("POST", "/access-token", { identifier })).publicToken,
    // What the flow told the host page, oldest first: { id, time, flow, event, payload }.
    callbacks: (identifier, after = 0) => call("GET",
      `/_sandbox/sdk/callbacks?identifier=${encodeURIComponent(identifier)}&after=${after}`),
    // The first message with this `event` (interaction, finish, close, data-request,
    // open-url), interaction `name` and payload fields `match`.
    async waitForCallback(identifier, { event, name, match = {}, after = 0, timeoutMs = WAIT_MS } = {}) {
      const deadline = Date.now() + timeoutMs;
      const seen = [];
      for (;;) {
        for (const entry of await this.callbacks(identifier, after)) {
          seen.push(entry);
          after = entry.id;
          const p = entry.payload;
          if ((!event || entry.event === event) && (!name || p.name === name) &&
              Object.entries(match).every(([k, v]) => JSON.stringify(p[k]) === JSON.stringify(v))) {
            return entry;
          }
        }
        if (Date.now() >= deadline) {
          const told = seen.map((e) => `${e.event} ${e.payload.name || e.payload.reason || ""}`.trim());
          throw new Error(`no ${event || "callback"} ${name || ""} for ${identifier} within ` +
                          `${timeoutMs} ms; the flow told: ${told.join("; ") || "nothing"}`);
        }
        await new Promise((resolve) => setTimeout(resolve, POLL_MS));
      }
    },
    // The manual clock: the task the flow started moves only when the test says so.
    async runUntilIdle() {
      let clock = await call("POST", "/_sandbox/clock/run-until-idle");
      while (!clock.complete) clock = await call("POST", "/_sandbox/clock/run-until-idle");
      return clock;
    },
  };
}
