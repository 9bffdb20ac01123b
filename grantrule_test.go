package oncekey_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/oncekey/oncekey"
	"github.com/oncekey/oncekey/oncekeystore"
)

func TestGrantRuleMatch(t *testing.T) {
	args := []byte(`{"amount":100,"big":9007199254740993,"currency":"EUR","express":false,"note":null,"items":[{"sku":"a-1"}],"price":"12.50"}`)
	for rule, want := range map[string]bool{
		"":                                    true,
		"amount <= 100":                       true,
		"amount < 100":                        false,
		"amount == 100.0":                     true,
		"amount != 1e2":                       false,
		"amount >= 99.99 and amount <= 100":   true,
		`currency == "EUR"`:                   true,
		`currency != "EUR"`:                   false,
		`currency == "E\u0055R"`:              true,
		"express == false":                    true,
		"note == null":                        true,
		`items.0.sku == "a-1"`:                true,
		"big > 9007199254740992":              true, // exact, not as a float
		"missing <= 100":                      false,
		"missing != 100":                      false, // an absent path holds no comparison
		`price <= 100`:                        false, // a string is no number
		`amount == "100"`:                     false,
		`amount <= 100 and currency == "USD"`: false,
	} {
		r, err := oncekeystore.ParseGrantRule(rule)
		require.NoError(t, err, rule)
		require.Equal(t, want, r.Match(args), rule)
	}
	r, err := oncekeystore.ParseGrantRule("amount <= 100")
	require.NoError(t, err)
	require.False(t, r.Match([]byte(`not json`)))
}

func TestGrantRuleSyntax(t *testing.T) {
	for rule, want := range map[string]string{
		"amount":                  "want ==, !=, <, <=, > or >=",
		"amount <=":               "want a JSON literal",
		"amount <= 100 or x == 1": `want "and"`,
		`currency < "EUR"`:        "compares numbers only",
		"amount <= [1]":           "not an object or a list",
		"amount <= 100and x == 1": "want a space after the literal",
		"a..b == 1":               "empty segment",
		"== 1":                    "want a dotted path",
		"amount <= 100 and":       "want a dotted path",
	} {
		_, err := oncekeystore.ParseGrantRule(rule)
		require.ErrorContains(t, err, want, rule)
	}
}

type refundIn struct {
	OrderID     string `json:"order_id"`
	AmountCents int64  `json:"amount_cents"`
	Express     *bool  `json:"express"`
	Lines       []struct {
		SKU string `json:"sku"`
	} `json:"lines"`
}

func issueRefund(context.Context, refundIn) (string, error) { return "", nil }

func TestCheckGrantRuleAgainstInputType(t *testing.T) {
	reg := oncekey.NewRegistry()
	require.NoError(t, reg.Set(issueRefund, oncekey.Policy{Effect: oncekey.Effectful}))
	tool := reg.Tools()[0]
	require.NoError(t, reg.CheckGrantRule(tool, `amount_cents <= 10000 and order_id != "x" and express == true and lines.0.sku == "a"`))
	require.NoError(t, reg.CheckGrantRule(tool, `express == null`))
	require.ErrorContains(t, reg.CheckGrantRule(tool, "amount <= 100"), `has no JSON field "amount"`)
	require.ErrorContains(t, reg.CheckGrantRule(tool, `amount_cents == "100"`), "never equals or compares")
	require.ErrorContains(t, reg.CheckGrantRule(tool, `order_id <= 5`), "never equals or compares")
	require.ErrorContains(t, reg.CheckGrantRule("Unknown", "a == 1"), "no policy")
}
