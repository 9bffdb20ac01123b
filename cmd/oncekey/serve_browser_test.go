package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/oncekey/oncekey/internal/testing/testenv"
	"github.com/oncekey/oncekey/oncekeystore"
)

// browser starts Debian's chromium headless with a fresh profile and returns a chromedp context
// on it, closed when the test ends. A missing chromium skips the test, or fails it with CI set
// (.ci/run installs it).
func browser(t *testing.T) context.Context {
	t.Helper()
	path := os.Getenv("ONCEKEY_CHROMIUM")
	if path == "" {
		for _, name := range []string{"chromium", "chromium-browser"} {
			if p, err := exec.LookPath(name); err == nil {
				path = p
				break
			}
		}
	}
	if path == "" {
		testenv.Missing(t, "chromium, so the inbox's browser tests (cmd/oncekey) did not run: apt-get install -y chromium, or set ONCEKEY_CHROMIUM")
	}
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(path),
		chromedp.Flag("headless", true),
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-quic", true),
		chromedp.NoFirstRun,
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1280, 800),
	}
	actx, acancel := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(func() { cancel(); acancel() })
	// Start the browser now, so a chromium that cannot start fails here and says so.
	require.NoError(t, chromedp.Do(ctx), "start %s", path)
	return ctx
}

// artifactDir is where the browser tests leave screenshots: ONCEKEY_TEST_ARTIFACTS, else
// oncekey-test-artifacts in the system's temporary directory. Nothing there is committed.
func artifactDir(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("ONCEKEY_TEST_ARTIFACTS")
	if dir == "" {
		dir = filepath.Join(os.TempDir(), "oncekey-test-artifacts")
	}
	require.NoError(t, os.MkdirAll(dir, 0o755))
	return dir
}

// shooter returns shot(name): a full screenshot of the page, written to name in artifactDir
// and, when name is docImage and ONCEKEY_UPDATE_SCREENSHOT is set, to docs/img/docImage too.
func shooter(t *testing.T, ctx context.Context, docImage string) func(name string) {
	t.Helper()
	shots := artifactDir(t)
	return func(name string) {
		t.Helper()
		png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
		require.NoError(t, err, "screenshot "+name)
		p := filepath.Join(shots, name)
		require.NoError(t, os.WriteFile(p, png, 0o644))
		t.Logf("screenshot: %s", p)
		if name == docImage && os.Getenv("ONCEKEY_UPDATE_SCREENSHOT") != "" {
			require.NoError(t, os.WriteFile(filepath.Join("..", "..", "docs", "img", docImage), png, 0o644))
		}
	}
}

// run runs chromedp actions with a bound, so a page that never shows what the test waits for
// fails the test instead of hanging it.
func run(t *testing.T, ctx context.Context, what string, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 45*time.Second)
	defer cancel()
	require.NoError(t, chromedp.Do(ctx, steps...), what)
}

// text returns the text of the first element matching the CSS selector sel, waiting for it.
func text(t *testing.T, ctx context.Context, sel string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 45*time.Second)
	defer cancel()
	s, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(sel)))
	require.NoError(t, err, "text of %s", sel)
	return s
}

// The inbox in a real browser: a fresh unknown appears in the list; a result that does not
// decode into the tool's result type is refused with the workflow's reason on the page; the
// right one releases the blocked workflow, which gets the result, with the downstream effect
// landed once, and the record names who decided.
func TestServeInTheBrowser(t *testing.T) {
	needsServices(t)
	ctx := browser(t)
	c := testenv.Temporal(t)
	env := servicesEnv(t)
	url := env["DATABASE_URL"]
	base := startServe(t, env)
	shot := shooter(t, ctx, "inbox.png")

	run(t, ctx, "open the empty inbox", chromedp.Navigate(base+"/"))
	require.Contains(t, text(t, ctx, "#queue-unknown"), "Nothing waits")

	b := &bookings{loseFirst: true}
	wfRun := startBooking(t, c, url, b, "acme")
	key := waitingKey(t, c, env)
	// Two more records waiting in another tenant, as an inbox usually has (written through the
	// store's own protocol; no workflow waits for them).
	s, _ := migratedAt(t, url)
	charge := seed(t, s, "globex", "ChargeCard", "order-7731", "charge", oncekeystore.StatusUnknown, nil)
	seed(t, s, "globex", "SendInvoice", "order-7731", "invoice", oncekeystore.StatusUnknown, nil)

	row := `tr.record[data-key="` + key + `"]`
	run(t, ctx, "the fresh unknown appears", chromedp.Reload(), chromedp.WaitVisible(chromedp.CSS(row)))
	got := text(t, ctx, row)
	require.Contains(t, got, "Book")
	require.Contains(t, got, "booking-"+t.Name())
	require.Contains(t, got, "connection reset by peer", "the failure text is shown")
	shot("inbox.png")

	run(t, ctx, "open the record", chromedp.Click(chromedp.CSS(row+` td.key a`)), chromedp.WaitVisible(chromedp.CSS("#resolve-form")))
	got = text(t, ctx, "main")
	require.Contains(t, got, key)
	require.Contains(t, got, "waiting_for_resolution")

	// A result of the wrong shape for Booking (a string, not an object): the workflow refuses it.
	run(t, ctx, "send a result that does not decode",
		chromedp.Click(chromedp.CSS("#outcome-applied")),
		chromedp.SetValue(chromedp.CSS("#effect_reference"), "BK-R1"),
		chromedp.SetValue(chromedp.CSS("#result"), `"BK-R1"`),
		chromedp.SetValue(chromedp.CSS("#note"), "found in the booking system"),
		chromedp.Click(chromedp.CSS("#resolve-submit")),
		chromedp.WaitVisible(chromedp.CSS("#answer.refused")))
	got = text(t, ctx, "#answer")
	require.Contains(t, got, "Refused by the reconciliation workflow")
	require.Contains(t, got, "does not decode into Book's result type main.Booking")
	shot("record-refused.png")
	v := showJSON(t, env, key, "acme")
	require.Equal(t, oncekeystore.StatusUnknown, v.Status, "the refused decision changed nothing")

	// The form kept what was typed; correct the result and send it again.
	run(t, ctx, "send the right result",
		chromedp.WaitVisible(chromedp.CSS("#resolve-form")),
		chromedp.SetValue(chromedp.CSS("#result"), `{"id": "BK-R1"}`),
		chromedp.Click(chromedp.CSS("#resolve-submit")),
		chromedp.WaitVisible(chromedp.CSS("#answer.accepted")))
	got = text(t, ctx, "#answer")
	require.Contains(t, got, "Accepted: recorded as applied")
	require.Contains(t, got, "answered: outcome applied, resolved by ines (oncekey-serve), effect reference BK-R1", "the page shows the workflow's own answer")
	shot("record-accepted.png")

	var out Booking
	wctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	require.NoError(t, wfRun.Get(wctx, &out))
	require.Equal(t, "BK-R1", out.ID, "the workflow gets the result given in the form")
	effects, runs := b.counts()
	require.Equal(t, 1, effects, "the downstream landed one booking")
	require.Equal(t, 1, runs, "the tool was not run again")

	v = showJSON(t, env, key, "acme")
	require.Equal(t, oncekeystore.StatusApplied, v.Status)
	require.Equal(t, "BK-R1", v.EffectReference)
	require.Equal(t, "ines (oncekey-serve)", v.ResolvedBy, "resolved_by is who is signed in, not form text")
	require.Equal(t, "found in the booking system", v.Note)

	run(t, ctx, "the settled record leaves the inbox", chromedp.Navigate(base+"/"))
	got = text(t, ctx, "#queue-unknown")
	require.NotContains(t, got, key[:16])
	require.Contains(t, got, "ChargeCard")

	// A record no reconciliation workflow waits for has no form; its page names the way out.
	run(t, ctx, "open a record nothing waits for", chromedp.Click(chromedp.CSS(`tr.record[data-key="`+charge+`"] td.key a`)), chromedp.WaitVisible(chromedp.CSS("p.answer.error")))
	require.Contains(t, text(t, ctx, "p.answer.error"), "oncekey resolve "+charge+" --tenant globex --epoch 1 --direct …")
	n, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll("#resolve-form").length`))
	require.NoError(t, err)
	require.Zero(t, n)
}

// Signing in with an access token in a real browser: the inbox sends a browser without a session
// to /login, a wrong token is refused there, the right one signs in (the session cookie works in
// the browser) and shows only the token's tenants; signing out ends it.
func TestServeSignInInTheBrowser(t *testing.T) {
	needsServices(t)
	ctx := browser(t)
	env := servicesEnv(t)
	token := "omar-0123456789abcdef0123456789abcdef"
	env[tokensEnv] = "omar acme " + token
	s, _ := migratedAt(t, env["DATABASE_URL"])
	seed(t, s, "acme", "BookAcme", "trip-1", "book", oncekeystore.StatusUnknown, nil)
	seed(t, s, "globex", "BookGlobex", "trip-2", "book", oncekeystore.StatusUnknown, nil)
	base := startServe(t, env)

	run(t, ctx, "a browser without a session is sent to sign in", chromedp.Navigate(base+"/"), chromedp.WaitVisible(chromedp.CSS("form.login")))
	run(t, ctx, "a wrong token", chromedp.SetValue(chromedp.CSS("#token"), "omar-wrong-0123456789abcdef0123456789"),
		chromedp.Click(chromedp.CSS("form.login button")), chromedp.WaitVisible(chromedp.CSS("p.answer.refused")))
	require.Contains(t, text(t, ctx, "p.answer.refused"), "not valid")

	run(t, ctx, "the right token", chromedp.SetValue(chromedp.CSS("#token"), token),
		chromedp.Click(chromedp.CSS("form.login button")), chromedp.WaitVisible(chromedp.CSS("#queue-unknown")))
	require.Contains(t, text(t, ctx, "header"), "deciding as omar")
	got := text(t, ctx, "#queue-unknown")
	require.Contains(t, got, "BookAcme")
	require.NotContains(t, got, "BookGlobex", "the token is limited to acme")

	run(t, ctx, "sign out", chromedp.Click(chromedp.CSS("form.logout button")), chromedp.WaitVisible(chromedp.CSS("form.login")))
	run(t, ctx, "signed out for good", chromedp.Navigate(base+"/"), chromedp.WaitVisible(chromedp.CSS("form.login")))
}

// An approval in a real browser: the call waiting for approval appears in the inbox's approvals
// queue with its summary; its page shows the summary and the form; a denial without a reason is
// refused on the page and changes nothing; the approval releases the waiting workflow, whose call
// then lands its effect once, and the approval names who was signed in.
func TestServeApprovalInTheBrowser(t *testing.T) {
	needsServices(t)
	ctx := browser(t)
	c, url, env := workerEnv(t, "ines")
	b := &bookings{}
	wfRun := runBooking(t, c, approvalWorker(t, c, url, b, "acme"))
	ap := waitingApproval(t, c, env)
	base := startServe(t, env, "--listen", "127.0.0.1:0")
	shot := shooter(t, ctx, "approval.png")

	row := `tr.approval[data-key="` + ap.OperationKey + `"]`
	run(t, ctx, "the waiting call appears", chromedp.Navigate(base+"/"), chromedp.WaitVisible(chromedp.CSS(row)))
	got := text(t, ctx, row)
	require.Contains(t, got, "Book")
	require.Contains(t, got, `book "R1"`, "the policy's summary")
	require.Contains(t, got, "booking-"+t.Name())

	run(t, ctx, "open the approval", chromedp.Click(chromedp.CSS(row+` td.key a`)), chromedp.WaitVisible(chromedp.CSS("#decide-form")))
	require.Equal(t, `book "R1"`, text(t, ctx, "#approval-summary"))
	require.Contains(t, text(t, ctx, "main"), "waiting_for_decision")
	shot("approval.png")

	run(t, ctx, "deny without a reason",
		chromedp.Click(chromedp.CSS("#decision-deny")),
		chromedp.Click(chromedp.CSS("#decide-submit")),
		chromedp.WaitVisible(chromedp.CSS("#answer.refused")))
	require.Contains(t, text(t, ctx, "#answer"), "a denial needs a reason")
	views := approvalsJSON(t, env)
	require.Len(t, views, 1)
	require.Equal(t, oncekeystore.ApprovalPending, views[0].Status, "the refused decision changed nothing")

	run(t, ctx, "approve",
		chromedp.WaitVisible(chromedp.CSS("#decide-form")),
		chromedp.Click(chromedp.CSS("#decision-approve")),
		chromedp.SetValue(chromedp.CSS("#reason"), "checked the booking"),
		chromedp.Click(chromedp.CSS("#decide-submit")),
		chromedp.WaitVisible(chromedp.CSS("#answer.accepted")))
	got = text(t, ctx, "#answer")
	require.Contains(t, got, "Accepted: approved")
	require.Contains(t, got, "answered: approved, by ines (oncekey-serve), at ")

	var out Booking
	wctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	require.NoError(t, wfRun.Get(wctx, &out))
	require.Equal(t, "BK-R1", out.ID)
	effects, runs := b.counts()
	require.Equal(t, 1, effects, "the downstream landed one booking")
	require.Equal(t, 1, runs)
	views = approvalsJSON(t, env, "--status", "approved")
	require.Len(t, views, 1)
	require.Equal(t, "ines (oncekey-serve)", views[0].DecidedBy, "decided_by is who is signed in, not form text")
	require.Equal(t, "checked the booking", views[0].Reason)

	run(t, ctx, "the decided approval leaves the inbox", chromedp.Navigate(base+"/"))
	require.Contains(t, text(t, ctx, "#queue-approvals"), "Nothing waits")
}
