package worker_test

import (
	"cmp"
	"context"
	"encoding/json"
	"log"
	"os"
	"path/filepath"

	"github.com/oncekey/oncekey"
	"github.com/oncekey/oncekey/worker"
)

// Transfer is a tool's input after a change: the field "to" was renamed "recipient".
type Transfer struct {
	Recipient string `json:"recipient"`
	Cents     int    `json:"cents"`
}

// UnmarshalJSON still reads the older name, so a call the older code scheduled (in flight during
// the deploy, or recorded in a history that replays) arrives with its values.
func (t *Transfer) UnmarshalJSON(b []byte) error {
	var in struct {
		Recipient string `json:"recipient"`
		To        string `json:"to"`
		Cents     int    `json:"cents"`
	}
	if err := json.Unmarshal(b, &in); err != nil {
		return err
	}
	t.Recipient, t.Cents = cmp.Or(in.Recipient, in.To), in.Cents
	return nil
}

func SendTransfer(ctx context.Context, in Transfer) (string, error) { return "", nil }

// toolRegistry is the Registry the new code's workers use.
func toolRegistry() (*oncekey.Registry, error) {
	reg := oncekey.NewRegistry()
	err := reg.Set(SendTransfer, oncekey.Policy{
		Effect:  oncekey.Effectful,
		Version: "2",
		// Version 1 called the field "to": a repeat of a version-1 operation is that operation.
		Previous: []oncekey.PreviousVersion{{Version: "1", Args: renameRecipientBack}},
	})
	return reg, err
}

// renameRecipientBack maps a version-2 arguments document to the one version 1 gave.
func renameRecipientBack(args json.RawMessage) (json.RawMessage, error) {
	var doc map[string]any
	if err := json.Unmarshal(args, &doc); err != nil {
		return nil, err
	}
	doc["to"] = doc["recipient"]
	delete(doc, "recipient")
	return json.Marshal(doc)
}

// The identity check in CI: histories fetched from production with `oncekey identity fetch`,
// checked against the Registry the new code builds. A tool whose identity changed fails it.
func ExampleCheckIdentityFiles() {
	reg, err := toolRegistry()
	if err != nil {
		log.Fatal(err)
	}
	files, _ := filepath.Glob("testdata/identity/*.json")
	report, err := worker.CheckIdentityFiles(context.Background(), reg, worker.IdentityOptions{
		Namespace: "prod", // the namespace the histories ran in: part of every key
		// Store: the records' store, to compare fingerprints and versions too
	}, files...)
	if err != nil {
		log.Fatal(err) // no files, a file that is not a whole history, or one without a protected call
	}
	_ = report.WriteTable(os.Stdout)
	if err := report.Err(); err != nil {
		log.Fatal(err) // the table above names each tool and the field that changed
	}
}
