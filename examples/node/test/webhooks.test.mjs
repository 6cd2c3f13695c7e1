// Run it with the sandbox beside it:  payroll-sandbox exec -- npm test
// exec sets PAYROLL_SANDBOX_URL and the default tenant's keys; the suite makes a tenant of
// its own, points its webhooks at the app, and moves the sandbox's clock instead of sleeping.
import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { createApp } from "../app.mjs";

const SANDBOX = process.env.PAYROLL_SANDBOX_URL;
if (!SANDBOX) throw new Error("PAYROLL_SANDBOX_URL is not set: run `payroll-sandbox exec -- npm test`");

async function call(keys, method, path, body) {
  const response = await fetch(SANDBOX + path, {
    method,
    headers: { "x-api-key": keys.apiKey, "x-api-secret": keys.apiSecret,
               "content-type": "application/json" },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await response.text();
  assert.ok(response.ok, `${method} ${path}: ${response.status} ${text}`);
  return text ? JSON.parse(text).data : undefined;
}

// Moves the tenant's clock: every scenario step and webhook due meanwhile runs, and the
// answer comes once their deliveries are done.
async function advance(keys, seconds) {
  let clock = await call(keys, "POST", "/_sandbox/clock/advance", { seconds });
  while (!clock.complete) {
    clock = await call(keys, "POST", "/_sandbox/clock/advance", { seconds: clock.remainingSeconds });
  }
}

let tenant;
let app;

before(async () => {
  tenant = await call({ apiKey: process.env.PAYROLL_SANDBOX_API_KEY,
                        apiSecret: process.env.PAYROLL_SANDBOX_API_SECRET },
                      "POST", "/_sandbox/tenants", {});
  app = createApp({ secret: tenant.apiSecret });
  await new Promise((resolve) => app.server.listen(0, "127.0.0.1", resolve));
  const url = `http://127.0.0.1:${app.server.address().port}/webhooks`;
  await call(tenant, "PUT", "/_sandbox/webhooks/endpoints", { endpoints: [{ url }] });
});

after(async () => {
  app.server.closeAllConnections();
  await new Promise((resolve) => app.server.close(resolve));
  await call(tenant, "DELETE", `/_sandbox/tenants/${tenant.name}`);
});

test("a deposit switch reaches the app as signed CloudEvents", async () => {
  const [company] = await call(tenant, "POST", "/company/search", { query: "Walmart" });
  const task = await call(tenant, "POST", "/task/create",
                          { identifier: "user-1", company: company._id, product: "deposit" });
  assert.equal(task.status, "queued");

  await advance(tenant, 120);

  assert.equal((await call(tenant, "GET", `/task/${task.id}`)).status, "completed");
  assert.equal(app.taskStatus[task.id], "completed");
  const updates = app.events.filter((e) => e.type === "com.example.task-status-updated");
  assert.ok(updates.length >= 1);
  for (const event of updates) {
    assert.equal(event.source, "com.example");
    assert.equal(event.specversion, "1.0");
    assert.equal(event.data.eventType, "task-status-updated");
  }
});

test("the app refuses a delivery whose signature does not match", async () => {
  const { port } = app.server.address();
  const response = await fetch(`http://127.0.0.1:${port}/webhooks`, {
    method: "POST",
    headers: { "content-type": "application/json", "ce-id": "1", "ce-source": "com.example",
               "ce-type": "com.example.company-updated", "ce-specversion": "1.0",
               "x-hmac-signature-sha-256": "0".repeat(64) },
    body: JSON.stringify({ eventType: "company-updated" }),
  });
  assert.equal(response.status, 401);
});
