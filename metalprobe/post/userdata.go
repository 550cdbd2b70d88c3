package post

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	metalv1alpha1 "github.com/ironfleet/ironfleet/apis/metal/v1alpha1"
	"github.com/ironfleet/ironfleet/internal/ignition"
)

// UserData fetches the claim's user data of an install boot from <registryURL>/v1/userdata:
// a POST of {"systemUUID"} with the bearer token, retried as b says while the failure is the
// registry's or the network's. It returns the bytes as served (empty, not nil, when the claim
// has none: 204), at most metalv1alpha1.MaxUserDataBytes of them; a *StatusError (wrapped) for a
// refusal. Errors never contain the token or the user data. A nil client means
// http.DefaultClient.
func UserData(ctx context.Context, c *http.Client, registryURL, token, systemUUID string, b Backoff) ([]byte, error) {
	if c == nil {
		c = http.DefaultClient
	}
	if token == "" {
		return nil, errors.New("fetching user data: no token")
	}
	endpoint, err := endpointURL(registryURL, ignition.UserDataPath, "fetching user data")
	if err != nil {
		return nil, err
	}
	body, err := json.Marshal(struct {
		SystemUUID string `json:"systemUUID,omitempty"`
	}{systemUUID})
	if err != nil {
		return nil, fmt.Errorf("fetching user data: encoding: %w", err)
	}
	attempts := max(b.Attempts, 1)
	var last error
	for attempt := 1; attempt <= attempts; attempt++ {
		data, retryAfter, err := fetchOnce(ctx, c, endpoint, token, body)
		if err == nil {
			return data, nil
		}
		last = redact(err, token)
		if ctxErr := ctx.Err(); ctxErr != nil {
			return nil, fmt.Errorf("fetching user data from %s: %w (last error: %v)", endpoint, ctxErr, last)
		}
		if !retryable(err) {
			return nil, fmt.Errorf("fetching user data from %s: %w", endpoint, last)
		}
		if attempt == attempts {
			break
		}
		wait := min(max(b.delay(attempt), retryAfter), max(b.Max, b.Initial))
		if err := sleep(ctx, wait); err != nil {
			return nil, fmt.Errorf("fetching user data from %s: %w (last error: %v)", endpoint, err, last)
		}
	}
	return nil, fmt.Errorf("fetching user data from %s: giving up after %d attempts: %w", endpoint, attempts, last)
}

// fetchOnce makes one request and reads the user data, bounded.
func fetchOnce(ctx context.Context, c *http.Client, endpoint, token string, body []byte) ([]byte, time.Duration, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, endpoint, bytes.NewReader(body))
	if err != nil {
		return nil, 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("User-Agent", "metalprobe")
	resp, err := c.Do(req)
	if err != nil {
		return nil, 0, err
	}
	defer func() { _ = resp.Body.Close() }()
	switch {
	case resp.StatusCode == http.StatusNoContent:
		return []byte{}, 0, nil
	case resp.StatusCode == http.StatusOK:
	default:
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, maxMessageBytes))
		return nil, retryAfter(resp.Header.Get("Retry-After")), &StatusError{Code: resp.StatusCode, Message: message(msg)}
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, metalv1alpha1.MaxUserDataBytes+1))
	if err != nil {
		return nil, 0, fmt.Errorf("reading the user data: %w", err)
	}
	if len(data) > metalv1alpha1.MaxUserDataBytes {
		return nil, 0, &StatusError{Code: resp.StatusCode, Message: fmt.Sprintf("the user data is larger than %d bytes", metalv1alpha1.MaxUserDataBytes)}
	}
	return data, 0, nil
}
