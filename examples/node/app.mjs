// The app under test: it receives the service's webhooks as it would in production. Each
// delivery's signature is checked (HMAC-SHA256 of the raw body, keyed by the API secret, in
// x-hmac-signature-sha-256) and the CloudEvent is read by the CloudEvents SDK; the app keeps
// each task's latest status. It knows nothing of the sandbox.
import crypto from "node:crypto";
import http from "node:http";
import { HTTP } from "cloudevents";

export const SIGNATURE_HEADER = "x-hmac-signature-sha-256";

export function signatureIsValid(rawBody, signature, secret) {
  if (typeof signature !== "string") return false;
  const expected = crypto.createHmac("sha256", secret).update(rawBody).digest("hex");
  const given = Buffer.from(signature);
  return given.length === expected.length && crypto.timingSafeEqual(given, Buffer.from(expected));
}

export function createApp({ secret }) {
  const events = [];        // every CloudEvent accepted, in arrival order
  const taskStatus = {};    // task id -> its latest status
  const server = http.createServer(async (request, response) => {
    if (request.method !== "POST" || request.url !== "/webhooks") {
      response.writeHead(404).end();
      return;
    }
    const chunks = [];
    for await (const chunk of request) chunks.push(chunk);
    const raw = Buffer.concat(chunks);
    if (!signatureIsValid(raw, request.headers[SIGNATURE_HEADER], secret)) {
      response.writeHead(401).end("bad signature");
      return;
    }
    let event;
    try {
      event = HTTP.toEvent({ headers: request.headers, body: raw.toString("utf8") });
    } catch (error) {
      response.writeHead(400).end(`not a CloudEvent: ${error.message}`);
      return;
    }
    events.push(event);
    if (event.type.endsWith(".task-status-updated")) {
      taskStatus[event.data.task] = event.data.data.status;
    }
    response.writeHead(204).end();
  });
  return { server, events, taskStatus };
}
