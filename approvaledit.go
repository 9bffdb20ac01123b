package oncekey

import (
	"fmt"
	"strconv"
)

// editKey is the key strategy of an edit: the original's operation key (which digests the
// namespace and tenant already) and the episode its approval was replaced at.
type editKey struct {
	original string
	episode  int64
}

func (k editKey) parts(*callArgs) ([]keyPart, error) {
	return []keyPart{{"strategy", "edit"}, {"original key", k.original}, {"episode", strconv.FormatInt(k.episode, 10)}}, nil
}
func (editKey) fields() []string { return nil }
func (editKey) check() error     { return nil }

// EditKey returns the operation key of the call a person approved with edited arguments, in
// place of the call keyed original whose approval was replaced at episode, in tenant of
// namespace. It is "ok1_…" as every key, derived from the parts ("edit", original, episode), so
// every edit has a key of its own and no call of any other strategy shares it. Changing it
// orphans the records of edited calls: it is pinned by a test.
func EditKey(namespace, tenant, original string, episode int64) (string, error) {
	if episode < 1 {
		return "", fmt.Errorf("%w: the episode of an edit must be at least 1, not %d", ErrNoKey, episode)
	}
	return deriveKey(editKey{original, episode}, newCallArgs(Operation{Namespace: namespace, Tenant: tenant, Tool: "edit"}, nil))
}
