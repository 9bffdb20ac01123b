package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"
)

// ScriptedModel is a model on loopback that speaks the Responses API (POST /v1/responses,
// non-streaming, function tools) and follows a script per conversation: its answer to a
// conversation is the script's next tool call, or its final text once every call has a result.
// Like a real model it knows only the wire: the conversation it is sent, whole, every turn.
type ScriptedModel struct {
	// BaseURL is the OpenAI base URL ("http://127.0.0.1:41234/v1").
	BaseURL string

	scripts map[string]Script
	srv     *http.Server

	mu   sync.Mutex
	read map[string][]string // conversation (its user message) to the tool outputs it was last sent
}

// Script is what the model does in the conversation that starts with one user message: the
// tool calls it makes, one a turn, and the text it answers with at the end.
type Script struct {
	Calls []ScriptedCall
	Final string
}

// ScriptedCall is one tool call of a script.
type ScriptedCall struct {
	Tool string
	Args map[string]any
}

// StartModel serves the scripts (by the conversation's first user message) on 127.0.0.1 (a free
// port). Close it when done.
func StartModel(scripts map[string]Script) (*ScriptedModel, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("model: listen: %w", err)
	}
	m := &ScriptedModel{BaseURL: "http://" + ln.Addr().String() + "/v1", scripts: scripts, read: map[string][]string{}}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/responses", m.respond)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		apiError(w, http.StatusNotFound, "unknown path "+r.URL.Path)
	})
	m.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = m.srv.Serve(ln) }()
	return m, nil
}

// Close stops the server.
func (m *ScriptedModel) Close() {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_ = m.srv.Shutdown(ctx)
}

// Read returns the tool outputs (function_call_output items) of the last request of the
// conversation that starts with user, in order: what the model was shown.
func (m *ScriptedModel) Read(user string) []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]string(nil), m.read[user]...)
}

// The request body, as far as the model reads it.
type responsesBody struct {
	Model  string          `json:"model"`
	Input  json.RawMessage `json:"input"`
	Tools  []struct{ Type, Name string }
	Stream bool `json:"stream"`
}

type wireItem struct {
	Type      string          `json:"type"`
	Role      string          `json:"role"`
	Content   json.RawMessage `json:"content"`
	CallID    string          `json:"call_id"`
	Name      string          `json:"name"`
	Arguments string          `json:"arguments"`
	Output    json.RawMessage `json:"output"`
}

func (m *ScriptedModel) respond(w http.ResponseWriter, r *http.Request) {
	var body responsesBody
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 4<<20)).Decode(&body); err != nil {
		apiError(w, http.StatusBadRequest, "could not parse the JSON body: "+err.Error())
		return
	}
	if body.Stream {
		apiError(w, http.StatusBadRequest, "this server does not stream")
		return
	}
	var items []wireItem
	if err := json.Unmarshal(body.Input, &items); err != nil {
		apiError(w, http.StatusBadRequest, "input must be a list of items: "+err.Error())
		return
	}
	user, calls, outputs, err := readConversation(items)
	if err != nil {
		apiError(w, http.StatusBadRequest, err.Error())
		return
	}
	script, ok := m.scripts[user]
	if !ok {
		apiError(w, http.StatusBadRequest, "no script for this conversation")
		return
	}
	m.mu.Lock()
	m.read[user] = outputs
	m.mu.Unlock()

	id := digest(user, fmt.Sprint(calls))
	var item any
	if calls < len(script.Calls) {
		c := script.Calls[calls]
		if !offered(body.Tools, c.Tool) {
			apiError(w, http.StatusBadRequest, fmt.Sprintf("the script calls %q, which the request does not offer", c.Tool))
			return
		}
		args, _ := json.Marshal(c.Args)
		item = map[string]any{"type": "function_call", "id": "fc_" + id, "call_id": fmt.Sprintf("call_%s_%d", digest(user)[:8], calls+1),
			"name": c.Tool, "arguments": string(args), "status": "completed"}
	} else {
		item = map[string]any{"type": "message", "id": "msg_" + id, "role": "assistant", "status": "completed",
			"content": []any{map[string]any{"type": "output_text", "text": script.Final, "annotations": []any{}}}}
	}
	writeModelJSON(w, http.StatusOK, map[string]any{
		"id": "resp_" + id, "object": "response", "created_at": time.Now().Unix(), "status": "completed",
		"model": body.Model, "output": []any{item}, "parallel_tool_calls": false, "tool_choice": "auto",
		"tools": []any{}, "error": nil, "incomplete_details": nil, "metadata": map[string]any{},
		"temperature": 1, "top_p": 1,
		"usage": map[string]any{"input_tokens": len(body.Input) / 4, "output_tokens": 20, "total_tokens": len(body.Input)/4 + 20,
			"input_tokens_details": map[string]any{"cached_tokens": 0}, "output_tokens_details": map[string]any{"reasoning_tokens": 0}},
	})
}

// readConversation returns the first user message's text, the number of tool calls the model
// made so far and their outputs in order; every call must have its output.
func readConversation(items []wireItem) (user string, calls int, outputs []string, err error) {
	open := map[string]bool{}
	for _, it := range items {
		switch {
		case it.Type == "function_call":
			open[it.CallID] = true
			calls++
		case it.Type == "function_call_output":
			if !open[it.CallID] {
				return "", 0, nil, fmt.Errorf("function_call_output for call %q, which the input does not have", it.CallID)
			}
			delete(open, it.CallID)
			var s string
			if json.Unmarshal(it.Output, &s) != nil {
				return "", 0, nil, fmt.Errorf("the output of call %q is not a string", it.CallID)
			}
			outputs = append(outputs, s)
		case (it.Type == "message" || it.Type == "") && it.Role == "user" && user == "":
			if json.Unmarshal(it.Content, &user) != nil || user == "" {
				return "", 0, nil, fmt.Errorf("the first user message must be a text")
			}
		}
	}
	if len(open) > 0 {
		return "", 0, nil, fmt.Errorf("%d tool call(s) without an output", len(open))
	}
	if user == "" {
		return "", 0, nil, fmt.Errorf("no user message")
	}
	return user, calls, outputs, nil
}

func offered(tools []struct{ Type, Name string }, name string) bool {
	for _, t := range tools {
		if t.Type == "function" && t.Name == name {
			return true
		}
	}
	return false
}

func digest(parts ...string) string {
	h := sha256.Sum256([]byte(strings.Join(parts, "\x00")))
	return hex.EncodeToString(h[:12])
}

func apiError(w http.ResponseWriter, status int, msg string) {
	writeModelJSON(w, status, map[string]any{"error": map[string]any{"message": msg, "type": "invalid_request_error", "param": nil, "code": nil}})
}

func writeModelJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
