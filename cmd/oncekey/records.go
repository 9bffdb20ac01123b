package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/oncekey/oncekey"
	"github.com/oncekey/oncekey/cmd/oncekey/internal/payloadview"
	"github.com/oncekey/oncekey/internal/shell"
	"github.com/oncekey/oncekey/oncekeystore"
)

// recordView is a record as the CLI prints it. The stored result is left out unless asked for.
type recordView struct {
	Tenant          string              `json:"tenant"`
	OperationKey    string              `json:"operation_key"`
	Namespace       string              `json:"namespace,omitempty"`
	Tool            string              `json:"tool"`
	Version         string              `json:"version,omitempty"`
	Effect          string              `json:"effect"`
	Status          oncekeystore.Status `json:"status"`
	WorkflowID      string              `json:"workflow_id"`
	StepID          string              `json:"step_id"`
	Epoch           int64               `json:"epoch"`
	LeaseUntil      *time.Time          `json:"lease_until,omitempty"`
	LeaseExpired    bool                `json:"lease_expired,omitempty"`
	EffectReference string              `json:"effect_reference,omitempty"`
	ResolvedBy      string              `json:"resolved_by,omitempty"`
	Note            string              `json:"note,omitempty"`
	Failure         json.RawMessage     `json:"failure,omitempty"`
	ResultBytes     int                 `json:"result_bytes"`
	Result          any                 `json:"result,omitempty"`
	Fingerprint     string              `json:"fingerprint"`
	CreatedAt       time.Time           `json:"created_at"`
	UpdatedAt       time.Time           `json:"updated_at"`
	ExpiresAt       *time.Time          `json:"expires_at,omitempty"`
	TombstoneUntil  *time.Time          `json:"tombstone_until,omitempty"`
	// KeptUntilSettled: the record is pending or unknown, which never expire: ExpiresAt and
	// TombstoneUntil are where the windows would end had it settled at its claim, and both move
	// to the settling when it settles. AgeSeconds is then how long it has waited since its last
	// change (the claim, or the outcome becoming unknown).
	KeptUntilSettled bool  `json:"kept_until_settled,omitempty"`
	AgeSeconds       int64 `json:"age_seconds,omitempty"`
	// Signature is who signed the resolution that settled the record and whether it verifies
	// (show only; absent when it was not signed, or not settled by a resolution).
	Signature *verdict `json:"signature,omitempty"`
}

// showView is what `oncekey show --json` prints: the record's fields (none when the call has not
// claimed its key yet) and, when the operation has one, its approval.
type showView struct {
	*recordView
	Approval *approvalView `json:"approval,omitempty"`
}

func timePtr(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	t = t.UTC()
	return &t
}

func view(r *oncekeystore.Record, showResult bool) recordView {
	v := recordView{
		Tenant: r.Tenant, OperationKey: r.OperationKey, Namespace: r.Namespace, Tool: r.Tool, Version: r.Version,
		Effect: r.Effect.String(), Status: r.Status, WorkflowID: r.WorkflowID, StepID: r.StepID,
		Epoch: r.Epoch, LeaseUntil: timePtr(r.LeaseUntil), LeaseExpired: r.LeaseExpired,
		EffectReference: r.EffectReference, ResolvedBy: r.ResolvedBy, Note: r.Note,
		ResultBytes: len(r.Result), Fingerprint: r.Fingerprint,
		CreatedAt: r.CreatedAt.UTC(), UpdatedAt: r.UpdatedAt.UTC(),
		ExpiresAt: timePtr(r.ExpiresAt), TombstoneUntil: timePtr(r.TombstoneUntil),
	}
	if r.Status == oncekeystore.StatusPending || r.Status == oncekeystore.StatusUnknown {
		v.KeptUntilSettled = true
		v.AgeSeconds = int64(max(time.Since(r.UpdatedAt), 0) / time.Second)
	}
	if len(r.Failure) > 0 {
		if json.Valid(r.Failure) {
			v.Failure = r.Failure
		} else {
			b, _ := json.Marshal(string(r.Failure))
			v.Failure = b
		}
	}
	if showResult && len(r.Result) > 0 {
		v.Result = decodeResult(r.Result)
	}
	return v
}

// decodeResult turns a stored result into something printable (see payloadview.Decode).
func decodeResult(b []byte) any { return payloadview.Decode(b) }

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// keptUntilSettled says how long a pending or unknown record v is kept: until it settles,
// however old, and then for its retention and tombstone windows.
func keptUntilSettled(v recordView) string {
	out := "until it settles, however old (pending and unknown records never expire)"
	if v.ExpiresAt != nil && v.TombstoneUntil != nil {
		out += fmt.Sprintf("; then %s, and a tombstone for %s more",
			v.ExpiresAt.Sub(v.CreatedAt).Round(time.Second), v.TombstoneUntil.Sub(*v.ExpiresAt).Round(time.Second))
	}
	return out
}

func age(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	if s := span(max(time.Since(t), 0)); s != "" {
		return s + " ago"
	}
	return t.UTC().Format("2006-01-02")
}

// parseSince reads --since: a duration back from now ("2h", "30m") or an RFC 3339 time.
func parseSince(s string) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	if d, err := time.ParseDuration(s); err == nil {
		if d < 0 {
			return time.Time{}, fmt.Errorf("--since %s is negative", s)
		}
		return time.Now().Add(-d), nil
	}
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("--since %q is neither a duration (2h, 30m) nor an RFC 3339 time (2026-01-02T15:04:05Z)", s)
	}
	return t, nil
}

func parseStatus(s string) (oncekeystore.Status, error) {
	if s == "" {
		return "", nil
	}
	st := oncekeystore.Status(strings.ToLower(s))
	if !st.Valid() {
		return "", fmt.Errorf("--status %q is not one of pending, applied, failed, unknown, released, expired", s)
	}
	return st, nil
}

// listFlags are the filters and the output flags that list and approvals share.
type listFlags struct {
	tenant, tool, workflow string
	limit                  int
	asJSON                 bool
}

// add defines the flags on cmd: what names the listed things ("records"), toolHelp is --tool's help.
func (l *listFlags) add(cmd *cobra.Command, what, toolHelp string) {
	f := cmd.Flags()
	f.StringVar(&l.tenant, "tenant", "", "only this tenant")
	f.StringVar(&l.tool, "tool", "", toolHelp)
	f.StringVar(&l.workflow, "workflow", "", "only this workflow ID")
	f.IntVar(&l.limit, "limit", 100, "at most this many "+what)
	f.BoolVar(&l.asJSON, "json", false, "print JSON (an array of "+what+")")
}

// check returns the first of errs, the errors of reading the command's other flags, as a usage
// error, else refuses a --limit below 1.
func (l *listFlags) check(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return fail(exitUsage, "%v", err)
		}
	}
	if l.limit < 1 {
		return fail(exitUsage, "--limit must be at least 1")
	}
	return nil
}

// printMore says, when more is true, that --limit cut the list after n.
func (l *listFlags) printMore(a *app, n int, more bool) {
	if more {
		fmt.Fprintf(a.stdout, "(first %d shown; raise --limit for more)\n", n)
	}
}

// listAll pages through Store.List until limit records or the end; more reports that the limit
// cut the list.
func listAll(ctx context.Context, s oncekeystore.Store, p oncekeystore.ListParams, limit int) ([]*oncekeystore.Record, bool, error) {
	return listPages(limit, func(n int, cursor string) ([]*oncekeystore.Record, string, error) {
		p.Limit, p.Cursor = n, cursor
		res, err := s.List(ctx, &p)
		if err != nil {
			return nil, "", err
		}
		return res.Records, res.Next, nil
	})
}

// listPages calls page for pages of at most 1000 items (n) from cursor ("" first) until limit
// items or the end (page returns the next cursor, "" at the end); more reports that the limit cut
// the list.
func listPages[T any](limit int, page func(n int, cursor string) ([]T, string, error)) (items []T, more bool, err error) {
	cursor := ""
	for {
		got, next, err := page(min(1000, limit-len(items)), cursor)
		if err != nil {
			return nil, false, err
		}
		items = append(items, got...)
		if next == "" {
			return items, false, nil
		}
		if len(items) >= limit {
			return items, true, nil
		}
		cursor = next
	}
}

func newListCmd(a *app) *cobra.Command {
	var (
		status, since string
		l             listFlags
	)
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List operation records (oldest update first)",
		Example: "  oncekey list --status unknown\n" +
			"  oncekey list --tenant acme --tool CreateTicket --since 2h --json",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			st, serr := parseStatus(status)
			sinceT, err := parseSince(since)
			if err := l.check(serr, err); err != nil {
				return err
			}
			return a.withStore(cmd.Context(), func(ctx context.Context, s recordStore) error {
				recs, more, err := listAll(ctx, s, oncekeystore.ListParams{Status: st, Tenant: l.tenant, Tool: l.tool, WorkflowID: l.workflow, UpdatedSince: sinceT}, l.limit)
				if err != nil {
					return a.storeError("list", err)
				}
				hint := ""
				if len(recs) == 0 && l.tool != "" {
					hint = a.toolHint(ctx, s, l.tenant, l.tool)
				}
				if l.asJSON {
					views := make([]recordView, 0, len(recs))
					for _, r := range recs {
						views = append(views, view(r, false))
					}
					if hint != "" {
						fmt.Fprintln(a.stderr, "oncekey: "+hint)
					}
					return writeJSON(a.stdout, views)
				}
				if len(recs) == 0 {
					if hint != "" {
						hint = "; " + hint
					}
					fmt.Fprintln(a.stdout, "no records match"+hint)
					return nil
				}
				tw := tabwriter.NewWriter(a.stdout, 0, 0, 2, ' ', 0)
				fmt.Fprintln(tw, "TENANT\tOPERATION KEY\tTOOL\tSTATUS\tEPOCH\tWORKFLOW\tSTEP\tUPDATED\tEFFECT REF\tRESOLVED BY")
				for _, r := range recs {
					fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\n", cell(r.Tenant), cell(r.OperationKey), cell(r.Tool),
						cell(string(r.Status)), r.Epoch, cell(r.WorkflowID), stepCell(r.StepID), age(r.UpdatedAt), cell(r.EffectReference), cell(r.ResolvedBy))
				}
				if err := tw.Flush(); err != nil {
					return err
				}
				l.printMore(a, len(recs), more)
				return nil
			})
		},
	}
	f := cmd.Flags()
	f.StringVar(&status, "status", "", "only this status: pending, applied, failed, unknown, released, expired")
	l.add(cmd, "records", "only this tool (activity type, matched exactly: CreateTicket, not createticket)")
	f.StringVar(&since, "since", "", "only records updated since: a duration back from now (2h) or an RFC 3339 time")
	return cmd
}

// toolHint says which stored tool names differ from tool only in case, for a list --tool that
// matched nothing: tool names (activity types) match exactly. It returns "" when none does or
// the store cannot say.
func (a *app) toolHint(ctx context.Context, s oncekeystore.StoreInspector, tenant, tool string) string {
	rows, err := s.Stats(ctx, tenant)
	if err != nil {
		return ""
	}
	stored := make([]string, 0, len(rows))
	for _, r := range rows {
		stored = append(stored, r.Tool)
	}
	return caseHint(tool, stored)
}

// caseHint says which of the stored tool names differ from tool only in case, for a --tool that
// matched nothing: "" when none does.
func caseHint(tool string, stored []string) string {
	var names []string
	seen := map[string]bool{}
	for _, t := range stored {
		if strings.EqualFold(t, tool) && t != tool && !seen[t] {
			seen[t] = true
			names = append(names, "--tool "+shell.Word(t))
		}
	}
	if len(names) == 0 {
		return ""
	}
	sort.Strings(names)
	return fmt.Sprintf("tool names match exactly, in case too: did you mean %s?", strings.Join(names, " or "))
}

func newShowCmd(a *app) *cobra.Command {
	var (
		tenant     string
		showResult bool
		asJSON     bool
		trust      string
	)
	cmd := &cobra.Command{
		Use:   "show KEY",
		Short: "Show one operation record and its approval, if it has one (the stored result only with --show-result)",
		Example: "  oncekey show ok1_3f2a… --tenant acme\n" +
			"  oncekey show ok1_3f2a… --tenant acme --show-result --json",
		Args: a.keyArgs("oncekey show KEY --tenant T", "list"),
		RunE: func(cmd *cobra.Command, args []string) error {
			key := strings.TrimSpace(args[0])
			if !strings.HasPrefix(key, oncekey.KeyPrefix) {
				return fail(exitUsage, "%q is not an operation key (they start with %q)", key, oncekey.KeyPrefix)
			}
			tenantGiven := tenant != ""
			if !tenantGiven {
				tenant = a.ns()
			}
			return a.withStore(cmd.Context(), func(ctx context.Context, s recordStore) error {
				op := fmt.Sprintf("show %s (tenant %s)", key, tenant)
				r, err := s.Get(ctx, &oncekeystore.GetParams{Tenant: tenant, OperationKey: key})
				if err != nil && !errors.Is(err, oncekeystore.ErrNotFound) {
					return a.storeError(op, err)
				}
				ap, aerr := getApproval(ctx, s, tenant, key)
				if aerr != nil {
					return a.storeError(op+": approval", aerr)
				}
				if r == nil && ap == nil {
					return a.recordNotFound(key, tenant, tenantGiven)
				}
				tl, err := a.trustList(trust)
				if err != nil {
					return err
				}
				sv := showView{}
				if ap != nil {
					sv.Approval = approvalViewOf(ap)
					sv.Approval.Signature = approvalVerdict(tl, ap)
					sv.Approval.Signers = approvalSigners(tl, ap)
					if ap.Status == oncekeystore.ApprovalPending {
						sv.Approval.Delivered = a.deliveredDecision(ctx, key, ap.Namespace)
					}
				}
				tw := tabwriter.NewWriter(a.stdout, 0, 0, 2, ' ', 0)
				// line prints a value the CLI formatted; field a stored string, escaped (see printable).
				line := func(k, val string) { fmt.Fprintf(tw, "%s\t%s\n", k, val) }
				field := func(k, val string) { line(k, cell(val)) }
				if r != nil {
					v := view(r, showResult)
					v.Signature = resolutionVerdict(tl, r, resolutionSignature(ctx, s, tenant, key))
					sv.recordView = &v
				}
				if asJSON {
					return writeJSON(a.stdout, sv)
				}
				// head prints the lines an operation's record and its approval share.
				head := func(key, tenant, namespace, tool string) {
					field("operation key", key)
					field("tenant", tenant)
					if namespace != "" {
						field("namespace", namespace)
					}
					field("tool", tool)
				}
				if r == nil {
					// An approval without a record: the call has not claimed its key.
					head(ap.OperationKey, ap.Tenant, ap.Namespace, ap.Tool)
					field("workflow", ap.WorkflowID)
					line("step", stepCell(ap.StepID))
					line("record", noRecordLine(sv.Approval))
					printApproval(tw, sv.Approval)
					return tw.Flush()
				}
				v := sv.recordView
				head(v.OperationKey, v.Tenant, v.Namespace, v.Tool)
				if v.Version != "" {
					field("version", v.Version)
				}
				field("effect class", v.Effect)
				field("status", string(v.Status))
				field("workflow", v.WorkflowID)
				line("step", stepCell(v.StepID))
				line("epoch", strconv.FormatInt(v.Epoch, 10))
				if v.LeaseUntil != nil {
					exp := ""
					if v.LeaseExpired {
						exp = " (expired)"
					}
					line("lease until", v.LeaseUntil.Format(time.RFC3339)+exp)
				}
				field("effect reference", v.EffectReference)
				field("resolved by", v.ResolvedBy)
				if v.Signature != nil {
					line("resolution signed by", v.Signature.String())
				}
				field("note", v.Note)
				if len(v.Failure) > 0 {
					line("failure", printableJSON(v.Failure))
				}
				field("fingerprint", v.Fingerprint)
				line("created", v.CreatedAt.Format(time.RFC3339))
				line("updated", v.UpdatedAt.Format(time.RFC3339))
				if v.KeptUntilSettled {
					// Pending and unknown records never expire: their windows start when they settle.
					line(string(v.Status)+" since", v.UpdatedAt.Format(time.RFC3339)+" ("+age(v.UpdatedAt)+")")
					line("retained", keptUntilSettled(*v))
				} else {
					if v.ExpiresAt != nil {
						line("retained until", v.ExpiresAt.Format(time.RFC3339))
					}
					if v.TombstoneUntil != nil {
						line("tombstone until", v.TombstoneUntil.Format(time.RFC3339))
					}
				}
				switch {
				case showResult && v.Result != nil:
					b, _ := json.Marshal(v.Result)
					line("result", printableJSON(b))
				case v.ResultBytes > 0:
					line("result", fmt.Sprintf("%d bytes stored as a Temporal payload (print with --show-result)", v.ResultBytes))
				}
				if sv.Approval != nil {
					printApproval(tw, sv.Approval)
				}
				return tw.Flush()
			})
		},
	}
	f := cmd.Flags()
	f.StringVar(&tenant, "tenant", "", "the record's tenant (default: the namespace, the interceptor's default tenant)")
	f.BoolVar(&showResult, "show-result", false, "print the stored result (it may hold personal data)")
	f.BoolVar(&asJSON, "json", false, "print JSON")
	f.StringVar(&trust, "trust", "", "verify the signed decisions against the trust list `FILE` (default: "+trustListEnv+")")
	return cmd
}

// statsView counts records.
type statsView struct {
	Total    int                                    `json:"total"`
	ByStatus map[oncekeystore.Status]int            `json:"by_status"`
	ByTool   map[string]map[oncekeystore.Status]int `json:"by_tool"`
	ByTenant map[string]int                         `json:"by_tenant"`
	// OldestUnknown is the update time of the oldest unknown record.
	OldestUnknown *time.Time `json:"oldest_unknown,omitempty"`
	// ApprovalsPending counts the calls waiting for approval; OldestApproval is when the oldest
	// of them was asked.
	ApprovalsPending int        `json:"approvals_pending"`
	OldestApproval   *time.Time `json:"oldest_approval,omitempty"`
	// ApprovalsPendingByTool counts them by tool. A call waiting for approval has no record yet,
	// so it is in no record count (not in by_status "pending", which counts claimed calls).
	ApprovalsPendingByTool map[string]int `json:"approvals_pending_by_tool,omitempty"`
}

func newStatsCmd(a *app) *cobra.Command {
	var (
		tenant string
		asJSON bool
	)
	cmd := &cobra.Command{
		Use:   "stats",
		Short: "Count records by status, tool and tenant",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return a.withStore(cmd.Context(), func(ctx context.Context, s recordStore) error {
				rows, err := s.Stats(ctx, tenant)
				if err != nil {
					return a.storeError("stats", err)
				}
				waiting, _, err := listApprovals(ctx, s, oncekeystore.ListApprovalsParams{Status: oncekeystore.ApprovalPending, Tenant: tenant}, math.MaxInt)
				if err != nil && !noApprovalsTable(err) { // a schema before approvals has none
					return a.storeError("stats: approvals", err)
				}
				sv := statsView{ByStatus: map[oncekeystore.Status]int{}, ByTool: map[string]map[oncekeystore.Status]int{}, ByTenant: map[string]int{}, ApprovalsPending: len(waiting)}
				if len(waiting) > 0 {
					sv.OldestApproval = timePtr(waiting[0].RequestedAt) // oldest first
					sv.ApprovalsPendingByTool = map[string]int{}
					for _, ap := range waiting {
						sv.ApprovalsPendingByTool[ap.Tool]++
					}
				}
				for _, r := range rows {
					n := int(r.Count)
					sv.Total += n
					sv.ByStatus[r.Status] += n
					if sv.ByTool[r.Tool] == nil {
						sv.ByTool[r.Tool] = map[oncekeystore.Status]int{}
					}
					sv.ByTool[r.Tool][r.Status] += n
					sv.ByTenant[r.Tenant] += n
					if r.Status == oncekeystore.StatusUnknown && (sv.OldestUnknown == nil || r.OldestUpdate.Before(*sv.OldestUnknown)) {
						sv.OldestUnknown = timePtr(r.OldestUpdate)
					}
				}
				if asJSON {
					return writeJSON(a.stdout, sv)
				}
				statuses := []oncekeystore.Status{oncekeystore.StatusPending, oncekeystore.StatusApplied, oncekeystore.StatusFailed, oncekeystore.StatusUnknown, oncekeystore.StatusReleased, oncekeystore.StatusExpired}
				tw := tabwriter.NewWriter(a.stdout, 0, 0, 2, ' ', 0)
				// A header of two rows: the record columns say they count records, and the calls
				// that wait for approval (no record yet) have a column of their own, so PENDING 0
				// beside calls that wait does not contradict.
				fmt.Fprint(tw, "\tRECORDS:"+strings.Repeat("\t", len(statuses))+"AWAITING APPROVAL\n")
				fmt.Fprint(tw, "TOOL")
				for _, st := range statuses {
					fmt.Fprintf(tw, "\t%s", strings.ToUpper(string(st)))
				}
				fmt.Fprintln(tw, "\tTOTAL\t(NO RECORD YET)")
				tools := make([]string, 0, len(sv.ByTool))
				for t := range sv.ByTool {
					tools = append(tools, t)
				}
				for t := range sv.ApprovalsPendingByTool {
					if sv.ByTool[t] == nil {
						tools = append(tools, t)
					}
				}
				sort.Strings(tools)
				for _, t := range tools {
					fmt.Fprint(tw, cell(t))
					n := 0
					for _, st := range statuses {
						fmt.Fprintf(tw, "\t%d", sv.ByTool[t][st])
						n += sv.ByTool[t][st]
					}
					fmt.Fprintf(tw, "\t%d\t%d\n", n, sv.ApprovalsPendingByTool[t])
				}
				fmt.Fprint(tw, "all tools")
				for _, st := range statuses {
					fmt.Fprintf(tw, "\t%d", sv.ByStatus[st])
				}
				fmt.Fprintf(tw, "\t%d\t%d\n", sv.Total, sv.ApprovalsPending)
				if err := tw.Flush(); err != nil {
					return err
				}
				fmt.Fprintf(a.stdout, "tenants: %d", len(sv.ByTenant))
				if sv.OldestUnknown != nil {
					list := a.db(shell.ListUnknown()).FlagIf("--tenant", tenant)
					fmt.Fprintf(a.stdout, "; oldest unknown updated %s (find them with `%s`; `oncekey resolve --help` says how to settle each)", age(*sv.OldestUnknown), list)
				}
				if sv.OldestApproval != nil {
					fmt.Fprintf(a.stdout, "; %d call(s) wait for approval, the oldest asked %s (`%s` lists them)", sv.ApprovalsPending, age(*sv.OldestApproval),
						a.db(shell.Approvals()).FlagIf("--tenant", tenant))
				}
				fmt.Fprintln(a.stdout)
				return nil
			})
		},
	}
	cmd.Flags().StringVar(&tenant, "tenant", "", "only this tenant")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

// implicitStep matches the step a record stores for a call without a step ID (Operation.Step):
// "<run ID>/<activity ID of its first attempt>".
var implicitStep = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/.`)

// stepCell prints a step ID the way list, show and the approval view agree on: a call given no
// step ID (oncekey.WithStepID) is marked "(no step ID)", after the "<run ID>/<activity ID>" its
// record stores (where it was first claimed); its approval stores no step, so it prints the
// marker alone.
func stepCell(step string) string {
	switch {
	case step == "":
		return noStepID
	case implicitStep.MatchString(step):
		return printable(step) + " " + noStepID
	}
	return printable(step)
}

// noStepID marks a call without a step ID, as the approval workflow's texts do.
const noStepID = "(no step ID)"
