package main

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"
	"go.temporal.io/sdk/client"

	"github.com/oncekey/oncekey/reconcile"
	"github.com/oncekey/oncekey/worker"
)

func newSetupCmd(a *app) *cobra.Command {
	setup := &cobra.Command{
		Use:   "setup",
		Short: "Prepare a Temporal namespace for oncekey's options",
		Args:  cobra.NoArgs,
	}
	setup.AddCommand(&cobra.Command{
		Use:   "search-attributes",
		Short: "Register the search attributes of oncekey's reconciliation and approval workflows on the namespace (idempotent)",
		Long: "search-attributes registers OncekeyStatus, OncekeyTool, OncekeyTenant (Keyword) and OncekeyWaitingSince (Datetime)\n" +
			"on the namespace (--namespace, else TEMPORAL_NAMESPACE, else \"default\"), those it lacks; run it once per namespace before\n" +
			"turning on worker.Options.SearchAttributes, which the workers refuse to start without. Their values (tools,\n" +
			"tenants) are stored unencrypted by Temporal.",
		Example: "  oncekey setup search-attributes --namespace prod",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return a.withTemporal(cmd.Context(), func(ctx context.Context, c client.Client) error {
				rctx, cancel := context.WithTimeout(ctx, a.timeout)
				defer cancel()
				added, err := worker.RegisterSearchAttributes(rctx, c, a.ns())
				var sae *worker.SearchAttributesError
				switch {
				case errors.As(err, &sae):
					return fail(exitFailed, "namespace %s has %s with another type; Temporal cannot change a search attribute's type: remove it (`temporal operator search-attribute remove`) and run this again", a.ns(), strings.Join(sae.WrongType, ", "))
				case err != nil:
					return fail(exitFailed, "%v", oneLine(err))
				case len(added) == 0:
					fmt.Fprintf(a.stdout, "namespace %s has oncekey's search attributes already; nothing registered\n", a.ns())
				default:
					fmt.Fprintf(a.stdout, "registered %s in namespace %s\n", strings.Join(added, ", "), a.ns())
				}
				fmt.Fprintf(a.stdout, "turn on worker.Options.SearchAttributes in the workers; in the Temporal UI this filter lists every reconciliation waiting for a person:\n  %s\nand this one every call waiting for a person's approval:\n  %s\n", reconcile.WaitingQuery, reconcile.ApprovalWaitingQuery)
				return nil
			})
		},
	})
	return setup
}
