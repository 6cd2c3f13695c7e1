// Package recipe is the app under test: it receives the service's webhooks as it would in
// production. Each delivery's signature is checked (HMAC-SHA256 of the raw body, keyed by
// the API secret, in x-hmac-signature-sha-256) and the binary-mode CloudEvent is read from
// its ce-* headers and JSON body; the app keeps each task's latest status. It knows nothing
// of the sandbox.
//
// The standard library only, so `go test` needs no module download: binary mode is five
// ce-* headers and a JSON body. Where Go modules can be fetched, the CloudEvents SDK for Go
// (github.com/cloudevents/sdk-go/v2, http.NewEventFromHTTPRequest) can read them instead.
package recipe

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"
)

const SignatureHeader = "X-Hmac-Signature-Sha-256"

// Event is a CloudEvent as the app keeps it: its attributes and its JSON data.
type Event struct {
	ID, Source, Type, SpecVersion, Time string
	Data                                map[string]any
}

// App is the webhook receiver: an http.Handler for POST /webhooks.
type App struct {
	Secret string

	mu         sync.Mutex
	events     []Event
	taskStatus map[string]string
}

// SignatureIsValid says whether signature is the hex HMAC-SHA256 of body keyed by secret.
func SignatureIsValid(body []byte, signature, secret string) bool {
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write(body)
	given, err := hex.DecodeString(signature)
	return err == nil && hmac.Equal(given, mac.Sum(nil))
}

func (a *App) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != "/webhooks" {
		http.NotFound(w, r)
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	if !SignatureIsValid(body, r.Header.Get(SignatureHeader), a.Secret) {
		http.Error(w, "bad signature", http.StatusUnauthorized)
		return
	}
	event := Event{ID: r.Header.Get("Ce-Id"), Source: r.Header.Get("Ce-Source"),
		Type: r.Header.Get("Ce-Type"), SpecVersion: r.Header.Get("Ce-Specversion"),
		Time: r.Header.Get("Ce-Time")}
	if event.ID == "" || event.Source == "" || event.Type == "" || event.SpecVersion != "1.0" {
		http.Error(w, "not a binary-mode CloudEvent 1.0", http.StatusBadRequest)
		return
	}
	if err := json.Unmarshal(body, &event.Data); err != nil {
		http.Error(w, "the body is not a JSON object", http.StatusBadRequest)
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.events = append(a.events, event)
	if strings.HasSuffix(event.Type, ".task-status-updated") {
		if a.taskStatus == nil {
			a.taskStatus = map[string]string{}
		}
		task, _ := event.Data["task"].(string)
		data, _ := event.Data["data"].(map[string]any)
		status, _ := data["status"].(string)
		a.taskStatus[task] = status
	}
	w.WriteHeader(http.StatusNoContent)
}

// Events are the CloudEvents accepted so far, in arrival order.
func (a *App) Events() []Event {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]Event(nil), a.events...)
}

// TaskStatus is the latest status a webhook gave the task ("" if none).
func (a *App) TaskStatus(task string) string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.taskStatus[task]
}
