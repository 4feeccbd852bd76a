package wire

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"
)

// Client talks to worker 0 over its control socket: the render workers' claims and result
// batches, and the supervisor's readiness check. A render worker adapts it to claim.Fallback.
type Client struct {
	http *http.Client
}

// NewClient returns a client for the unix socket at path.
func NewClient(socketPath string) *Client {
	tr := &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", socketPath)
		},
		MaxIdleConnsPerHost: 16,
		IdleConnTimeout:     time.Minute,
	}
	return &Client{http: &http.Client{Transport: tr, Timeout: 30 * time.Second}}
}

// ErrUnavailable wraps every failure to reach worker 0 or to get a 2xx from it.
var ErrUnavailable = errors.New("wire: worker 0 unavailable")

// StatusError is worker 0's answer other than 2xx. A 4xx is final (the request is refused for
// good, and sending it again cannot help); a 5xx may pass. It wraps ErrUnavailable.
type StatusError struct {
	Path string
	Code int
	Msg  string // the start of the body
}

func (e *StatusError) Error() string {
	return fmt.Sprintf("%v: %s: %d %s: %s", ErrUnavailable, e.Path, e.Code, http.StatusText(e.Code), e.Msg)
}

func (e *StatusError) Unwrap() error { return ErrUnavailable }

func (c *Client) post(ctx context.Context, path string, in, out any) error {
	body, err := json.Marshal(in)
	if err != nil {
		return fmt.Errorf("wire: %s: %w", path, err)
	}
	return c.postBody(ctx, path, "application/json", body, out)
}

func (c *Client) postBody(ctx context.Context, path, contentType string, body []byte, out any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://worker0"+path, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("wire: %s: %w", path, err)
	}
	req.Header.Set("Content-Type", contentType)
	resp, err := c.http.Do(req)
	if err != nil {
		return fmt.Errorf("%w: %s: %v", ErrUnavailable, path, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 1024))
		return &StatusError{Path: path, Code: resp.StatusCode, Msg: string(bytes.TrimSpace(msg))}
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return fmt.Errorf("%w: %s: bad response: %v", ErrUnavailable, path, err)
	}
	return nil
}

// Claim asks worker 0 for up to req.N jobs from the floored index scan. An answer with no job
// and QueuedBehindLeases set is claim.ErrQueuedBehindLeases on the server's side: due work
// waits behind leased rows.
func (c *Client) Claim(ctx context.Context, req ClaimRequest) (ClaimResponse, error) {
	var resp ClaimResponse
	if err := c.post(ctx, PathClaim, req, &resp); err != nil {
		return ClaimResponse{}, err
	}
	return resp, nil
}

// SendResults delivers a batch of results, in the binary form; worker 0 answers only after
// they are committed. A batch whose every result was fenced (409: none of its leases is held
// any more, e.g. a retry of a batch worker 0 had committed) is not an error: there is nothing
// left to deliver, and the stats say so. Any other 4xx is a *StatusError the batch cannot
// recover from by being sent again.
func (c *Client) SendResults(ctx context.Context, results []Result) (ApplyStats, error) {
	var st ApplyStats
	err := c.postBody(ctx, PathResults, ResultsContentType, EncodeResults(nil, results), &st)
	if se := (*StatusError)(nil); errors.As(err, &se) && se.Code == http.StatusConflict {
		return ApplyStats{Fenced: len(results)}, nil
	}
	return st, err
}

// Status asks worker 0 whether it serves.
func (c *Client) Status(ctx context.Context) (Status, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://worker0"+PathStatus, nil)
	if err != nil {
		return Status{}, err
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return Status{}, fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	defer resp.Body.Close()
	var st Status
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		return Status{}, fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	return st, nil
}

// Validators asks worker 0 whether key may be checked with a conditional GET, and with what.
func (c *Client) Validators(ctx context.Context, key []byte) (Validators, error) {
	var v Validators
	if err := c.post(ctx, PathValidators, ValidatorsRequest{Key: key}, &v); err != nil {
		return Validators{}, err
	}
	return v, nil
}
