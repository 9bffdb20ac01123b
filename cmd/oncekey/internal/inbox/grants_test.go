package inbox

import (
	"context"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/oncekey/oncekey/oncekeystore"
	"github.com/stretchr/testify/require"
)

// The grants page lists the namespace's grants of the tenants the identity may act for, and
// revokes an active one as the signed-in identity; another tenant's grant is neither shown nor
// revoked, and a revoked one cannot be revoked again.
func TestGrantsListedAndRevoked(t *testing.T) {
	e := setup(t, func(o *Options) { o.Addr = "0.0.0.0:7780"; withTokens(o) })
	ctx := context.Background()
	mk := func(ns, tenant, tool string) *oncekeystore.Grant {
		g, err := e.store.CreateGrant(ctx, &oncekeystore.CreateGrantParams{Namespace: ns, Tenant: tenant, Tool: tool, Rule: "amount_cents <= 100",
			CreatedBy: "ada", Reason: "small refunds", Duration: time.Hour})
		require.NoError(t, err)
		return g
	}
	acme := mk("default", "acme", "IssueRefund")
	globex := mk("default", "globex", "RefundGlobex")
	other := mk("elsewhere", "acme", "RefundElsewhere")

	res, body := e.req("GET", "/grants", nil, bearer(acmeToken))
	require.Equal(t, http.StatusOK, res.StatusCode, body)
	require.Contains(t, body, acme.ID)
	require.Contains(t, body, "amount_cents &lt;= 100")
	require.NotContains(t, body, globex.ID, "another tenant's grant is not shown")
	require.NotContains(t, body, other.ID, "another namespace's grant is not shown")

	cookie, tok := e.session("/grants", bearer(acmeToken))
	post := func(id string) (*http.Response, string) {
		return e.req("POST", "/grants/revoke", url.Values{"grant": {id}, "csrf": {tok}}, both(bearer(acmeToken), withCookie(cookie)))
	}
	res, body = post(globex.ID)
	require.Equal(t, http.StatusNotFound, res.StatusCode, body)
	g, err := e.store.GetGrant(ctx, globex.ID)
	require.NoError(t, err)
	require.Equal(t, oncekeystore.GrantActive, g.Status, "another tenant's grant is not revoked")

	res, body = post(acme.ID)
	require.Equal(t, http.StatusOK, res.StatusCode, body)
	require.Contains(t, body, "Revoked "+acme.ID)
	g, err = e.store.GetGrant(ctx, acme.ID)
	require.NoError(t, err)
	require.Equal(t, oncekeystore.GrantRevoked, g.Status)
	require.Equal(t, "omar (oncekey-serve)", g.RevokedBy)
	res, body = post(acme.ID)
	require.Equal(t, http.StatusConflict, res.StatusCode, body)
	require.Contains(t, body, "revoked already")
}
