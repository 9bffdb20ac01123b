package main

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/oncekey/oncekey"
	"github.com/oncekey/oncekey/internal/shell"
)

// keyLen is the length of a whole printable operation key: the prefix and 64 hex digits.
const keyLen = len(oncekey.KeyPrefix) + 64

// keyShape says what is wrong with key as an operation key ("" when it has the shape of one), for
// a not-found message: a key cut short is the common mistake.
func keyShape(key string) string {
	body := strings.TrimPrefix(key, oncekey.KeyPrefix)
	switch {
	case len(key) < keyLen:
		return fmt.Sprintf("%s is shorter than an operation key: keys are whole, %s and 64 hex digits, as `oncekey list` prints them", key, oncekey.KeyPrefix)
	case len(key) > keyLen || strings.Trim(body, "0123456789abcdef") != "":
		return fmt.Sprintf("%s is not an operation key: keys are %s and 64 lower-case hex digits, as `oncekey list` prints them", key, oncekey.KeyPrefix)
	}
	return ""
}

// db adds to c, a suggested command that reads Postgres, the flags it needs to find the same
// table as this one: --schema when this command was given one. It returns c.
func (a *app) db(c *shell.Command) *shell.Command {
	return c.FlagIf("--schema", a.schema)
}

// showCommand returns the `oncekey show` command for key under tenant, with the flags it needs to
// read the table this command was pointed at.
func (a *app) showCommand(key, tenant string) string {
	return a.db(shell.Show(key).Flag("--tenant", tenant)).String()
}

// recordNotFound is the error of a command that looked up key under tenant and found no record:
// it names what was searched and what to run next. tenantGiven is false when the tenant was
// defaulted to the namespace.
func (a *app) recordNotFound(key, tenant string, tenantGiven bool) error {
	list := a.db(shell.List()).String()
	return a.notFound("record", key, tenant, tenantGiven, list, fmt.Sprintf(
		"`%s` shows each record's tenant (`%s` this tenant's records): run again with --tenant set to the record's tenant",
		list, a.db(shell.List().Flag("--tenant", tenant))))
}

// notFound is the error of a command that looked up key under tenant and found no what ("record",
// "approval"): it names what was searched and what to run next: for a key of the wrong shape,
// copying it from list (a listing command); else next, after saying when the tenant was
// defaulted to the namespace (tenantGiven false).
func (a *app) notFound(what, key, tenant string, tenantGiven bool, list, next string) error {
	msg := fmt.Sprintf("no %s for %s under tenant %s in %s", what, key, tenant, a.where)
	if shape := keyShape(key); shape != "" {
		return fail(exitNotFound, "%s: %s; copy the whole key from `%s`", msg, shape, list)
	}
	defaulted := ""
	if !tenantGiven {
		defaulted = " (the tenant defaults to the namespace)"
	}
	return fail(exitNotFound, "%s%s; %s", msg, defaulted, next)
}

// withAddress adds to c, a suggested command that talks to Temporal, the --address it needs to reach
// the server this one used, when that is not the default (from --address or TEMPORAL_ADDRESS). It
// returns c.
func (a *app) withAddress(c *shell.Command) *shell.Command {
	if addr := a.temporalAddress(); addr != defaultAddress {
		c.Flag("--address", addr)
	}
	return c
}

// keyArgs is the Args of a command that takes one operation key: with none it says what to give,
// usage (the command with KEY), and the command that lists the keys: `oncekey` with the words
// keys.
func (a *app) keyArgs(usage string, keys ...string) cobra.PositionalArgs {
	return func(_ *cobra.Command, args []string) error {
		switch {
		case len(args) == 0:
			return fail(exitUsage, "give the operation key: `%s` (keys: `%s`)", usage, a.db(shell.Cmd("oncekey", keys...)))
		case len(args) > 1:
			return fail(exitUsage, "give one operation key, not %d arguments: `%s` (quote a value with spaces: --reason 'two words')", len(args), usage)
		}
		return nil
	}
}
