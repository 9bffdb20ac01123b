package inbox

import (
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/oncekey/oncekey/oncekeystore"
	"github.com/oncekey/oncekey/reconcile"
)

// grantRow is one standing grant on the grants page.
type grantRow struct {
	ID, Tenant, Tool, Workflow, Rule, By, Reason, Status, Expires string
	Active                                                        bool
	// Signed says who signed the grant's making and its revocation, with Options.TrustList.
	Signed string
}

// grantsData is what the grants page shows: one page of the namespace's active grants (or,
// with Ended, of its revoked and expired ones) for the tenants the identity may act for, oldest
// first, with links to the next pages, and the answer to a revoke.
type grantsData struct {
	Grants []grantRow
	// Ended is whether the page lists the ended grants; Tenant the tenant it is narrowed to
	// ("" for every tenant the identity may act for).
	Ended  bool
	Tenant string
	// More links to the next page, per tenant when the page lists several tenants apart.
	More   []grantsMore
	Answer string
	Error  string
	// Signed is whether the rows say who signed them (the inbox has a trust list).
	Signed bool
}

// grantsMore is a link to the next page of grants (of one tenant, or of all).
type grantsMore struct{ Tenant, Link string }

// grantsPageSize is how many grants the page lists per tenant at a time.
const grantsPageSize = 100

// grantsLink returns the grants page of tenant ("" every tenant), ended or active, from cursor
// after ("" the first page).
func grantsLink(tenant string, ended bool, after string) string {
	q := url.Values{}
	if tenant != "" {
		q.Set("tenant", tenant)
	}
	if ended {
		q.Set("show", "ended")
	}
	if after != "" {
		q.Set("after", after)
	}
	if len(q) == 0 {
		return "/grants"
	}
	return "/grants?" + q.Encode()
}

// grantStore returns the store as a GrantStore, or nil.
func (s *Server) grantStore() oncekeystore.GrantStore {
	gs, _ := s.opts.Store.(oncekeystore.GrantStore)
	return gs
}

// grantsPage lists a page of the standing grants of the namespace, for the tenants the identity
// may act for: the active ones (which can be revoked) or, with ?show=ended, the revoked and
// expired ones; ?tenant= narrows it to one tenant, ?after= is the cursor of the next page.
func (s *Server) grantsPage(w http.ResponseWriter, r *http.Request, id *identity) {
	q := r.URL.Query()
	tenant := q.Get("tenant")
	if tenant != "" && !id.allows(tenant) {
		s.message(w, r, http.StatusForbidden, "Not your tenant", "Your access token is not allowed to see tenant "+strconv.Quote(tenant)+".")
		return
	}
	s.showGrants(w, r, id, http.StatusOK, grantsData{Ended: q.Get("show") == "ended", Tenant: tenant}, q.Get("after"))
}

// showGrants renders d with the page of grants it names, from cursor after: the store filters
// by namespace, tenant and status, so every active grant the identity may revoke is on some page.
func (s *Server) showGrants(w http.ResponseWriter, r *http.Request, id *identity, status int, d grantsData, after string) {
	gs := s.grantStore()
	if gs == nil {
		s.message(w, r, http.StatusNotFound, "No grants here", "This inbox's store keeps no standing grants.")
		return
	}
	tenants := []string{d.Tenant} // "" lists every tenant in one query
	if d.Tenant == "" && id.tenants != nil {
		tenants, after = id.tenants, ""
	}
	st := oncekeystore.GrantActive
	if d.Ended {
		st = oncekeystore.GrantEnded
	}
	now := s.now()
	for _, t := range tenants {
		res, err := gs.ListGrants(r.Context(), &oncekeystore.ListGrantsParams{Namespace: s.opts.Namespace, Tenant: t, Status: st, Cursor: after, Limit: grantsPageSize})
		if err != nil {
			if d.Error == "" {
				d.Error = "The grants could not be read: " + oneLine(err) + ". Check that the store is reachable (and, for Postgres, migrated: oncekey migrate), then reload."
			}
			break
		}
		for _, g := range res.Grants {
			if id.allows(g.Tenant) {
				row := grantRowOf(now, g)
				if s.opts.TrustList != nil {
					row.Signed = s.grantSignedBy(g)
				}
				d.Grants = append(d.Grants, row)
			}
		}
		if res.Next != "" {
			d.More = append(d.More, grantsMore{Tenant: t, Link: grantsLink(t, d.Ended, res.Next)})
		}
	}
	d.Signed = s.opts.TrustList != nil
	s.render(w, r, status, "grants", id, "Standing grants", d)
}

// grantRowOf is g as a row of the grants page, read at now.
func grantRowOf(now time.Time, g *oncekeystore.Grant) grantRow {
	row := grantRow{ID: g.ID, Tenant: g.Tenant, Tool: g.Tool, Workflow: g.WorkflowID, Rule: g.Rule, By: g.CreatedBy, Reason: g.Reason,
		Status: string(g.Status), Active: g.Status == oncekeystore.GrantActive, Expires: g.ExpiresAt.UTC().Format(time.RFC3339) + " (" + untilText(now, g.ExpiresAt) + ")"}
	if row.Workflow == "" {
		row.Workflow = "every workflow"
	}
	if row.Rule == "" {
		row.Rule = "every call"
	}
	if g.Status == oncekeystore.GrantRevoked {
		row.Expires = "revoked by " + g.RevokedBy + " at " + g.RevokedAt.UTC().Format(time.RFC3339)
	}
	return row
}

// revokeGrant revokes the posted grant, as the signed-in identity, when the identity may act for
// its tenant and namespace.
func (s *Server) revokeGrant(w http.ResponseWriter, r *http.Request, id *identity) {
	gs := s.grantStore()
	if gs == nil {
		s.message(w, r, http.StatusNotFound, "No grants here", "This inbox's store keeps no standing grants.")
		return
	}
	gid := r.PostFormValue("grant")
	g, err := gs.GetGrant(r.Context(), gid)
	switch {
	case errors.Is(err, oncekeystore.ErrNotFound) || (err == nil && (g.Namespace != s.opts.Namespace || !id.allows(g.Tenant))):
		s.showGrants(w, r, id, http.StatusNotFound, grantsData{Error: "No such grant here: nothing was revoked."}, "")
		return
	case err != nil:
		s.showGrants(w, r, id, http.StatusServiceUnavailable, grantsData{Error: "The grant could not be read: " + oneLine(err) + ". Nothing was revoked; try again."}, "")
		return
	case g.Status != oncekeystore.GrantActive:
		s.showGrants(w, r, id, http.StatusConflict, grantsData{Error: "The grant " + g.ID + " is " + string(g.Status) + " already: nothing was changed."}, "")
		return
	}
	p := oncekeystore.RevokeGrantParams{ID: gid, RevokedBy: id.resolvedBy()}
	signer, why := s.signer(id)
	switch {
	case why != "":
		s.showGrants(w, r, id, http.StatusUnprocessableEntity, grantsData{Error: noKeyTitle + ". " + strings.Replace(why, "Nothing was sent.", "Nothing was revoked.", 1)}, "")
		return
	case signer != nil:
		if p, err = reconcile.SignRevocation(signer, g, p); err != nil {
			s.showGrants(w, r, id, http.StatusInternalServerError, grantsData{Error: "The revocation could not be signed: " + oneLine(err) + ". Nothing was revoked."}, "")
			return
		}
	}
	g, err = gs.RevokeGrant(r.Context(), &p)
	if err != nil {
		s.showGrants(w, r, id, http.StatusServiceUnavailable, grantsData{Error: "The grant could not be revoked: " + oneLine(err) + ". Try again."}, "")
		return
	}
	s.opts.Logger.Info("grant revoked", "grant", g.ID, "tenant", g.Tenant, "tool", g.Tool, "by", g.RevokedBy)
	s.showGrants(w, r, id, http.StatusOK, grantsData{Answer: "Revoked " + g.ID + " (" + g.Tool + " of tenant " + g.Tenant + ") by " + g.RevokedBy + ": it covers nothing from now on."}, "")
}
