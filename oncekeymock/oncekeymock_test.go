package oncekeymock_test

import (
	"github.com/oncekey/oncekey"
	"github.com/oncekey/oncekey/oncekeymock"
)

// The mocks implement their interfaces, and a struct embedding both is a store that keeps
// approvals, as the package doc says.
var (
	_ oncekey.Store         = (*oncekeymock.Store)(nil)
	_ oncekey.ApprovalStore = (*oncekeymock.ApprovalStore)(nil)
	_ interface {
		oncekey.Store
		oncekey.ApprovalStore
	} = struct {
		*oncekeymock.Store
		*oncekeymock.ApprovalStore
	}{}
)
