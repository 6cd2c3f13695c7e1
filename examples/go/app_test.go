// Run it with the sandbox beside it:  payroll-sandbox exec -- go test ./...
// exec sets PAYROLL_SANDBOX_URL and the default tenant's keys; the test makes a tenant of
// its own, points its webhooks at the app, and moves the sandbox's clock instead of sleeping.
package recipe

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
)

type keys struct {
	Name      string `json:"name"`
	APIKey    string `json:"apiKey"`
	APISecret string `json:"apiSecret"`
}

// call sends one request to the sandbox and decodes the answer's "data" into out.
func call(t *testing.T, k keys, method, path string, body, out any) {
	t.Helper()
	base := os.Getenv("PAYROLL_SANDBOX_URL")
	if base == "" {
		t.Fatal("PAYROLL_SANDBOX_URL is not set: run `payroll-sandbox exec -- go test ./...`")
	}
	var reader *bytes.Reader
	if body != nil {
		raw, _ := json.Marshal(body)
		reader = bytes.NewReader(raw)
	} else {
		reader = bytes.NewReader(nil)
	}
	request, _ := http.NewRequest(method, base+path, reader)
	request.Header.Set("x-api-key", k.APIKey)
	request.Header.Set("x-api-secret", k.APISecret)
	request.Header.Set("content-type", "application/json")
	response, err := http.DefaultClient.Do(request)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer response.Body.Close()
	var answer struct {
		Data  json.RawMessage `json:"data"`
		Error any             `json:"error"`
	}
	_ = json.NewDecoder(response.Body).Decode(&answer)
	if response.StatusCode/100 != 2 {
		t.Fatalf("%s %s: %d %v", method, path, response.StatusCode, answer.Error)
	}
	if out != nil {
		if err := json.Unmarshal(answer.Data, out); err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
	}
}

// advance moves the tenant's clock: every scenario step and webhook due meanwhile runs,
// and the answer comes once their deliveries are done.
func advance(t *testing.T, k keys, seconds float64) {
	var clock struct {
		Complete         bool    `json:"complete"`
		RemainingSeconds float64 `json:"remainingSeconds"`
	}
	call(t, k, "POST", "/_sandbox/clock/advance", map[string]any{"seconds": seconds}, &clock)
	for !clock.Complete {
		call(t, k, "POST", "/_sandbox/clock/advance",
			map[string]any{"seconds": clock.RemainingSeconds}, &clock)
	}
}

// newTenant is a tenant of the test's own, deleted when the test ends.
func newTenant(t *testing.T) keys {
	var tenant keys
	defaults := keys{APIKey: os.Getenv("PAYROLL_SANDBOX_API_KEY"),
		APISecret: os.Getenv("PAYROLL_SANDBOX_API_SECRET")}
	call(t, defaults, "POST", "/_sandbox/tenants", map[string]any{}, &tenant)
	t.Cleanup(func() { call(t, tenant, "DELETE", "/_sandbox/tenants/"+tenant.Name, nil, nil) })
	return tenant
}

func TestDepositSwitchReachesTheAppAsSignedCloudEvents(t *testing.T) {
	tenant := newTenant(t)
	app := &App{Secret: tenant.APISecret}
	server := httptest.NewServer(app)
	defer server.Close()
	call(t, tenant, "PUT", "/_sandbox/webhooks/endpoints",
		map[string]any{"endpoints": []map[string]any{{"url": server.URL + "/webhooks"}}}, nil)

	var companies []struct {
		ID string `json:"_id"`
	}
	call(t, tenant, "POST", "/company/search", map[string]any{"query": "Walmart"}, &companies)
	var task struct {
		ID     string `json:"id"`
		Status string `json:"status"`
	}
	call(t, tenant, "POST", "/task/create", map[string]any{
		"identifier": "user-1", "company": companies[0].ID, "product": "deposit"}, &task)
	if task.Status != "queued" {
		t.Fatalf("a new task is %q", task.Status)
	}

	advance(t, tenant, 120)

	call(t, tenant, "GET", "/task/"+task.ID, nil, &task)
	if task.Status != "completed" {
		t.Fatalf("the task is %q after two minutes", task.Status)
	}
	if got := app.TaskStatus(task.ID); got != "completed" {
		t.Fatalf("the app's webhooks say %q; events: %v", got, app.Events())
	}
	for _, event := range app.Events() {
		if event.Source != "com.example" || !strings.HasPrefix(event.Type, "com.example.") {
			t.Errorf("unexpected event %+v", event)
		}
		if want := "com.example." + fmt.Sprint(event.Data["eventType"]); event.Type != want {
			t.Errorf("ce-type %q names another event than the body's %q", event.Type, want)
		}
	}
}

func TestTheAppRefusesADeliveryWhoseSignatureDoesNotMatch(t *testing.T) {
	server := httptest.NewServer(&App{Secret: "the tenant's secret"})
	defer server.Close()
	request, _ := http.NewRequest("POST", server.URL+"/webhooks",
		strings.NewReader(`{"eventType":"company-updated"}`))
	request.Header.Set(SignatureHeader, strings.Repeat("0", 64))
	request.Header.Set("ce-id", "1")
	response, err := http.DefaultClient.Do(request)
	if err != nil {
		t.Fatal(err)
	}
	response.Body.Close()
	if response.StatusCode != http.StatusUnauthorized {
		t.Fatalf("answered %d", response.StatusCode)
	}
}
