package oncekey_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/oncekey/oncekey"
)

func TestIdempotencyKeyTransport(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	got := map[string]string{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got[r.Method] = r.Header.Get("Idempotency-Key")
		mu.Unlock()
	}))
	defer srv.Close()
	client := &http.Client{Transport: &oncekey.IdempotencyKeyTransport{}}
	const key = "ok1_00000000000000000000000000000000000000000000000000000000000000aa"
	inTool := oncekey.ContextWithOperationKey(context.Background(), key)

	for _, m := range []string{http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete, http.MethodGet, http.MethodHead, http.MethodOptions} {
		req, err := http.NewRequestWithContext(inTool, m, srv.URL, strings.NewReader(""))
		require.NoError(t, err)
		req.Header.Set("Idempotency-Key", "sdk-made-up")
		res, err := client.Do(req)
		require.NoError(t, err)
		res.Body.Close()
		require.Equal(t, "sdk-made-up", req.Header.Get("Idempotency-Key"), "the caller's request is not modified")
	}
	for _, m := range []string{http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete} {
		require.Equal(t, key, got[m], m)
	}
	for _, m := range []string{http.MethodGet, http.MethodHead, http.MethodOptions} {
		require.Equal(t, "sdk-made-up", got[m], "%s passes unchanged", m)
	}

	// Outside a claimed tool there is no key to send.
	req, err := http.NewRequestWithContext(context.Background(), http.MethodPost, srv.URL, nil)
	require.NoError(t, err)
	res, err := client.Do(req)
	require.NoError(t, err)
	res.Body.Close()
	require.Empty(t, got[http.MethodPost])
}
