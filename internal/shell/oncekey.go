package shell

// The builders below start the `oncekey` commands that messages name in more than one place, so
// each command's words are written once; the caller appends what its message needs (--tenant,
// --schema, --namespace, an outcome) with Command's methods.

// program is the operator CLI's name: the first word of every `oncekey` command.
const program = "oncekey"

// Resolve starts `oncekey resolve KEY`, which settles the unknown outcome of the operation key.
func Resolve(key string) *Command { return Cmd(program, "resolve").Arg(key) }

// Show starts `oncekey show KEY`, which prints the record of the operation key.
func Show(key string) *Command { return Cmd(program, "show").Arg(key) }

// Decide starts `oncekey VERB KEY --tenant TENANT`, the decision on the approval of the operation
// key of tenant; verb is "approve" or "deny" (reconcile.DecisionKind's values).
func Decide(verb, key, tenant string) *Command {
	return Cmd(program, verb).Arg(key).Flag("--tenant", tenant)
}

// List starts `oncekey list`, which lists records.
func List() *Command { return Cmd(program, "list") }

// ListUnknown starts `oncekey list --status unknown`, which lists the operations whose outcome
// waits for a decision.
func ListUnknown() *Command { return List().Flag("--status", "unknown") }

// Approvals starts `oncekey approvals`, which lists approvals.
func Approvals() *Command { return Cmd(program, "approvals") }

// Migrate starts `oncekey migrate`, which creates or upgrades the store's table.
func Migrate() *Command { return Cmd(program, "migrate") }
