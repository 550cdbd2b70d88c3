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
// ends, logging the first failure and every tenth.
func postReport(ctx context.Context, url string, report contract.Report, logf func(string, ...any)) error {
	body, err := json.Marshal(report)
	if err != nil {
		return fmt.Errorf("encoding the report: %w", err)
	}
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{}} // no proxy
	var last error
	for attempt := 1; ; attempt++ {
		if last = post(ctx, client, url, body); last == nil {
			return nil
		}
		if attempt == 1 || attempt%10 == 0 {
			logf("report attempt %d to %s: %v", attempt, url, last)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("reporting to %s: gave up after %d attempts: %w", url, attempt, last)
		case <-time.After(reportRetry):
		}
	}
}

func post(ctx context.Context, client *http.Client, url string, body []byte) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer func() { _ = resp.Body.Close() }()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("HTTP %s", resp.Status)
	}
	return nil
}
