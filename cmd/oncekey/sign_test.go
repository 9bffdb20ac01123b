package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	sdkworker "go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/oncekey/oncekey"
	"github.com/oncekey/oncekey/decisionsig"
	"github.com/oncekey/oncekey/worker"
)

// genKey runs `oncekey keys gen` into dir and returns the key file and its trust list entry.
func genKey(t *testing.T, dir, name string) (string, map[string]any) {
	t.Helper()
	path := filepath.Join(dir, name+".pem")
	r := cli(t, nil, "keys", "gen", "--out", path, "--name", name)
	require.Equal(t, 0, r.code, r.stderr)
	_, doc, ok := strings.Cut(r.stdout, "(narrow tenants, tools and kinds):\n")
	require.True(t, ok, r.stdout)
	var entry map[string]any
	require.NoError(t, json.Unmarshal([]byte(doc), &entry))
	fi, err := os.Stat(path)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), fi.Mode().Perm(), "the private key is the owner's only")
	r = cli(t, nil, "keys", "gen", "--out", path)
	require.Equal(t, exitUsage, r.code, "a key file is never overwritten")
	return path, entry
}

// writeTrustFile writes a trust list file of entries, each narrowed to tenant, renaming it over
// path.
func writeTrustFile(t *testing.T, path, tenant string, entries ...map[string]any) {
	t.Helper()
	keys := make([]map[string]any, 0, len(entries))
	for _, e := range entries {
		c := map[string]any{}
		for k, v := range e {
			c[k] = v
		}
		c["tenants"] = []string{tenant}
		keys = append(keys, c)
	}
	b, err := json.Marshal(map[string]any{"keys": keys})
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(path+".new", b, 0o600))
	require.NoError(t, os.Rename(path+".new", path))
}

// signedWorker runs a worker whose Book needs approval (or, with noApproval, is Effectful only)
// and whose decisions must be signed by a key of the trust list at trust.
func signedWorker(t *testing.T, c client.Client, url string, b *bookings, tenant, trust string, noApproval bool) string {
	t.Helper()
	return signedWorkerSigners(t, c, url, b, tenant, trust, noApproval, 0)
}

// signedWorkerSigners is signedWorker whose Book's approval asks for signers different signers
// (ApprovalPolicy.Signers).
func signedWorkerSigners(t *testing.T, c client.Client, url string, b *bookings, tenant, trust string, noApproval bool, signers int) string {
	t.Helper()
	s, _ := migratedAt(t, url)
	tl, err := decisionsig.LoadTrustList(trust)
	require.NoError(t, err)
	p := oncekey.Policy{Effect: oncekey.Effectful, Approval: &oncekey.ApprovalPolicy{Summary: func(op oncekey.Operation) string { return "book " + string(op.ArgsJSON) }}}
	p.Approval.Signers = signers
	if noApproval {
		p.Approval = nil
	}
	reg := oncekey.NewRegistry()
	require.NoError(t, reg.Set(b.Book, p))
	plugin, err := worker.NewPlugin(worker.Options{Store: s, Registry: reg, Tenant: func(worker.TenantInfo) string { return tenant },
		DataConverter: converter.GetDefaultDataConverter(), TrustList: tl})
	require.NoError(t, err)
	tq := "cli-signed-" + t.Name()
	w := sdkworker.New(c, tq, sdkworker.Options{Plugins: []sdkworker.Plugin{plugin}})
	w.RegisterWorkflowWithOptions(bookWorkflow, workflow.RegisterOptions{Name: "Booking"})
	w.RegisterActivityWithOptions(b.Book, activity.RegisterOptions{Name: "Book"})
	require.NoError(t, w.Start())
	t.Cleanup(w.Stop)
	return tq
}

// Against a worker with a trust list: an unsigned approve is refused and runs nothing; one
// signed with a key from `oncekey keys gen` runs the call once; show and audit name the verified
// signer from the record alone, and audit fails once the key is revoked.
func TestSignedApproveWithKeysGen(t *testing.T) {
	needsServices(t)
	c, url, env := workerEnv(t, "ada")
	dir := t.TempDir()
	key, entry := genKey(t, dir, "ada")
	trust := filepath.Join(dir, "trust.json")
	writeTrustFile(t, trust, "acme", entry)
	b := &bookings{}
	run := runBooking(t, c, signedWorker(t, c, url, b, "acme", trust, false))
	ap := waitingApproval(t, c, env)

	r := cli(t, env, "approve", ap.OperationKey, "--tenant", "acme")
	requireOneLine(t, r, exitFailed, "decision refused (unsigned)")
	require.Contains(t, r.stderr, "Sign it with a key the workers' trust list holds for tenant acme, tool Book: `oncekey approve "+
		ap.OperationKey+" --tenant acme --sign-key FILE`", "the refusal (oncekey.SignatureRefused) says what to do")
	require.NotContains(t, r.stderr, "shows each approval's tenant and episode", "not the hint of a refusal for what the decision says")
	effects, runs := b.counts()
	require.Zero(t, effects+runs, "an unsigned approval runs nothing")

	r = cli(t, env, "approve", ap.OperationKey, "--tenant", "acme", "--sign-key", key, "--reason", "booked by phone")
	require.Equal(t, 0, r.code, r.stderr)
	require.Equal(t, "BK-R1", booked(t, run).ID)
	effects, runs = b.counts()
	require.Equal(t, 1, effects)
	require.Equal(t, 1, runs)

	id := entry["id"].(string)
	r = cli(t, env, "show", ap.OperationKey, "--tenant", "acme", "--trust", trust)
	require.Equal(t, 0, r.code, r.stderr)
	require.Regexp(t, `(?m)^approval signed by\s+`+id+` \(ada\), verified$`, r.stdout)
	env[trustListEnv] = trust
	r = cli(t, env, "audit", ap.OperationKey, "--tenant", "acme")
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, "approval episode 1, approved by ada: signed by "+id+" (ada), verified")

	entry["revoked"] = true
	writeTrustFile(t, trust, "acme", entry)
	r = cli(t, env, "audit", ap.OperationKey, "--tenant", "acme")
	require.Equal(t, exitFailed, r.code, r.stdout)
	require.Contains(t, r.stdout, "the key is revoked")
}

// Four eyes: ada's signed approval is recorded and the CLI says the call waits for another
// signer, with nothing run; bob's runs the call once.
func TestSignedApproveFourEyes(t *testing.T) {
	needsServices(t)
	c, url, env := workerEnv(t, "ada")
	dir := t.TempDir()
	adaKey, adaEntry := genKey(t, dir, "ada")
	bobKey, bobEntry := genKey(t, dir, "bob")
	trust := filepath.Join(dir, "trust.json")
	writeTrustFile(t, trust, "acme", adaEntry, bobEntry)
	b := &bookings{}
	run := runBooking(t, c, signedWorkerSigners(t, c, url, b, "acme", trust, false, 2))
	ap := waitingApproval(t, c, env)

	r := cli(t, env, "approve", ap.OperationKey, "--tenant", "acme", "--sign-key", adaKey, "--by", "ada", "--reason", "checked")
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, "approval of "+ap.OperationKey+" recorded, episode 1")
	require.Contains(t, r.stdout, "the workflow answered: recorded; waiting for another signer (1 of 2)")
	effects, runs := b.counts()
	require.Zero(t, effects+runs, "one signer's approval runs nothing")

	r = cli(t, env, "approve", ap.OperationKey, "--tenant", "acme", "--sign-key", bobKey, "--by", "bob", "--reason", "agreed")
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, "approved "+ap.OperationKey)
	require.Equal(t, "BK-R1", booked(t, run).ID)
	effects, runs = b.counts()
	require.Equal(t, 1, effects)
	require.Equal(t, 1, runs)
}

// resolve signs with ONCEKEY_SIGN_KEY: unsigned it is refused and the record stays unknown;
// signed it settles the record, and show names the verified signer.
func TestSignedResolveWithEnvKey(t *testing.T) {
	needsServices(t)
	c, url, env := workerEnv(t, "ines")
	dir := t.TempDir()
	key, entry := genKey(t, dir, "ines")
	trust := filepath.Join(dir, "trust.json")
	writeTrustFile(t, trust, "acme", entry)
	b := &bookings{loseFirst: true}
	run := runBooking(t, c, signedWorker(t, c, url, b, "acme", trust, true))
	k := waitingKey(t, c, env)

	r := cli(t, env, "resolve", k, "--epoch", "1", "--tenant", "acme", "--applied", "--ref", "BK-R1", "--result", `{"id":"BK-R1"}`)
	require.Equal(t, exitFailed, r.code, r.stdout)
	require.Contains(t, r.stderr, "decision refused (unsigned)")
	require.Contains(t, r.stderr, "Sign it with a key the workers' trust list holds for tenant acme, tool Book: `oncekey resolve "+
		k+" --tenant acme --epoch 1 --sign-key FILE`")

	env[signKeyEnv] = key
	r = cli(t, env, "resolve", k, "--epoch", "1", "--tenant", "acme", "--applied", "--ref", "BK-R1", "--result", `{"id":"BK-R1"}`, "--note", "found it")
	require.Equal(t, 0, r.code, r.stderr)
	require.Equal(t, "BK-R1", booked(t, run).ID)
	effects, _ := b.counts()
	require.Equal(t, 1, effects)

	env[trustListEnv] = trust
	r = cli(t, env, "show", k, "--tenant", "acme")
	require.Equal(t, 0, r.code, r.stderr)
	require.Regexp(t, `(?m)^resolution signed by\s+`+entry["id"].(string)+` \(ines\), verified$`, r.stdout)
	r = cli(t, env, "audit", k, "--tenant", "acme")
	require.Equal(t, 0, r.code, r.stdout+r.stderr)
}

// A signed grant and its signed revocation: `oncekey grants --trust` names the verified signer
// of both; an unsigned revocation is listed as unsigned; a revocation signed by a key not
// trusted for grant_revoke is listed with why it does not verify.
func TestSignedGrantRevocation(t *testing.T) {
	url, _, _ := migrated(t)
	env := map[string]string{"DATABASE_URL": url, "USER": "ada"}
	dir := t.TempDir()
	key, entry := genKey(t, dir, "ada")
	require.Contains(t, entry["kinds"], string(decisionsig.GrantRevoke), "keys gen's entry may sign revocations")
	trust := filepath.Join(dir, "trust.json")
	writeTrustFile(t, trust, "acme", entry)
	grantID := regexp.MustCompile(`g1_[0-9a-f]{32}`)
	add := func() string {
		t.Helper()
		r := cli(t, env, "grants", "add", "IssueRefund", "--tenant", "acme", "--for", "8h", "--sign-key", key)
		require.Equal(t, 0, r.code, r.stderr)
		return grantID.FindString(r.stdout)
	}
	signed, unsigned := add(), add()
	r := cli(t, env, "grants", "revoke", signed, "--sign-key", key)
	require.Equal(t, 0, r.code, r.stderr)
	r = cli(t, env, "grants", "revoke", unsigned)
	require.Equal(t, 0, r.code, r.stderr)

	id := entry["id"].(string)
	r = cli(t, env, "grants", "--status", "all", "--trust", trust)
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, signed+": made signed by "+id+" (ada), verified; revoked signed by "+id+" (ada), verified")
	require.Contains(t, r.stdout, unsigned+": made signed by "+id+" (ada), verified; revoked unsigned")

	entry["kinds"] = []string{string(decisionsig.GrantCreate)}
	writeTrustFile(t, trust, "acme", entry)
	env[trustListEnv] = trust
	r = cli(t, env, "grants", "--status", "all", "--json")
	require.Equal(t, 0, r.code, r.stderr)
	var views []grantView
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &views))
	require.Len(t, views, 2)
	for _, v := range views {
		require.True(t, v.Signature.Verified, v.ID)
		if v.ID == signed {
			require.False(t, v.RevocationSignature.Verified)
			require.Contains(t, v.RevocationSignature.Problem, "the key is not trusted for grant_revoke decisions")
		} else {
			require.Nil(t, v.RevocationSignature)
		}
	}
}
