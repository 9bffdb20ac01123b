package inbox

import (
	"bytes"
	"context"
	"crypto/rand"
	"embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/oncekey/oncekey/cmd/oncekey/internal/payloadview"
	"github.com/oncekey/oncekey/decisionsig"
	"github.com/oncekey/oncekey/internal/decisiontext"
	"github.com/oncekey/oncekey/internal/failuredoc"
	"github.com/oncekey/oncekey/oncekeystore"
	"github.com/oncekey/oncekey/reconcile"
)

//go:embed web
var webFS embed.FS

// Limits of the pages.
const (
	// pageLimit bounds the records one queue shows per tenant.
	pageLimit = 500
	// statusWait bounds the status query to a reconciliation workflow on the record page.
	statusWait = 3 * time.Second
	// maxForm bounds a posted form (a result is at most a few hundred KiB of JSON), in bytes.
	maxForm = 4 << 20
	// maxLoginForm bounds the sign-in form, in bytes.
	maxLoginForm = 64 << 10
)

// readForm reads the form posted in r, at most limit bytes of it. A larger form is answered
// 413 naming the limit, one that cannot be read 400; both change nothing, and readForm then
// returns false.
func (s *Server) readForm(w http.ResponseWriter, r *http.Request, limit int64) bool {
	r.Body = http.MaxBytesReader(w, r.Body, limit)
	err := r.ParseForm()
	var tooLarge *http.MaxBytesError
	switch {
	case err == nil:
		return true
	case errors.As(err, &tooLarge):
		s.message(w, r, http.StatusRequestEntityTooLarge, "Refused: the form is too large",
			fmt.Sprintf("Nothing was changed. A form sent here may be at most %s; this one is larger. Shorten what you typed (a result is JSON of a few hundred KiB at most) and send it again.", byteSize(limit)))
	default:
		s.message(w, r, http.StatusBadRequest, "Refused: the form cannot be read", "Nothing was changed: "+oneLine(err)+". Reload the page and send the form again.")
	}
	return false
}

// byteSize writes n bytes for people: "4 MiB", "64 KiB", "100 bytes".
func byteSize(n int64) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return strconv.FormatInt(n>>20, 10) + " MiB"
	case n >= 1<<10 && n%(1<<10) == 0:
		return strconv.FormatInt(n>>10, 10) + " KiB"
	}
	return strconv.FormatInt(n, 10) + " bytes"
}

// Server is the inbox's http.Handler. Make one with New.
type Server struct {
	opts    Options
	secret  [32]byte
	now     func() time.Time
	handler http.Handler
	pages   map[string]*template.Template
	queues  []queue
	// approvals is Options.Store as an ApprovalStore, nil when it keeps no approvals.
	approvals oncekeystore.ApprovalStore
	mu        sync.Mutex
	sessions  map[string]*session
}

// New returns the inbox for opts. It returns an error naming the bad field when opts is
// incomplete, and one wrapping ErrNoAuth when opts.Addr is not a loopback address and neither
// Tokens nor ProxyHeader is given.
func New(opts Options) (*Server, error) {
	if err := opts.validate(); err != nil {
		return nil, err
	}
	if opts.LocalUser == "" {
		opts.LocalUser = "local"
	}
	if opts.Namespace == "" {
		opts.Namespace = "default"
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.SessionTTL <= 0 {
		opts.SessionTTL = 12 * time.Hour
	}
	s := &Server{opts: opts, now: time.Now, sessions: map[string]*session{}, pages: map[string]*template.Template{}}
	if _, err := rand.Read(s.secret[:]); err != nil {
		return nil, fmt.Errorf("inbox: key: %w", err)
	}
	s.queues = []queue{unknownQueue()}
	if as, ok := opts.Store.(oncekeystore.ApprovalStore); ok {
		s.approvals = as
		s.queues = append(s.queues, approvalQueue(as))
	}
	funcs := template.FuncMap{"shortKey": shortKey}
	for _, p := range []string{"inbox", "record", "approval", "login", "message", "grants"} {
		t, err := template.New("layout.html").Funcs(funcs).ParseFS(webFS, "web/layout.html", "web/parts.html", "web/"+p+".html")
		if err != nil {
			return nil, fmt.Errorf("inbox: template %s: %w", p, err)
		}
		s.pages[p] = t
	}
	static, err := fs.Sub(webFS, "web/static")
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	mux.Handle("GET /static/", http.StripPrefix("/static/", http.FileServerFS(static)))
	mux.HandleFunc("GET /login", s.loginPage)
	mux.HandleFunc("POST /login", s.login)
	mux.Handle("POST /logout", s.authed(s.logout))
	mux.Handle("GET /{$}", s.authed(s.inboxPage))
	mux.Handle("GET /record", s.authed(s.recordPage))
	mux.Handle("POST /resolve", s.authed(s.resolve))
	mux.Handle("GET /approval", s.authed(s.approvalPage))
	mux.Handle("POST /decide", s.authed(s.decide))
	mux.Handle("GET /grants", s.authed(s.grantsPage))
	mux.Handle("POST /grants/revoke", s.authed(s.revokeGrant))
	cop := http.NewCrossOriginProtection()
	cop.SetDenyHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.message(w, r, http.StatusForbidden, "Refused: cross-origin request", "This form was sent from another site. Open the inbox directly and send it from there.")
	}))
	s.handler = cop.Handler(mux)
	return s, nil
}

// ServeHTTP sets the security headers on every answer, refuses a Host that is not loopback when
// the inbox is open, and serves the pages behind Go's cross-origin protection.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
	h.Set("X-Frame-Options", "DENY")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Cache-Control", "no-store")
	h.Set("Cross-Origin-Opener-Policy", "same-origin")
	if s.opts.open() && !loopbackHost(r) {
		s.message(w, r, http.StatusMisdirectedRequest, "Refused: not a loopback host name",
			"This inbox serves without authentication on a loopback address and answers only requests for localhost, 127.0.0.1 or [::1]. Open it under one of those names.")
		return
	}
	s.handler.ServeHTTP(w, r)
}

// authed runs next for an authenticated request, with the CSRF token checked on a POST.
func (s *Server) authed(next func(http.ResponseWriter, *http.Request, *identity)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := s.authenticate(r)
		if id == nil {
			s.unauthenticated(w, r)
			return
		}
		if r.Method == http.MethodPost {
			if !s.readForm(w, r, maxForm) {
				return
			}
			if !s.checkCSRF(r, id.name) {
				s.message(w, r, http.StatusForbidden, "Refused: the form's CSRF token is missing or wrong",
					"Nothing was changed. Reload the page and send the form again.")
				return
			}
		}
		next(w, r, id)
	})
}

// unauthenticated answers a request with no identity: a browser is sent to sign in when tokens
// are configured; anything else gets 401.
func (s *Server) unauthenticated(w http.ResponseWriter, r *http.Request) {
	if len(s.opts.Tokens) > 0 && r.Method == http.MethodGet && r.Header.Get("Authorization") == "" {
		http.Redirect(w, r, "/login?next="+url.QueryEscape(r.URL.RequestURI()), http.StatusSeeOther)
		return
	}
	w.Header().Set("WWW-Authenticate", `Bearer realm="oncekey"`)
	detail := "Send an access token as Authorization: Bearer TOKEN, or sign in on /login."
	if len(s.opts.Tokens) == 0 {
		detail = "This inbox takes who you are from the reverse proxy in front of it: open it through that proxy."
	}
	s.message(w, r, http.StatusUnauthorized, "Sign in required", detail)
}

// page is what every template gets.
type page struct {
	Title     string
	Who       string
	Via       string
	Namespace string
	CSRF      string
	Open      bool
	Data      any
}

func (s *Server) render(w http.ResponseWriter, r *http.Request, status int, name string, id *identity, title string, data any) {
	p := page{Title: title, Namespace: s.opts.Namespace, Open: s.opts.open(), Data: data}
	who := ""
	if id != nil {
		p.Who, p.Via, who = id.name, id.via, id.name
	}
	p.CSRF = s.csrfToken(w, r, who)
	var buf bytes.Buffer
	if err := s.pages[name].ExecuteTemplate(&buf, "layout.html", p); err != nil {
		s.opts.Logger.Error("render", "page", name, "err", err)
		http.Error(w, "internal error rendering the page", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

// messageData is a page that only says something.
type messageData struct{ Detail string }

func (s *Server) message(w http.ResponseWriter, r *http.Request, status int, title, detail string) {
	s.render(w, r, status, "message", s.authenticate(r), title, messageData{Detail: detail})
}

// ---- sign-in ----

type loginData struct {
	Next  string
	Error string
}

func (s *Server) loginPage(w http.ResponseWriter, r *http.Request) {
	if len(s.opts.Tokens) == 0 {
		http.Redirect(w, r, "/", http.StatusSeeOther)
		return
	}
	s.render(w, r, http.StatusOK, "login", nil, "Sign in", loginData{Next: safeNext(r.URL.Query().Get("next"))})
}

func (s *Server) login(w http.ResponseWriter, r *http.Request) {
	if len(s.opts.Tokens) == 0 {
		http.Redirect(w, r, "/", http.StatusSeeOther)
		return
	}
	if !s.readForm(w, r, maxLoginForm) {
		return
	}
	if !s.checkCSRF(r, "") {
		s.message(w, r, http.StatusForbidden, "Refused: the form's CSRF token is missing or wrong", "Reload the sign-in page and try again.")
		return
	}
	next := safeNext(r.PostFormValue("next"))
	id := s.token(strings.TrimSpace(r.PostFormValue("token")))
	if id == nil {
		s.opts.Logger.Warn("sign-in refused: not a valid token", "remote", r.RemoteAddr)
		s.render(w, r, http.StatusUnauthorized, "login", nil, "Sign in", loginData{Next: next, Error: "That token is not valid. Paste the whole token your operator gave you."})
		return
	}
	s.setCookie(w, r, sessionCookie, s.newSession(*id), int(s.opts.SessionTTL/time.Second))
	http.Redirect(w, r, next, http.StatusSeeOther)
}

func (s *Server) logout(w http.ResponseWriter, r *http.Request, _ *identity) {
	s.endSession(r)
	s.setCookie(w, r, sessionCookie, "", -1)
	http.Redirect(w, r, "/login", http.StatusSeeOther)
}

// maxNextDecodes bounds how many layers of percent-encoding safeNext takes off a target's path.
const maxNextDecodes = 4

// safeNext returns n, a post-sign-in target, when it is a path on this site, and "/" otherwise.
// n is kept only when it is printable ASCII without a space or a backslash, parses as a URL
// with no scheme, host or user, and its path, as given and with each layer of percent-encoding
// taken off (up to maxNextDecodes; more layers are refused), starts with one "/" not followed by
// "/" and is printable ASCII without a space or a backslash. Browsers drop tabs and newlines
// from a Location and read "\" as "/", so "/\t/evil.example" or "/%09/evil.example" would
// otherwise lead to another host.
func safeNext(n string) string {
	if !sameOriginPath(n) {
		return "/"
	}
	return n
}

func sameOriginPath(n string) bool {
	if !plainASCII(n) {
		return false
	}
	u, err := url.Parse(n)
	if err != nil || u.Scheme != "" || u.Host != "" || u.User != nil || u.Opaque != "" {
		return false
	}
	p, _, _ := strings.Cut(n, "?")
	p, _, _ = strings.Cut(p, "#")
	for range maxNextDecodes {
		if !strings.HasPrefix(p, "/") || strings.HasPrefix(p, "//") || !plainASCII(p) {
			return false
		}
		d, err := url.PathUnescape(p)
		if err != nil {
			return false
		}
		if d == p {
			return true
		}
		p = d
	}
	return false
}

// plainASCII reports whether s is printable ASCII other than space and backslash.
func plainASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c <= ' ' || c >= 0x7f || c == '\\' {
			return false
		}
	}
	return true
}

// ---- the inbox ----

// item is one row of a queue.
type item struct {
	Tenant, Key, Tool, WorkflowID, StepID string
	Age, Since                            string
	Failure, EffectReference              string
	// Summary, TimesOut and Episode are an approval's: what the approver sees, when it times out.
	Summary, TimesOut string
	Episode           int64
	Link              string
}

// queue is one kind of question the inbox puts to a person: operations whose outcome is
// unknown, and calls waiting for approval. Each queue lists its own records for the tenants an
// identity may see, oldest first.
type queue struct {
	Name  string
	Title string
	// Empty is what the page says when nothing waits in the queue.
	Empty string
	list  func(ctx context.Context, s *Server, tenant string) (items []item, more bool, err error)
}

// queueView is a queue as the inbox page shows it.
type queueView struct {
	Name, Title, Empty string
	Tenants            []tenantGroup
	Count              int
	Error              string
}

type tenantGroup struct {
	Tenant string
	Items  []item
	More   bool
}

type inboxData struct {
	Queues  []queueView
	Tenant  string
	Tenants []string // the tenants the identity is limited to; nil for all
}

// row is the item of a queue's row with the fields every queue shows; since is when it began to
// wait, now the time of the page.
func row(now time.Time, tenant, key, tool, workflowID, stepID string, since time.Time) item {
	return item{Tenant: tenant, Key: key, Tool: tool, WorkflowID: workflowID, StepID: stepID,
		Age: ageText(now, since), Since: since.UTC().Format(time.RFC3339)}
}

// itemsOf is the items of a queue's page vs, each made by of at now.
func itemsOf[T any](now time.Time, vs []T, of func(now time.Time, v T) item) []item {
	items := make([]item, 0, len(vs))
	for _, v := range vs {
		items = append(items, of(now, v))
	}
	return items
}

func unknownQueue() queue {
	return queue{
		Name:  "unknown",
		Title: "Unknown outcomes",
		Empty: "Nothing waits: no operation has an unknown outcome.",
		list: func(ctx context.Context, s *Server, tenant string) ([]item, bool, error) {
			res, err := reconcile.List(ctx, s.opts.Store, oncekeystore.ListParams{Status: oncekeystore.StatusUnknown, Tenant: tenant, Limit: pageLimit})
			if err != nil {
				return nil, false, err
			}
			return itemsOf(s.now(), res.Records, func(now time.Time, rec *oncekeystore.Record) item {
				it := row(now, rec.Tenant, rec.OperationKey, rec.Tool, rec.WorkflowID, rec.StepID, rec.UpdatedAt)
				it.Failure, it.EffectReference = clip(failuredoc.Text(rec.Failure), 300), rec.EffectReference
				it.Link = recordLink(rec.Tenant, rec.OperationKey, false)
				return it
			}), res.Next != "", nil
		},
	}
}

func (s *Server) inboxPage(w http.ResponseWriter, r *http.Request, id *identity) {
	filter := r.URL.Query().Get("tenant")
	if filter != "" && !id.allows(filter) {
		s.message(w, r, http.StatusForbidden, "Not your tenant", "Your access token is not allowed to see tenant "+strconv.Quote(filter)+".")
		return
	}
	tenants := []string{filter} // "" lists every tenant in one query
	if filter == "" && id.tenants != nil {
		tenants = id.tenants
	}
	d := inboxData{Tenant: filter, Tenants: id.tenants}
	for _, q := range s.queues {
		qv := queueView{Name: q.Name, Title: q.Title, Empty: q.Empty}
		groups := map[string]*tenantGroup{}
		for _, t := range tenants {
			items, more, err := q.list(r.Context(), s, t)
			if err != nil {
				qv.Error = "Could not read the records: " + oneLine(err) + ". Check that the store is reachable (and, for Postgres, migrated: oncekey migrate), then reload."
				break
			}
			for _, it := range items {
				g := groups[it.Tenant]
				if g == nil {
					g = &tenantGroup{Tenant: it.Tenant}
					groups[it.Tenant] = g
				}
				g.Items = append(g.Items, it)
				qv.Count++
			}
			if more {
				for _, g := range groups {
					if t == "" || g.Tenant == t {
						g.More = true
					}
				}
			}
		}
		for _, g := range groups {
			qv.Tenants = append(qv.Tenants, *g)
		}
		sort.Slice(qv.Tenants, func(i, j int) bool { return qv.Tenants[i].Tenant < qv.Tenants[j].Tenant })
		d.Queues = append(d.Queues, qv)
	}
	s.render(w, r, http.StatusOK, "inbox", id, "Inbox", d)
}

// ---- a record ----

// field is one line of the record page.
type field struct{ Name, Value string }

type recordData struct {
	decisionPage
	Tool, Status   string
	Failure        string
	ResultBytes    int
	ShowResult     bool
	Result         string
	ShowResultLink string
	HideResultLink string
	Form           resolveForm
	// Approval says how the operation's approval stands, with ApprovalLink to its page; "" when
	// it has none.
	Approval, ApprovalLink string
}

// resolveForm is the resolution form's values, kept when the workflow refused them.
type resolveForm struct {
	Outcome, EffectReference, Result, Note string
}

// answer is what became of a decision, shown above the record.
type answer struct {
	// Kind is accepted, refused, unconfirmed or error; the page styles it.
	Kind   string
	Title  string
	Detail string
}

func (s *Server) recordPage(w http.ResponseWriter, r *http.Request, id *identity) {
	q := r.URL.Query()
	s.showRecord(w, r, id, q.Get("tenant"), q.Get("key"), q.Get("show") == "result", http.StatusOK, nil, resolveForm{})
}

// showRecord renders the record page for (tenant, key) with an optional answer to a decision.
func (s *Server) showRecord(w http.ResponseWriter, r *http.Request, id *identity, tenant, key string, showResult bool, status int, ans *answer, form resolveForm) {
	if !s.named(w, r, id, "A record", tenant, key) {
		return
	}
	rec, err := s.opts.Store.Get(r.Context(), &oncekeystore.GetParams{Tenant: tenant, OperationKey: key})
	if !s.found(w, r, "record", tenant, err, "It may have been purged", "Check that the store is reachable, then reload.") {
		return
	}
	d := recordData{
		decisionPage: decisionPage{Tenant: rec.Tenant, Key: rec.OperationKey, WorkflowID: reconcile.WorkflowID(rec.OperationKey),
			FenceName: "epoch", Fence: rec.Epoch, RequestID: newRequestID(), Answer: ans, FormAction: "/resolve", FormID: "resolve-form"},
		Tool: rec.Tool, Status: string(rec.Status), Failure: failuredoc.Text(rec.Failure), ResultBytes: len(rec.Result), ShowResult: showResult,
		ShowResultLink: recordLink(rec.Tenant, rec.OperationKey, true), HideResultLink: recordLink(rec.Tenant, rec.OperationKey, false),
		Form: form,
	}
	if d.Form.Outcome == "" {
		d.Form.Outcome = string(reconcile.Applied)
	}
	add := d.add
	now := s.now()
	add("Status", string(rec.Status))
	add("Tenant", rec.Tenant)
	add("Tool", rec.Tool)
	add("Version", rec.Version)
	add("Effect class", rec.Effect.String())
	add("Workflow", rec.WorkflowID)
	add("Step", rec.StepID)
	add("Epoch", strconv.FormatInt(rec.Epoch, 10))
	add("Effect reference", rec.EffectReference)
	add("Resolved by", rec.ResolvedBy)
	add("Note", rec.Note)
	if ss, ok := s.opts.Store.(oncekeystore.SignatureStore); ok {
		if sig, err := ss.ResolutionSignature(r.Context(), &oncekeystore.GetParams{Tenant: rec.Tenant, OperationKey: rec.OperationKey}); err == nil {
			add("Resolution signed by", s.resolutionSignedBy(rec, sig))
		}
	}
	add("Created", rec.CreatedAt.UTC().Format(time.RFC3339)+" ("+ageText(now, rec.CreatedAt)+" ago)")
	add("Updated", rec.UpdatedAt.UTC().Format(time.RFC3339)+" ("+ageText(now, rec.UpdatedAt)+" ago)")
	add("Fingerprint", rec.Fingerprint)
	if s.approvals != nil {
		if ap, err := s.approvals.GetApproval(r.Context(), &oncekeystore.GetParams{Tenant: rec.Tenant, OperationKey: rec.OperationKey}); err == nil {
			d.Approval, d.ApprovalLink = approvalLine(ap), approvalLink(ap.Tenant, ap.OperationKey)
		}
	}
	if showResult && len(rec.Result) > 0 {
		b, err := json.MarshalIndent(payloadview.Decode(rec.Result), "", "  ")
		if err != nil {
			b = []byte(err.Error())
		}
		d.Result = string(b)
	}
	if rec.Status == oncekeystore.StatusUnknown {
		// A workflow that has closed or never ran: the command that writes the decision straight
		// to the store still works.
		direct := "Write the decision straight to the store with `" + s.directCommand(rec.Tenant, rec.OperationKey, rec.Epoch) +
			"`; the caller's workflow gets it when it runs the step again."
		s.workflowState(r.Context(), decisiontext.Reconciliation, &d.decisionPage, direct, func(ctx context.Context) (bool, []field, error) {
			st, err := reconcile.Status(ctx, s.opts.Temporal, rec.OperationKey)
			if err != nil {
				return false, nil, err
			}
			since := ""
			if !st.WaitingSince.IsZero() {
				since = st.WaitingSince.UTC().Format(time.RFC3339)
			}
			return st.State == reconcile.StateWaiting, workflowLines(string(st.State), st.LastInvalidSignal, field{"Waiting since", since}, field{"Why unknown", st.Reason}), nil
		})
	}
	s.render(w, r, status, "record", id, rec.Tool+" · "+shortKey(rec.OperationKey), d)
}

// resolve takes a decision from the form and hands it to the reconciliation workflow through
// reconcile.ResolveOutput, then shows the workflow's answer on the record page (see post).
func (s *Server) resolve(w http.ResponseWriter, r *http.Request, id *identity) {
	tenant, key := r.PostFormValue("tenant"), r.PostFormValue("key")
	form := resolveForm{
		Outcome: r.PostFormValue("outcome"), EffectReference: strings.TrimSpace(r.PostFormValue("effect_reference")),
		Result: strings.TrimSpace(r.PostFormValue("result")), Note: strings.TrimSpace(r.PostFormValue("note")),
	}
	var (
		res    reconcile.Resolution
		signer decisionsig.Signer
		cur    *oncekeystore.Record // the record as the store holds it, which a signature names
	)
	s.post(w, r, id, &decisionPost{
		p: decisiontext.Reconciliation, what: "record", fence: "epoch", logMsg: "decision", choiceField: "outcome", choice: form.Outcome,
		tenant: tenant, key: key, fenceValue: r.PostFormValue("epoch"),
		show: func(status int, a *answer) {
			if a.Kind == "accepted" {
				form = resolveForm{}
			}
			s.showRecord(w, r, id, tenant, key, false, status, a, form)
		},
		check: func(epoch int64, refuse func(title, detail string)) bool {
			res = reconcile.Resolution{Epoch: epoch, Outcome: reconcile.ResolutionOutcome(form.Outcome), Note: form.Note, ResolvedBy: id.resolvedBy()}
			if res.Outcome == reconcile.Applied {
				res.EffectReference = form.EffectReference
				if form.Result != "" {
					if !json.Valid([]byte(form.Result)) {
						refuse("Refused: the result is not valid JSON", "Give the tool's result as JSON, e.g. {\"id\": \"TCK-42\"}, or a quoted string \"done\"; leave it empty for the zero value. Nothing was sent.")
						return false
					}
					res.Result = json.RawMessage(form.Result)
				}
			} else if form.EffectReference != "" || form.Result != "" {
				refuse("Refused: an effect reference and a result go with “applied” only", "Clear them, or choose applied. Nothing was sent.")
				return false
			}
			if err := res.Validate(); err != nil {
				refuse(decisiontext.Reconciliation.Title(decisiontext.Invalid), oneLine(err)+". Nothing was sent.")
				return false
			}
			var why string
			if signer, why = s.signer(id); why != "" {
				refuse(noKeyTitle, why)
				return false
			}
			return true
		},
		stored: func(ctx context.Context, epoch int64) (*answer, error) {
			rec, err := s.opts.Store.Get(ctx, &oncekeystore.GetParams{Tenant: tenant, OperationKey: key})
			if err != nil || (rec.Epoch == epoch && rec.Status == oncekeystore.StatusUnknown) {
				cur = rec
				return nil, err
			}
			return &answer{Kind: "refused", Title: "Refused: the record changed since this page was loaded",
				Detail: fmt.Sprintf("The form showed epoch %d; the record is now %s at epoch %d. Nothing was sent. Read the record again before deciding.", epoch, rec.Status, rec.Epoch)}, nil
		},
		send: func(ctx context.Context, requestID string) (string, string, error) {
			res.RequestID = requestID
			if signer != nil {
				var err error
				if res, err = reconcile.SignResolution(signer, cur, res); err != nil {
					return "", "", err
				}
			}
			out, err := reconcile.ResolveOutput(ctx, s.opts.Temporal, tenant, key, res)
			return "recorded as " + string(res.Outcome), decisiontext.ResolutionAnswer(out, nil), err
		},
		released: "Every workflow blocked on this operation continues.",
		first:    s.settledFirst,
		none: func(epoch int64) string {
			return "Nothing was recorded. Write the decision straight to the store with `" + s.directCommand(tenant, key, epoch) + "`."
		},
	})
}

// settledFirst is the answer to a decision about (tenant, key) at epoch that the reconciliation
// workflow refused, or found no workflow for, when the operation was settled another way first
// (another person's decision, a receipt lookup): who settled it, how and when, read from the store
// (else from the workflow's answer, refused.SettledAs). nil when the record still waits at epoch.
func (s *Server) settledFirst(ctx context.Context, tenant, key string, epoch int64, err error) *answer {
	var refused *reconcile.RefusedError
	errors.As(err, &refused)
	const title = "Refused: the operation was already settled"
	rec, err := s.opts.Store.Get(ctx, &oncekeystore.GetParams{Tenant: tenant, OperationKey: key})
	switch {
	case err == nil && rec.Epoch == epoch && rec.Status != oncekeystore.StatusUnknown && rec.Status != oncekeystore.StatusPending:
		return &answer{Kind: "refused", Title: title, Detail: "Someone decided first: the operation was " + settledText(rec) +
			". Nothing was recorded for this decision, and nothing waits for one any more."}
	case err == nil && rec.Epoch != epoch:
		detail := fmt.Sprintf("The decision was for epoch %d; the record is now %s at epoch %d", epoch, rec.Status, rec.Epoch)
		if refused != nil && refused.SettledAs != nil {
			detail += fmt.Sprintf(". Epoch %d was settled as %s by %s", epoch, refused.SettledAs.Outcome, refused.SettledAs.ResolvedBy)
		}
		return &answer{Kind: "refused", Title: title, Detail: detail + ". Nothing was recorded for this decision. Read the record again before deciding."}
	case refused != nil && refused.SettledAs != nil:
		return &answer{Kind: "refused", Title: title, Detail: fmt.Sprintf("Someone decided first: the reconciliation workflow settled it as %s by %s. Nothing was recorded for this decision.",
			refused.SettledAs.Outcome, refused.SettledAs.ResolvedBy)}
	}
	return nil
}

// ---- helpers ----

// requestID is the form's request ID when it is one the page made (hex, at most 64 characters),
// else a fresh one. The page makes one per form, and ResolveOutput sends it as the update ID, so
// the same form sent twice is taken once.
func requestID(v string) string {
	ok := v != "" && len(v) <= 64
	for _, c := range v {
		if !strings.ContainsRune("0123456789abcdef", c) {
			ok = false
		}
	}
	if ok {
		return v
	}
	return newRequestID()
}

func newRequestID() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

func recordLink(tenant, key string, showResult bool) string {
	v := url.Values{"tenant": {tenant}, "key": {key}}
	if showResult {
		v.Set("show", "result")
	}
	return "/record?" + v.Encode()
}

// shortKey cuts an operation key for display: "ok1_3f2a9c0d…".
func shortKey(k string) string {
	if len(k) <= 16 {
		return k
	}
	return k[:16] + "…"
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

func utf8RuneStart(b byte) bool { return b&0xC0 != 0x80 }

// ageText says how long ago t was: 45s, 12m, 3h, 5d.
func ageText(now, t time.Time) string {
	d := now.Sub(t)
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", max(0, int(d.Seconds())))
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh", int(d.Hours()))
	}
	return fmt.Sprintf("%dd", int(d.Hours()/24))
}

func oneLine(err error) string { return strings.Join(strings.Fields(err.Error()), " ") }
