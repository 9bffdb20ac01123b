package downstream

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"time"
)

// Client calls the fake services. The zero value is not usable; use NewClient.
type Client struct {
	http *http.Client
}

// NewClient returns a client with a per-request timeout of timeout.
func NewClient(timeout time.Duration) *Client {
	return &Client{http: &http.Client{Timeout: timeout}}
}

// NewClientWith returns a client that sends its requests with hc (for instance one whose
// transport sets the Idempotency-Key header itself).
func NewClientWith(hc *http.Client) *Client { return &Client{http: hc} }

// Post sends body as JSON to base+path with the Idempotency-Key key (none when "": the
// client's transport may still set one), and
// decodes a 2xx answer into out. A non-2xx answer is an *APIError; a transport failure is
// returned as is.
func (c *Client) Post(ctx context.Context, base, path, key string, body, out any) error {
	b, err := json.Marshal(body)
	if err != nil {
		return fmt.Errorf("downstream: encode %s: %w", path, err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+path, bytes.NewReader(b))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set(HeaderIdempotencyKey, key)
	}
	return c.do(req, out)
}

// Get fetches base+path and decodes a 2xx answer into out. 404 is ErrNotFound (wrapped).
func (c *Client) Get(ctx context.Context, base, path string, out any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+path, nil)
	if err != nil {
		return err
	}
	return c.do(req, out)
}

// FindByKey looks up, at base+path, the effect landed by a request carrying the
// Idempotency-Key key and decodes its body into out. Nothing found is ErrNotFound (wrapped).
func (c *Client) FindByKey(ctx context.Context, base, path, key string, out any) error {
	return c.Get(ctx, base, path+"?idempotency_key="+url.QueryEscape(key), out)
}

func (c *Client) do(req *http.Request, out any) error {
	resp, err := c.http.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode == http.StatusNotFound {
		return fmt.Errorf("%w: %s %s", ErrNotFound, req.Method, req.URL.Path)
	}
	if resp.StatusCode/100 != 2 {
		var e struct {
			Error string `json:"error"`
		}
		_ = json.Unmarshal(b, &e)
		return &APIError{Status: resp.StatusCode, Message: e.Error}
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(b, out); err != nil {
		return fmt.Errorf("downstream: decode %s: %w", req.URL.Path, err)
	}
	return nil
}
