package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/oncekey/oncekey/oncekeystore"
)

// signIn signs the browser out of any session and in again with token.
func signIn(t *testing.T, ctx context.Context, base, token string) {
	t.Helper()
	run(t, ctx, "sign in", chromedp.Navigate(base+"/login"), chromedp.WaitVisible(chromedp.CSS("form.login")),
		chromedp.SetValue(chromedp.CSS("#token"), token), chromedp.Click(chromedp.CSS("form.login button")),
		chromedp.WaitVisible(chromedp.CSS("#queue-approvals")))
}

// Signed decisions through the inbox, in a real browser, against a worker with a trust list:
// the inbox holds ada's and bob's keys (--sign-keys) and signs each decision with the key of who
// is signed in. bob's key is trusted for another tenant only: his approval is refused by the
// workers and nothing runs; carol has no key in the inbox: she is told how to get one and
// nothing is sent; ada's approval runs the call once, and the page shows her verified signature.
func TestServeSignedApprovalInTheBrowser(t *testing.T) {
	needsServices(t)
	ctx := browser(t)
	c, url, env := workerEnv(t, "")
	dir := t.TempDir()
	_, ada := genKey(t, dir, "ada")
	_, bob := genKey(t, dir, "bob")
	ada["tenants"], bob["tenants"] = []string{"acme"}, []string{"globex"}
	trust := filepath.Join(dir, "trust.json")
	doc, err := json.Marshal(map[string]any{"keys": []map[string]any{ada, bob}})
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(trust, doc, 0o600))
	signKeys := filepath.Join(dir, "sign-keys")
	require.NoError(t, os.WriteFile(signKeys, []byte("# who signs in, and their key\nada ada.pem\nbob "+filepath.Join(dir, "bob.pem")+"\n"), 0o600))
	tokens := map[string]string{"ada": "ada-0123456789abcdef0123456789abcdef", "bob": "bob-0123456789abcdef0123456789abcdef",
		"carol": "carol-0123456789abcdef0123456789abcdef"}
	env[tokensEnv] = "ada acme " + tokens["ada"] + "\nbob acme " + tokens["bob"] + "\ncarol acme " + tokens["carol"] + "\n"

	b := &bookings{}
	wfRun := runBooking(t, c, signedWorker(t, c, url, b, "acme", trust, false))
	ap := waitingApproval(t, c, env)
	base := startServe(t, env, "--sign-keys", signKeys, "--trust", trust)
	page := base + "/approval?tenant=acme&key=" + ap.OperationKey
	approve := func(who, reason string) {
		t.Helper()
		signIn(t, ctx, base, tokens[who])
		run(t, ctx, who+" approves", chromedp.Navigate(page), chromedp.WaitVisible(chromedp.CSS("#decide-form")),
			chromedp.Click(chromedp.CSS("#decision-approve")), chromedp.SetValue(chromedp.CSS("#reason"), reason),
			chromedp.Click(chromedp.CSS("#decide-submit")), chromedp.WaitVisible(chromedp.CSS("#answer")))
	}

	approve("bob", "looks fine")
	got := text(t, ctx, "#answer")
	require.Contains(t, got, "decision refused (untrusted)", "the workers refuse a key not trusted for acme")
	require.Contains(t, got, `not trusted for tenant "acme"`)
	effects, runs := b.counts()
	require.Zero(t, effects+runs, "bob's approval runs nothing")
	views := approvalsJSON(t, env)
	require.Len(t, views, 1)
	require.Equal(t, oncekeystore.ApprovalPending, views[0].Status, "nothing was recorded")

	approve("carol", "looks fine")
	got = text(t, ctx, "#answer.refused")
	require.Contains(t, got, "you have no signing key here")
	require.Contains(t, got, "holds none for carol. Nothing was sent.")
	require.Contains(t, got, "oncekey keys gen --out carol.pem --name carol")
	effects, runs = b.counts()
	require.Zero(t, effects+runs, "carol's approval runs nothing")

	approve("ada", "checked the booking")
	got = text(t, ctx, "#answer.accepted")
	require.Contains(t, got, "Accepted: approved")
	require.Contains(t, got, "answered: approved, by ada (oncekey-serve)")
	require.Equal(t, "BK-R1", booked(t, wfRun).ID)
	effects, runs = b.counts()
	require.Equal(t, 1, effects, "the downstream landed one booking")
	require.Equal(t, 1, runs)

	run(t, ctx, "reload the approval", chromedp.Navigate(page), chromedp.WaitVisible(chromedp.CSS("main")))
	require.Contains(t, text(t, ctx, "main"), ada["id"].(string)+" (ada), verified", "the page shows the verified signer")
	r := cli(t, env, "audit", ap.OperationKey, "--tenant", "acme", "--trust", trust)
	require.Equal(t, 0, r.code, r.stdout+r.stderr)
	require.Contains(t, r.stdout, "approved by ada (oncekey-serve): signed by "+ada["id"].(string)+" (ada), verified")
}

// A sign-keys file that does not load stops serve before it listens, naming the line; so does a
// trust list that does not read.
func TestServeRefusesABadSignKeysFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "sign-keys")
	require.NoError(t, os.WriteFile(path, []byte("ines missing.pem\n"), 0o600))
	r := cli(t, nil, "serve", "--sign-keys", path)
	require.Equal(t, exitUsage, r.code, r.stderr)
	require.Contains(t, r.stderr, "--sign-keys: "+path+" line 1: the key of ines")
	r = cli(t, map[string]string{signKeysEnv: path}, "serve")
	require.Equal(t, exitUsage, r.code, r.stderr)
	require.Contains(t, r.stderr, path+" line 1")
	r = cli(t, nil, "serve", "--trust", filepath.Join(dir, "no-such-trust.json"))
	require.Equal(t, exitUsage, r.code, r.stderr)
	require.Contains(t, r.stderr, "--trust: ")
}
