package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/oncekey/oncekey/internal/shell"
	"github.com/oncekey/oncekey/oncekeystore"
)

// printUnsettled says how many unknown or pending records past their retention purge left (or
// would leave), and how old the oldest is.
func (a *app) printUnsettled(n int64, oldest time.Time, verb string) {
	if n == 0 {
		return
	}
	fmt.Fprintf(a.stdout, "%s %d unknown or pending record(s) past their retention, the oldest created %s: an unsettled record is kept until it is settled; find them with `%s` and resolve them\n",
		verb, n, age(oldest), a.db(shell.ListUnknown()))
}

func newPurgeCmd(a *app) *cobra.Command {
	var (
		batch  int
		dryRun bool
	)
	cmd := &cobra.Command{
		Use:   "purge",
		Short: "Turn records past retention into tombstones and delete tombstones past their window",
		Long: "purge works in batches so claims are never blocked for long. Run it on a schedule (hourly is plenty).\n" +
			"A tombstone keeps only digests and refuses late duplicates until its window ends; then the key is free.\n" +
			"Unknown and pending records are never purged, however old (their retention counts from when they settle); purge says how\n" +
			"many it left and how old the oldest is. Decided approvals past their retention are deleted too; pending ones never.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if batch < 1 {
				return fail(exitUsage, "--batch-size must be at least 1")
			}
			return a.withStore(cmd.Context(), func(ctx context.Context, s recordStore) error {
				if dryRun {
					pv, err := s.PurgePreview(ctx)
					if err != nil {
						return a.storeError("purge --dry-run", err)
					}
					now, tomb, del := pv.Now, pv.Tombstones, pv.Deletes
					fmt.Fprintf(a.stdout, "dry run (database time %s): would tombstone %d record(s) and delete %d tombstone(s)%s%s\n", now.UTC().Format(time.RFC3339), tomb, del,
						approvalsPurged(pv.ApprovalDeletes, "would delete"), grantsPurged(pv.GrantDeletes, "would delete"))
					a.printUnsettled(pv.Unsettled, pv.OldestUnsettled, "would leave")
					return nil
				}
				tty := isTerminal(a.stdout)
				res, err := s.Purge(ctx, &oncekeystore.PurgeParams{BatchSize: batch, Progress: func(p oncekeystore.PurgeResult) {
					if tty {
						fmt.Fprintf(a.stdout, "\r%s batch %d: %d tombstoned, %d deleted", spinner(p.Batches), p.Batches, p.Tombstoned, p.Deleted)
					}
				}})
				if tty {
					fmt.Fprint(a.stdout, "\r\033[K")
				}
				if err != nil {
					return a.storeError("purge", err)
				}
				fmt.Fprintf(a.stdout, "purged in %d batch(es): %d record(s) tombstoned, %d tombstone(s) deleted%s%s\n", res.Batches, res.Tombstoned, res.Deleted,
					approvalsPurged(res.ApprovalsDeleted, "deleted"), grantsPurged(res.GrantsDeleted, "deleted"))
				a.printUnsettled(res.Unsettled, res.OldestUnsettled, "left")
				return nil
			})
		},
	}
	cmd.Flags().IntVar(&batch, "batch-size", oncekeystore.DefaultPurgeBatchSize, "rows per statement")
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "count what would be purged, change nothing")
	return cmd
}

// approvalsPurged is purge's words for the decided approvals past their retention it deleted
// (or would delete), "" when there were none.
func approvalsPurged(n int64, verb string) string {
	if n == 0 {
		return ""
	}
	return fmt.Sprintf("; %s %d decided approval(s) past their retention", verb, n)
}

// grantsPurged is purge's words for the ended standing grants past their retention it deleted
// (or would delete), "" when there were none.
func grantsPurged(n int64, verb string) string {
	if n == 0 {
		return ""
	}
	return fmt.Sprintf("; %s %d ended standing grant(s) past their retention", verb, n)
}

func spinner(i int) string { return string(`|/-\`[i%4]) }

// isTerminal reports whether w is a character device (a terminal), for progress output.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}
