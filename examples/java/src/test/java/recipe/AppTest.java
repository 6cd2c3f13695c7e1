// Run it with the sandbox beside it:  payroll-sandbox exec -- mvn -q test
// exec sets PAYROLL_SANDBOX_URL and the default tenant's keys; the test makes a tenant of its
// own, points its webhooks at the app, and moves the sandbox's clock instead of sleeping.
package recipe;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.util.Map;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

class AppTest {
    private static final ObjectMapper JSON = new ObjectMapper();
    private static final HttpClient HTTP = HttpClient.newHttpClient();
    private static final String SANDBOX = System.getenv("PAYROLL_SANDBOX_URL");

    private static String key;
    private static String secret;
    private static String tenant;
    private static App app;

    /** One request to the sandbox with the tenant's keys; the answer's "data". */
    static JsonNode call(String method, String path, Object body) throws Exception {
        assertNotNull(SANDBOX, "PAYROLL_SANDBOX_URL is not set: run `payroll-sandbox exec -- mvn -q test`");
        var request = HttpRequest.newBuilder(URI.create(SANDBOX + path))
                .header("x-api-key", key).header("x-api-secret", secret)
                .header("content-type", "application/json")
                .method(method, body == null ? HttpRequest.BodyPublishers.noBody()
                        : HttpRequest.BodyPublishers.ofString(JSON.writeValueAsString(body)))
                .build();
        var response = HTTP.send(request, HttpResponse.BodyHandlers.ofString());
        assertEquals(2, response.statusCode() / 100, method + " " + path + ": " + response.body());
        return response.body().isEmpty() ? null : JSON.readTree(response.body()).path("data");
    }

    /** Moves the tenant's clock: every scenario step and webhook due meanwhile runs, and the
     * answer comes once their deliveries are done. */
    static void advance(double seconds) throws Exception {
        JsonNode clock = call("POST", "/_sandbox/clock/advance", Map.of("seconds", seconds));
        while (!clock.path("complete").asBoolean(true)) {
            clock = call("POST", "/_sandbox/clock/advance",
                    Map.of("seconds", clock.path("remainingSeconds").asDouble()));
        }
    }

    @BeforeAll
    static void aTenantOfOurOwn() throws Exception {
        key = System.getenv("PAYROLL_SANDBOX_API_KEY");
        secret = System.getenv("PAYROLL_SANDBOX_API_SECRET");
        JsonNode made = call("POST", "/_sandbox/tenants", Map.of());
        tenant = made.path("name").asText();
        key = made.path("apiKey").asText();
        secret = made.path("apiSecret").asText();
        app = new App(secret);
        call("PUT", "/_sandbox/webhooks/endpoints",
                Map.of("endpoints", new Object[] {Map.of("url", app.webhookUrl())}));
    }

    @AfterAll
    static void deleteIt() throws Exception {
        app.close();
        call("DELETE", "/_sandbox/tenants/" + tenant, null);
    }

    @Test
    void aDepositSwitchReachesTheAppAsSignedCloudEvents() throws Exception {
        String company = call("POST", "/company/search", Map.of("query", "Walmart"))
                .get(0).path("_id").asText();
        JsonNode task = call("POST", "/task/create",
                Map.of("identifier", "user-1", "company", company, "product", "deposit"));
        assertEquals("queued", task.path("status").asText());
        String id = task.path("id").asText();

        advance(120);

        assertEquals("completed", call("GET", "/task/" + id, null).path("status").asText());
        assertEquals("completed", app.taskStatus(id));
        assertFalse(app.events().isEmpty());
        for (App.Event event : app.events()) {
            assertEquals("com.example", event.source());
            assertEquals("com.example." + event.data().path("eventType").asText(), event.type());
        }
    }

    @Test
    void theAppRefusesADeliveryWhoseSignatureDoesNotMatch() throws Exception {
        var request = HttpRequest.newBuilder(URI.create(app.webhookUrl()))
                .header(App.SIGNATURE_HEADER, "0".repeat(64)).header("ce-id", "1")
                .POST(HttpRequest.BodyPublishers.ofString("{\"eventType\":\"company-updated\"}"))
                .build();
        assertEquals(401, HTTP.send(request, HttpResponse.BodyHandlers.discarding()).statusCode());
    }
}
