package recipe;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.sun.net.httpserver.HttpExchange;
import com.sun.net.httpserver.HttpServer;
import java.io.IOException;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.security.GeneralSecurityException;
import java.security.MessageDigest;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import javax.crypto.Mac;
import javax.crypto.spec.SecretKeySpec;

/**
 * The app under test: it receives the service's webhooks as it would in production. Each
 * delivery's signature is checked (HMAC-SHA256 of the raw body, keyed by the API secret, in
 * x-hmac-signature-sha-256) and the binary-mode CloudEvent is read from its ce-* headers and
 * JSON body (Jackson); the app keeps each task's latest status. It knows nothing of the sandbox.
 */
public final class App implements AutoCloseable {
    public static final String SIGNATURE_HEADER = "x-hmac-signature-sha-256";
    private static final ObjectMapper JSON = new ObjectMapper();

    /** A CloudEvent as the app keeps it: its attributes and its JSON data. */
    public record Event(String id, String source, String type, String specVersion, JsonNode data) {}

    private final String secret;
    private final HttpServer server;
    private final List<Event> events = new ArrayList<>();
    private final Map<String, String> taskStatus = new ConcurrentHashMap<>();

    public App(String secret) throws IOException {
        this.secret = secret;
        server = HttpServer.create(new InetSocketAddress("127.0.0.1", 0), 0);
        server.createContext("/webhooks", this::receive);
        server.start();
    }

    public String webhookUrl() {
        return "http://127.0.0.1:" + server.getAddress().getPort() + "/webhooks";
    }

    public static boolean signatureIsValid(byte[] body, String signature, String secret) {
        if (signature == null) return false;
        try {
            Mac mac = Mac.getInstance("HmacSHA256");
            mac.init(new SecretKeySpec(secret.getBytes(StandardCharsets.UTF_8), "HmacSHA256"));
            byte[] expected = java.util.HexFormat.of().formatHex(mac.doFinal(body))
                    .getBytes(StandardCharsets.US_ASCII);
            return MessageDigest.isEqual(expected, signature.getBytes(StandardCharsets.US_ASCII));
        } catch (GeneralSecurityException error) {
            throw new IllegalStateException(error);
        }
    }

    private void receive(HttpExchange exchange) throws IOException {
        try (exchange) {
            if (!exchange.getRequestMethod().equals("POST")) {
                exchange.sendResponseHeaders(405, -1);
                return;
            }
            byte[] body = exchange.getRequestBody().readAllBytes();
            var headers = exchange.getRequestHeaders();
            if (!signatureIsValid(body, headers.getFirst(SIGNATURE_HEADER), secret)) {
                exchange.sendResponseHeaders(401, -1);
                return;
            }
            Event event;
            try {
                event = new Event(headers.getFirst("ce-id"), headers.getFirst("ce-source"),
                        headers.getFirst("ce-type"), headers.getFirst("ce-specversion"),
                        JSON.readTree(body));
            } catch (IOException notJson) {
                exchange.sendResponseHeaders(400, -1);
                return;
            }
            if (event.id() == null || event.source() == null || event.type() == null
                    || !"1.0".equals(event.specVersion()) || !event.data().isObject()) {
                exchange.sendResponseHeaders(400, -1);
                return;
            }
            synchronized (events) {
                events.add(event);
            }
            if (event.type().endsWith(".task-status-updated")) {
                taskStatus.put(event.data().path("task").asText(),
                        event.data().path("data").path("status").asText());
            }
            exchange.sendResponseHeaders(204, -1);
        }
    }

    /** The CloudEvents accepted so far, in arrival order. */
    public List<Event> events() {
        synchronized (events) {
            return List.copyOf(events);
        }
    }

    /** The latest status a webhook gave the task (null if none). */
    public String taskStatus(String task) {
        return taskStatus.get(task);
    }

    @Override
    public void close() {
        server.stop(0);
    }
}
