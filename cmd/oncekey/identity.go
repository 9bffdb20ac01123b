package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"text/tabwriter"

	"github.com/spf13/cobra"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"

	okworker "github.com/oncekey/oncekey/worker"
)

// identityCheckDoc is where the check against the new code is described; every identity
// command's help points there.
const identityCheckDoc = "docs/policies-and-keys.md#changing-a-tool-safely"

func newIdentityCmd(a *app) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "identity",
		Short: "Collect and read the recorded workflow histories that a check of operation identity runs against",
		Long: "A change to a tool's input type or Policy.Version can give a repeat of a recorded operation another identity:\n" +
			"a second effect, or a fingerprint mismatch. The check that derives keys and fingerprints with the new code's\n" +
			"Registry is okworker.CheckIdentity, run as a Go test in CI, since only your code has your Registry; these\n" +
			"commands collect its input (fetch) and show what a history recorded (list). See " + identityCheckDoc + ".",
	}
	cmd.AddCommand(newIdentityFetchCmd(a), newIdentityListCmd(a))
	return cmd
}

func newIdentityFetchCmd(a *app) *cobra.Command {
	var ids []string
	var query, out string
	var limit int
	cmd := &cobra.Command{
		Use:   "fetch (--workflow-id ID... | --query Q [--limit N]) --out DIR",
		Short: "Write the histories of workflows to DIR, as `temporal workflow show --output json` prints them",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			switch {
			case out == "":
				return fail(exitUsage, "identity fetch: give --out DIR, the directory the history files are written to")
			case (len(ids) == 0) == (query == ""):
				return fail(exitUsage, "identity fetch: give --workflow-id (repeatable) or --query, one of the two")
			case limit <= 0:
				return fail(exitUsage, "identity fetch: --limit must be at least 1")
			}
			if err := os.MkdirAll(out, 0o755); err != nil {
				return fail(exitFailed, "identity fetch: %v", err)
			}
			return a.withTemporal(cmd.Context(), func(ctx context.Context, c client.Client) error {
				runs := make([][2]string, 0, len(ids))
				for _, id := range ids {
					runs = append(runs, [2]string{id, ""})
				}
				if query != "" {
					var err error
					if runs, err = a.listRuns(ctx, c, query, limit); err != nil {
						return err
					}
				}
				for _, r := range runs {
					path, err := a.fetchHistory(ctx, c, r[0], r[1], out)
					if err != nil {
						return err
					}
					fmt.Fprintln(a.stdout, path)
				}
				fmt.Fprintf(a.stderr, "%d history file(s) written to %s; check them with okworker.CheckIdentityFiles (see %s)\n", len(runs), out, identityCheckDoc)
				return nil
			})
		},
	}
	f := cmd.Flags()
	f.StringArrayVar(&ids, "workflow-id", nil, "a workflow ID whose latest run to fetch (repeatable)")
	f.StringVar(&query, "query", "", "a visibility query naming the workflows to fetch, e.g. \"WorkflowType='Agent' AND CloseTime > '2026-11-01T00:00:00Z'\"")
	f.IntVar(&limit, "limit", 100, "the most workflows --query fetches")
	f.StringVar(&out, "out", "", "the directory to write <workflow ID>.<run ID>.json files into")
	return cmd
}

// listRuns returns the (workflow ID, run ID) of up to limit workflows query matches.
func (a *app) listRuns(ctx context.Context, c client.Client, query string, limit int) ([][2]string, error) {
	var runs [][2]string
	var token []byte
	for len(runs) < limit {
		resp, err := c.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{Query: query, NextPageToken: token,
			PageSize: int32(min(limit, 1000))})
		var nf *serviceerror.NamespaceNotFound
		switch {
		case errors.As(err, &nf):
			return nil, a.noNamespace(err)
		case err != nil:
			return nil, fail(exitFailed, "identity fetch: list workflows matching %q: %s", query, oneLine(err))
		}
		for _, e := range resp.GetExecutions() {
			if len(runs) < limit {
				runs = append(runs, [2]string{e.GetExecution().GetWorkflowId(), e.GetExecution().GetRunId()})
			}
		}
		if token = resp.GetNextPageToken(); len(token) == 0 {
			break
		}
	}
	if len(runs) == 0 {
		return nil, fail(exitNotFound, "identity fetch: no workflow matches %q in namespace %s; a check of no histories proves nothing", query, a.ns())
	}
	return runs, nil
}

// fetchHistory writes the history of one workflow run into dir and returns the file's path.
func (a *app) fetchHistory(ctx context.Context, c client.Client, id, runID, dir string) (string, error) {
	h, err := okworker.FetchHistory(ctx, c, id, runID)
	var nf *serviceerror.NotFound
	var nsNF *serviceerror.NamespaceNotFound
	switch {
	case errors.As(err, &nsNF):
		return "", a.noNamespace(err)
	case errors.As(err, &nf):
		return "", fail(exitNotFound, "identity fetch: namespace %s has no workflow %s (or its history is past retention)", a.ns(), id)
	case err != nil:
		return "", fail(exitFailed, "identity fetch: %s", oneLine(err))
	}
	if runID == "" && len(h.History.GetEvents()) > 0 {
		runID = h.History.GetEvents()[0].GetWorkflowExecutionStartedEventAttributes().GetOriginalExecutionRunId()
	}
	var b bytes.Buffer
	if err := okworker.WriteHistory(&b, h); err != nil {
		return "", fail(exitFailed, "identity fetch: %v", err)
	}
	path := filepath.Join(dir, safeFileName(id)+"."+safeFileName(runID)+".json")
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		return "", fail(exitFailed, "identity fetch: %v", err)
	}
	return path, nil
}

// safeFileName replaces what a file name cannot hold.
func safeFileName(s string) string {
	b := []byte(s)
	for i, c := range b {
		if c == '/' || c == '\\' || c == 0 || c == ':' {
			b[i] = '_'
		}
	}
	if len(b) == 0 {
		return "_"
	}
	return string(b)
}

func newIdentityListCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:   "list FILE...",
		Short: "List the calls of protected tools recorded in history files: tool, operation key, tenant, step, version",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, files []string) error {
			tw := tabwriter.NewWriter(a.stdout, 0, 0, 2, ' ', 0)
			fmt.Fprintln(tw, "HISTORY\tEVENT\tTOOL\tOPERATION KEY\tTENANT\tSTEP ID\tENDED\tVERSION")
			for _, f := range files {
				h, err := okworker.ReadHistoryFile(f)
				if err != nil {
					return fail(exitFailed, "identity list: %v", err)
				}
				calls, err := okworker.RecordedCalls(h, nil)
				if err != nil {
					return fail(exitFailed, "identity list: %v", err)
				}
				for _, c := range calls {
					version := "-"
					if c.Versioned {
						version = strconv.Quote(c.Version)
					}
					fmt.Fprintf(tw, "%s\t#%d\t%s\t%s\t%s\t%s\t%s\t%s\n", printable(f), c.EventID, printable(c.ActivityType), dashIfEmpty(c.Key),
						printable(c.Tenant), dashIfEmpty(printable(c.StepID)), c.Ended, version)
				}
			}
			return tw.Flush()
		},
	}
}

func dashIfEmpty(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
