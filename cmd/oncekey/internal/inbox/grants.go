package inbox

import (
	"errors"
	"net/http"
	"time"

	"github.com/oncekey/oncekey"
)

// grantRow is one standing grant on the grants page.
type grantRow struct {
	ID, Tenant, Tool, Workflow, Rule, By, Reason, Status, Expires string
	Active                                                        bool
}

// grantsData is what the grants page shows: the namespace's grants the identity may act for,
// oldest first, and the answer to a revoke.
type grantsData struct {
	Grants []grantRow
	Answer string
	Error  string
}

// grantStore returns the store as a GrantStore, or nil.
func (s *Server) grantStore() oncekey.GrantStore {
	gs, _ := s.opts.Store.(oncekey.GrantStore)
	return gs
}

// grantsPage lists the standing grants of the namespace (every status; the active ones can be
// revoked), for the tenants the identity may act for.
func (s *Server) grantsPage(w http.ResponseWriter, r *http.Request, id *identity) {
	s.showGrants(w, r, id, http.StatusOK, grantsData{})
}

func (s *Server) showGrants(w http.ResponseWriter, r *http.Request, id *identity, status int, d grantsData) {
	gs := s.grantStore()
	if gs == nil {
		s.message(w, r, http.StatusNotFound, "No grants here", "This inbox's store keeps no standing grants.")
		return
	}
	list, err := gs.ListGrants(r.Context(), &oncekey.ListGrantsParams{Namespace: s.opts.Namespace, Limit: oncekey.MaxListLimit})
	if err != nil {
		d.Error = "The grants could not be read: " + oneLine(err) + ". Check that Postgres is reachable and migrated (oncekey migrate), then reload."
	}
	now := s.now()
	for _, g := range list {
		if !id.allows(g.Tenant) {
			continue
		}
		row := grantRow{ID: g.ID, Tenant: g.Tenant, Tool: g.Tool, Workflow: g.WorkflowID, Rule: g.Rule, By: g.CreatedBy, Reason: g.Reason,
			Status: string(g.Status), Active: g.Status == oncekey.GrantActive, Expires: g.ExpiresAt.UTC().Format(time.RFC3339) + " (" + untilText(now, g.ExpiresAt) + ")"}
		if row.Workflow == "" {
			row.Workflow = "every workflow"
		}
		if row.Rule == "" {
			row.Rule = "every call"
		}
		if g.Status == oncekey.GrantRevoked {
			row.Expires = "revoked by " + g.RevokedBy + " at " + g.RevokedAt.UTC().Format(time.RFC3339)
		}
		d.Grants = append(d.Grants, row)
	}
	s.render(w, r, status, "grants", id, "Standing grants", d)
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
	case errors.Is(err, oncekey.ErrNotFound) || (err == nil && (g.Namespace != s.opts.Namespace || !id.allows(g.Tenant))):
		s.showGrants(w, r, id, http.StatusNotFound, grantsData{Error: "No such grant here: nothing was revoked."})
		return
	case err != nil:
		s.showGrants(w, r, id, http.StatusServiceUnavailable, grantsData{Error: "The grant could not be read: " + oneLine(err) + ". Nothing was revoked; try again."})
		return
	case g.Status != oncekey.GrantActive:
		s.showGrants(w, r, id, http.StatusConflict, grantsData{Error: "The grant " + g.ID + " is " + string(g.Status) + " already: nothing was changed."})
		return
	}
	g, err = gs.RevokeGrant(r.Context(), &oncekey.RevokeGrantParams{ID: gid, RevokedBy: id.resolvedBy()})
	if err != nil {
		s.showGrants(w, r, id, http.StatusServiceUnavailable, grantsData{Error: "The grant could not be revoked: " + oneLine(err) + ". Try again."})
		return
	}
	s.opts.Logger.Info("grant revoked", "grant", g.ID, "tenant", g.Tenant, "tool", g.Tool, "by", g.RevokedBy)
	s.showGrants(w, r, id, http.StatusOK, grantsData{Answer: "Revoked " + g.ID + " (" + g.Tool + " of tenant " + g.Tenant + ") by " + g.RevokedBy + ": it covers nothing from now on."})
}
