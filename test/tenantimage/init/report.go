package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/ironfleet/ironfleet/test/tenantimage/contract"
)

// reportRetry is the wait between report attempts.
const reportRetry = 2 * time.Second

// postReport POSTs the report as JSON to url until it is answered with a 2xx status or ctx
// ends, logging the first failure and every tenth. It returns the answer's Reply: empty when
// the answer had no body.
func postReport(ctx context.Context, url string, report contract.Report, logf func(string, ...any)) (contract.Reply, error) {
	body, err := json.Marshal(report)
	if err != nil {
		return contract.Reply{}, fmt.Errorf("encoding the report: %w", err)
	}
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{}} // no proxy
	var last error
	for attempt := 1; ; attempt++ {
		reply, err := post(ctx, client, url, body)
		if last = err; last == nil {
			return reply, nil
		}
		if attempt == 1 || attempt%10 == 0 {
			logf("report attempt %d to %s: %v", attempt, url, last)
		}
		select {
		case <-ctx.Done():
			return contract.Reply{}, fmt.Errorf("reporting to %s: gave up after %d attempts: %w", url, attempt, last)
		case <-time.After(reportRetry):
		}
	}
}

func post(ctx context.Context, client *http.Client, url string, body []byte) (contract.Reply, error) {
	var reply contract.Reply
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return reply, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return reply, err
	}
	defer func() { _ = resp.Body.Close() }()
	answer, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode/100 != 2 {
		return reply, fmt.Errorf("HTTP %s", resp.Status)
	}
	if err != nil {
		return reply, fmt.Errorf("reading the answer: %w", err)
	}
	if len(bytes.TrimSpace(answer)) > 0 {
		if err := json.Unmarshal(answer, &reply); err != nil {
			return reply, fmt.Errorf("the answer is not a reply: %w", err)
		}
	}
	return reply, nil
}
