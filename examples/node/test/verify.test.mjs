// Run it with the sandbox beside it:  payroll-sandbox exec -- node --test test/verify.test.mjs
// Asks the sandbox whether the app made a request, as the Python plugin's assert_called does:
// POST /_sandbox/requests/verify answers 200 when the tenant's journal holds it, else 422
// `not-called` with the nearest requests and every JSON path where each differs.
import assert from "node:assert/strict";
import { after, before, test } from "node:test";

const SANDBOX = process.env.PAYROLL_SANDBOX_URL;
if (!SANDBOX) throw new Error("PAYROLL_SANDBOX_URL is not set: run it under `payroll-sandbox exec`");

async function send(keys, method, path, body) {
  const response = await fetch(SANDBOX + path, {
    method,
    headers: { "x-api-key": keys.apiKey, "x-api-secret": keys.apiSecret,
               "content-type": "application/json" },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  return { status: response.status, body: await response.json() };
}

// The request was made (`times` exactly, or at least once): the matching journal ids. When it
// was not, the assertion's message names the nearest requests and their differing paths.
async function assertCalled(keys, method, path, { body, query, times } = {}) {
  const { status, body: answer } = await send(keys, "POST", "/_sandbox/requests/verify",
                                              { method, path, body, query, times });
  if (status === 200) return answer.data.matched;
  const { error } = answer;
  const misses = (error.nearMisses ?? []).map((miss) =>
    `  request #${miss.id} ${miss.method} ${miss.path}:\n` + miss.differences.map((d) =>
      `    ${d.path}: expected ${JSON.stringify(d.expected)}, got ${JSON.stringify(d.actual)}`)
      .join("\n"));
  const failure = new assert.AssertionError({ message: [error.message, ...misses].join("\n") });
  failure.nearMisses = error.nearMisses;
  throw failure;
}

const ORDER = { identifier: "node-1", company: "6410a0000000000000000001", product: "deposit",
                metadata: { order: "A-1", lines: "1,2,3" } };
let tenant;

before(async () => {
  const made = await send({ apiKey: process.env.PAYROLL_SANDBOX_API_KEY,
                            apiSecret: process.env.PAYROLL_SANDBOX_API_SECRET },
                          "POST", "/_sandbox/tenants", {});
  tenant = made.body.data;
  await send(tenant, "POST", "/task/create", ORDER);  // what the app under test would send
});

after(async () => {
  await send(tenant, "DELETE", `/_sandbox/tenants/${tenant.name}`);
});

test("an exact match passes", async () => {
  const matched = await assertCalled(tenant, "POST", "/task/create", { body: ORDER, times: 1 });
  assert.equal(matched.length, 1);
});

test("a request not made names each differing path of the nearest one", async () => {
  const planted = { ...ORDER, identifier: "node-2", metadata: { order: "A-2", lines: "1,2" } };
  await assert.rejects(assertCalled(tenant, "POST", "/task/create", { body: planted }),
    (failure) => {
      const [nearest] = failure.nearMisses;
      assert.equal(nearest.path, "/task/create");
      assert.deepEqual(nearest.differences.map((d) => d.path).sort(),
                       ["$.body.identifier", "$.body.metadata.lines", "$.body.metadata.order"]);
      assert.match(failure.message, /\$\.body\.metadata\.order: expected "A-2", got "A-1"/);
      return true;
    });
});
