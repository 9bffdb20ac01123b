package scripted

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"sync/atomic"
	"time"
)

// ModelName is the model the server reports when a request names none.
const ModelName = "ticketdesk-scripted"

// maxBody bounds a request body (conversations of the demo are a few kilobytes).
const maxBody = 4 << 20

// Handler serves POST /v1/chat/completions (and /chat/completions) with the script under opts.
// It answers a streaming request, a bad body or a conversation the script cannot read with an
// OpenAI-style error body (400), and other paths with 404.
func Handler(opts Options, requests *atomic.Int64) http.Handler {
	mux := http.NewServeMux()
	h := func(w http.ResponseWriter, r *http.Request) {
		if requests != nil {
			requests.Add(1)
		}
		var req ChatRequest
		dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxBody))
		if err := dec.Decode(&req); err != nil {
			writeAPIError(w, http.StatusBadRequest, "invalid_request_error", "could not parse the JSON body: "+err.Error())
			return
		}
		if req.Stream {
			writeAPIError(w, http.StatusBadRequest, "invalid_request_error", "this server does not stream; send stream: false")
			return
		}
		if len(req.Messages) == 0 {
			writeAPIError(w, http.StatusBadRequest, "invalid_request_error", "messages is required")
			return
		}
		reply, err := Decide(opts, req.Messages)
		if err != nil {
			writeAPIError(w, http.StatusBadRequest, "invalid_request_error", err.Error())
			return
		}
		if missing := missingTools(reply, req.Tools); missing != "" {
			writeAPIError(w, http.StatusBadRequest, "invalid_request_error",
				fmt.Sprintf("the script calls tool %q, which the request does not define", missing))
			return
		}
		writeJSON(w, http.StatusOK, completion(opts, req, reply))
	}
	mux.HandleFunc("POST /v1/chat/completions", h)
	mux.HandleFunc("POST /chat/completions", h)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeAPIError(w, http.StatusNotFound, "invalid_request_error", "unknown path "+r.URL.Path)
	})
	return mux
}

func missingTools(r Reply, tools []Tool) string {
	defined := map[string]bool{}
	for _, t := range tools {
		defined[t.Function.Name] = true
	}
	for _, c := range r.Calls {
		if !defined[c.Function.Name] {
			return c.Function.Name
		}
	}
	return ""
}

func completion(opts Options, req ChatRequest, r Reply) chatResponse {
	model := req.Model
	if model == "" {
		model = ModelName
	}
	msg := responseMessage{Role: "assistant", ToolCalls: r.Calls}
	finish := "tool_calls"
	if len(r.Calls) == 0 {
		finish = "stop"
	}
	if r.Content != "" || len(r.Calls) == 0 {
		c := r.Content
		msg.Content = &c
	}
	// Token counts are rough (four bytes a token), enough for a client that reads them.
	in, _ := json.Marshal(req.Messages)
	out, _ := json.Marshal(msg)
	s := &script{opts: opts.withDefaults()}
	id := "chatcmpl-" + hex.EncodeToString(s.hash("completion", string(in))[:12])
	return chatResponse{
		ID: id, Object: "chat.completion", Created: time.Now().Unix(), Model: model,
		Choices:           []choice{{Index: 0, Message: msg, FinishReason: finish}},
		Usage:             usage{PromptTokens: len(in) / 4, CompletionTokens: len(out) / 4, TotalTokens: (len(in) + len(out)) / 4},
		SystemFingerprint: "fp_scripted",
	}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func writeAPIError(w http.ResponseWriter, status int, typ, msg string) {
	var e apiError
	e.Error.Message, e.Error.Type = msg, typ
	writeJSON(w, status, e)
}

// Server is a running scripted model.
type Server struct {
	// BaseURL is the OpenAI base URL of the server ("http://127.0.0.1:41234/v1"), for
	// option.WithBaseURL or OPENAI_BASE_URL.
	BaseURL string

	requests atomic.Int64
	srv      *http.Server
}

// Start serves the script on 127.0.0.1 (a free port). Close it when done.
func Start(opts Options) (*Server, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("scripted: listen: %w", err)
	}
	s := &Server{BaseURL: "http://" + ln.Addr().String() + "/v1"}
	s.srv = &http.Server{Handler: Handler(opts, &s.requests), ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = s.srv.Serve(ln) }()
	return s, nil
}

// Requests returns how many requests the server received.
func (s *Server) Requests() int64 { return s.requests.Load() }

// Close stops the server.
func (s *Server) Close() {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_ = s.srv.Shutdown(ctx)
}
