// Run it with the sandbox beside it:  payroll-sandbox exec -- npm test
// The customer's page loads the SDK's drop-in script and opens the hosted flow as in
// production; the user is on autopilot, so the test never clicks inside the flow's iframe.
import assert from "node:assert/strict";
import http from "node:http";
import { after, before, test } from "node:test";
import { chromium } from "playwright-core";
import { sandboxFlow } from "../sandbox-flow.mjs";

const CHROMIUM = process.env.CHROMIUM_PATH || "/usr/bin/chromium";  // Debian's chromium
const PAGE = (sandbox) => `<!doctype html><html><head><title>Customer page</title></head><body>
<script src="${sandbox}/sdk/transact.js"></script>
<script>
window.events = [];
window.connect = (publicToken) => Transact.transact({
  config: { publicToken, tasks: [{ operation: "deposit" }] },
  onInteraction: (p) => events.push(["interaction", p]),
  onFinish: (p) => events.push(["finish", p]),
  onClose: (p) => events.push(["close", p]),
});
</script></body></html>`;

let tenant, flow, browser, host;

before(async () => {
  tenant = await sandboxFlow().call("POST", "/_sandbox/tenants", {});
  flow = sandboxFlow({ apiKey: tenant.apiKey, apiSecret: tenant.apiSecret });
  host = http.createServer((request, response) => {
    response.setHeader("content-type", "text/html");
    response.end(PAGE(process.env.PAYROLL_SANDBOX_URL));
  });
  await new Promise((resolve) => host.listen(0, "127.0.0.1", resolve));
  browser = await chromium.launch({ executablePath: CHROMIUM, args: ["--no-sandbox"] });
});

after(async () => {
  await browser.close();
  host.close();
  await flow.call("DELETE", `/_sandbox/tenants/${tenant.name}`);
});

test("the hosted flow plays itself and its callbacks ledger is what the page heard", async () => {
  const [walmart] = await flow.call("POST", "/company/search", { query: "Walmart" });
  await flow.autopilot("node-user", { company: walmart._id, username: "test-auth-expired" });
  const page = await browser.newPage();
  // The page on another origin than the sandbox's (localhost, not 127.0.0.1), as in production.
  await page.goto(`http://localhost:${host.address().port}/`);
  await page.evaluate((token) => window.connect(token), await flow.publicToken("node-user"));

  await flow.waitForCallback("node-user", { event: "interaction", name: "Started Task" });
  await flow.runUntilIdle();
  const end = await flow.waitForCallback("node-user", { event: "close" });
  assert.equal(end.payload.reason, "auth-expired");

  await page.waitForFunction(() => window.events.some(([event]) => event === "close"));
  const heard = await page.evaluate(() => window.events);
  const told = (await flow.callbacks("node-user")).map((entry) => [entry.event, entry.payload]);
  assert.deepEqual(told, heard);
});
